//! A resource's changing handlers as the pure core sees them ([`ChangingHandlers`]), what
//! a changing handler's cause carries ([`details`]), and the finalizer changes the
//! stage decides, logged as Kopf logs them.

use std::sync::Arc;

use serde_json::Value;

use super::super::calls::ChangeDetails;
use crate::handlers::{Handler, Matcher};
use crate::object_log::object_log;
use crate::reactor::changes::{
    self, CallbackSlot, ChangingCause, ChangingHandler, Criterion, FinalizerChange,
    FinalizerDecision, Reason,
};
use crate::runtime::HandlerKind;

/// A resource's changing handlers, mapped once onto what the pure core needs.
#[derive(Debug, Default, Clone)]
pub(crate) struct ChangingHandlers {
    pub(super) handlers: Vec<Arc<Handler>>,
    pub(super) views: Vec<ChangingHandler>,
    /// Every changing handler id (for loading and purging progress records).
    pub(super) owned: Vec<String>,
    /// Fields of field handlers outside the essence's usual scope.
    pub(super) extra_fields: Vec<Vec<String>>,
}

impl ChangingHandlers {
    pub(crate) fn new(handlers: &[Arc<Handler>]) -> ChangingHandlers {
        let views: Vec<ChangingHandler> = handlers.iter().map(|h| view(h)).collect();
        let mut owned: Vec<String> = Vec::new();
        for v in &views {
            if !owned.contains(&v.id) {
                owned.push(v.id.clone());
            }
        }
        let mut extra_fields: Vec<Vec<String>> = Vec::new();
        for field in views.iter().filter_map(|v| v.field.clone()) {
            if !extra_fields.contains(&field) {
                extra_fields.push(field);
            }
        }
        ChangingHandlers {
            handlers: handlers.to_vec(),
            views,
            owned,
            extra_fields,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }
}

/// The pure core's view of a registration.
fn view(handler: &Handler) -> ChangingHandler {
    let spec = &handler.spec;
    let meta = |filters: &[(String, Matcher)]| {
        filters
            .iter()
            .map(|(key, m)| {
                let criterion = match m {
                    Matcher::Equals(v) => Criterion::Equals(Value::String(v.clone())),
                    Matcher::Present => Criterion::Present,
                    Matcher::Absent => Criterion::Absent,
                };
                (key.clone(), criterion)
            })
            .collect()
    };
    // Field matchers carry JSON text; a value the SDK did not encode is compared as a string.
    let field_criterion = |m: Option<&Matcher>| match m {
        None => Criterion::Unset,
        Some(Matcher::Present) => Criterion::Present,
        Some(Matcher::Absent) => Criterion::Absent,
        Some(Matcher::Equals(json)) => Criterion::Equals(
            serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.clone())),
        ),
    };
    ChangingHandler {
        id: spec.id.clone(),
        guest: handler.guest.name().to_owned(),
        reason: match spec.kind {
            HandlerKind::Create => Some(Reason::Create),
            HandlerKind::Update => Some(Reason::Update),
            HandlerKind::Delete => Some(Reason::Delete),
            _ => None,
        },
        initial: spec.kind == HandlerKind::Resume,
        deleted: spec.deleted,
        requires_finalizer: spec.kind == HandlerKind::Delete && !spec.optional,
        field_needs_change: matches!(spec.kind, HandlerKind::Update | HandlerKind::Field),
        labels: meta(&spec.filters.labels),
        annotations: meta(&spec.filters.annotations),
        field: spec.filters.field.clone(),
        value: field_criterion(spec.filters.value.as_ref()),
        old: field_criterion(spec.old.as_ref()),
        new: field_criterion(spec.new.as_ref()),
        has_when: spec.has_when,
    }
}

/// Data matchers never call back into the guest (`when` is evaluated separately).
pub(super) fn no_callbacks(_: &ChangingHandler, _: CallbackSlot<'_>, _: Option<&Value>) -> bool {
    false
}

/// The finalizer change a decision asks for, logged as Kopf logs it (`None`: keep).
pub(super) fn finalizer_change(
    decision: FinalizerDecision,
    finalizer: &str,
    object: &str,
) -> Option<FinalizerChange> {
    match decision {
        FinalizerDecision::Add => {
            object_log!(
                debug,
                object,
                "Adding the finalizer, thus preventing the actual deletion."
            );
            Some(FinalizerChange::Add(finalizer.to_owned()))
        }
        FinalizerDecision::Remove => {
            object_log!(
                debug,
                object,
                "Removing the finalizer, as there are no handlers requiring it."
            );
            Some(FinalizerChange::Remove(finalizer.to_owned()))
        }
        FinalizerDecision::Keep => None,
    }
}

/// Releasing a deleted object: nothing is pending any more.
pub(super) fn release(finalizer: &str, object: &str) -> FinalizerChange {
    object_log!(
        debug,
        object,
        "Removing the finalizer, thus allowing the actual deletion."
    );
    FinalizerChange::Remove(finalizer.to_owned())
}

/// What a changing handler's cause carries: the reason and its view of old/new/diff.
pub(super) fn details(view: &ChangingHandler, cause: &ChangingCause) -> ChangeDetails {
    let (old, new, diff) = changes::handler_view(view, cause);
    ChangeDetails {
        reason: cause.reason.as_str().to_owned(),
        old: old.to_string(),
        new: new.to_string(),
        diff: diff.to_json().to_string(),
        sleeps: None,
    }
}
