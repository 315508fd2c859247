//! When Kapsel's finalizer must be on the object (KOPF.md §4.6).
//!
//! Kopf blocks deletion with `kopf.zalando.org/KopfFinalizerMarker` only while it has
//! something to do at deletion: a non-optional on.delete handler that prematches the
//! object, or a daemon/timer. The finalizer is added (not while deleting) or removed
//! (when no longer needed) in a cycle that runs no changing handlers; during deletion
//! it is released once nothing is pending. All changes go out as JSON patches.

use serde_json::Value;

use super::causes::{CallbackEval, ChangingCause, ChangingHandler, prematch};
use super::deletion::{is_deletion_blocked, is_deletion_ongoing};

/// Whether any non-optional delete handler prematches the object (Kopf's
/// `requires_finalizer` of the changing registry). Daemons/timers are OR-ed by the caller.
pub(crate) fn changing_requires_finalizer(
    handlers: &[ChangingHandler],
    cause: &ChangingCause,
    body: &Value,
    eval: &mut CallbackEval<'_>,
) -> bool {
    handlers
        .iter()
        .any(|h| h.requires_finalizer && prematch(h, cause, body, eval))
}

/// What to do with the finalizer before running changing handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinalizerDecision {
    /// Nothing to change: run the changing handlers.
    Keep,
    /// Add it now; skip the changing handlers this cycle (they run on the next event).
    Add,
    /// Remove it now (no longer needed); skip the changing handlers this cycle.
    Remove,
}

/// Kopf's two checks in `process_resource_causes`.
pub(crate) fn finalizer_decision(
    body: &Value,
    finalizer: &str,
    required: bool,
) -> FinalizerDecision {
    let ongoing = is_deletion_ongoing(body);
    let blocked = is_deletion_blocked(body, finalizer);
    if required && !blocked && !ongoing {
        FinalizerDecision::Add
    } else if !required && blocked {
        FinalizerDecision::Remove
    } else {
        FinalizerDecision::Keep
    }
}

/// After the cycle: release a deleting object once nothing is pending (no handler
/// delays, no daemons still stopping). Never called for inconsistent states.
pub(crate) fn release_on_deletion(body: &Value, finalizer: &str, anything_pending: bool) -> bool {
    is_deletion_ongoing(body) && is_deletion_blocked(body, finalizer) && !anything_pending
}

#[cfg(test)]
mod tests {
    use super::super::causes::{CallbackSlot, Reason, detect_cause};
    use super::*;
    use serde_json::json;

    const FIN: &str = "kopf.zalando.org/KopfFinalizerMarker";

    #[test]
    fn decisions() {
        let fresh = json!({"metadata": {}});
        let blocked = json!({"metadata": {"finalizers": [FIN]}});
        let deleting = json!({"metadata": {"deletionTimestamp": "t", "finalizers": ["x", FIN]}});
        let deleting_free = json!({"metadata": {"deletionTimestamp": "t"}});
        assert_eq!(
            finalizer_decision(&fresh, FIN, true),
            FinalizerDecision::Add
        );
        assert_eq!(
            finalizer_decision(&blocked, FIN, true),
            FinalizerDecision::Keep
        );
        assert_eq!(
            finalizer_decision(&blocked, FIN, false),
            FinalizerDecision::Remove
        );
        assert_eq!(
            finalizer_decision(&fresh, FIN, false),
            FinalizerDecision::Keep
        );
        assert_eq!(
            finalizer_decision(&deleting_free, FIN, true),
            FinalizerDecision::Keep,
            "never added while deleting"
        );
        assert_eq!(
            finalizer_decision(&deleting, FIN, false),
            FinalizerDecision::Remove
        );
        assert!(release_on_deletion(&deleting, FIN, false));
        assert!(!release_on_deletion(&deleting, FIN, true));
        assert!(!release_on_deletion(&blocked, FIN, false));
        assert!(!is_deletion_ongoing(
            &json!({"metadata": {"deletionTimestamp": null}})
        ));
        assert!(!is_deletion_blocked(
            &json!({"metadata": {"finalizers": "x"}}),
            FIN
        ));
    }

    #[test]
    fn only_non_optional_delete_handlers_require_it() {
        let body = json!({"metadata": {"labels": {"a": "b"}}});
        let cause = detect_cause(false, &body, FIN, None, json!({}), false);
        let mut never = |_: &ChangingHandler, _: CallbackSlot<'_>, _: Option<&Value>| false;
        let optional = ChangingHandler {
            id: "d".into(),
            reason: Some(Reason::Delete),
            ..ChangingHandler::default()
        };
        let create = ChangingHandler {
            id: "c".into(),
            reason: Some(Reason::Create),
            ..ChangingHandler::default()
        };
        assert!(!changing_requires_finalizer(
            &[optional.clone(), create],
            &cause,
            &body,
            &mut never
        ));
        let required = ChangingHandler {
            requires_finalizer: true,
            ..optional
        };
        assert!(changing_requires_finalizer(
            std::slice::from_ref(&required),
            &cause,
            &body,
            &mut never
        ));
        let filtered = ChangingHandler {
            labels: vec![(
                "a".into(),
                super::super::causes::Criterion::Equals(json!("c")),
            )],
            ..required
        };
        assert!(
            !changing_requires_finalizer(&[filtered], &cause, &body, &mut never),
            "filters prematch"
        );
    }
}
