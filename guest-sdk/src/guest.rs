//! The component's exports: the SDK implements the generated `Guest` trait once,
//! for every guest, and dispatches to the handlers the attributes registered.

use std::time::Duration;

use crate::bindings::kapsel::operator::types as wit;
use crate::cause::{Cause, EventType, Reason, Resource};
use crate::host::{errors_mode_to_wit, outcome_to_wit, selector_to_wit};
use crate::lazy::{Body, Diff, Lazy};
use crate::registry::{self, IndexOutcome, Matcher, Registration};

struct Component;

/// The reason of a `when` call asking for an initial delay (the WIT's
/// `spawning.initial-delay`).
const INITIAL_DELAY: &str = "initial-delay";

/// The reason of a `when` call asking whether a handler selects a resource (the WIT's
/// `selection.chosen`).
const RESOURCE_SELECTION: &str = "resource-selection";

crate::bindings::export!(Component with_types_in crate::bindings);

fn matcher_to_wit(matcher: Matcher) -> wit::Matcher {
    match matcher {
        Matcher::Equals(text) => wit::Matcher::Equals(text),
        Matcher::Present => wit::Matcher::Present,
        Matcher::Absent => wit::Matcher::Absent,
    }
}

fn registration_to_wit(r: Registration) -> wit::Registration {
    let meta = |filters: Vec<registry::MetaFilter>| {
        filters
            .into_iter()
            .map(|f| wit::MetaFilter {
                key: f.key,
                matcher: matcher_to_wit(f.matcher),
            })
            .collect()
    };
    wit::Registration {
        id: r.id,
        kind: r.kind.into(),
        selectors: r.selectors.iter().map(selector_to_wit).collect(),
        labels: meta(r.labels),
        annotations: meta(r.annotations),
        field: r.field,
        value: r.value.map(matcher_to_wit),
        old_value: r.old_value.map(matcher_to_wit),
        new_value: r.new_value.map(matcher_to_wit),
        has_when: r.has_when,
        errors: r.errors.map(errors_mode_to_wit),
        timeout_seconds: r.timeout_seconds,
        retries: r.retries,
        backoff_seconds: r.backoff_seconds,
        optional: r.optional,
        deleted: r.deleted,
        interval_seconds: r.interval_seconds,
        initial_delay_seconds: r.initial_delay_seconds,
        idle_seconds: r.idle_seconds,
        sharp: r.sharp,
        param: r.param,
        deadline_ms: r.deadline_ms,
        memory_mib: r.memory_mib,
    }
}

fn parse_optional(what: &str, json: Option<String>) -> Result<Option<serde_json::Value>, String> {
    json.map(|text| {
        serde_json::from_str(&text)
            .map_err(|e| format!("the host sent invalid JSON as {what}: {e}"))
    })
    .transpose()
}

/// `old`/`new`, parsed when first read; absent from the host is absent.
fn lazy_part(what: &'static str, text: Option<String>) -> Lazy {
    text.map_or_else(
        || Lazy::from_value(serde_json::Value::Null),
        |text| Lazy::from_text(what, text),
    )
}

/// The SDK's [`Cause`] from the host's.
fn cause_from_wit(cause: wit::Cause) -> Result<Cause, String> {
    let body = Body::from_text(cause.body)
        .map_err(|e| format!("the host sent an invalid object body: {e}"))?;
    Ok(Cause {
        handler_id: cause.handler_id,
        kind: cause.kind.into(),
        resource: Resource {
            group: cause.resource.group,
            version: cause.resource.version,
            plural: cause.resource.plural,
            kind: cause.resource.kind,
            namespaced: cause.resource.namespaced,
        },
        event_type: cause.event_type.map(|t| match t {
            wit::EventType::Added => EventType::Added,
            wit::EventType::Modified => EventType::Modified,
            wit::EventType::Deleted => EventType::Deleted,
        }),
        reason: cause.reason.as_deref().and_then(Reason::parse),
        body,
        // JSON `null` is Kopf's `None`: absent.
        old: lazy_part("old", cause.old),
        new: lazy_part("new", cause.new),
        diff: cause
            .diff
            .map_or_else(|| Diff::from_items(Vec::new()), Diff::from_text),
        retry: cause.retry,
        started: {
            let time = crate::time::parse_rfc3339(&cause.started).ok_or_else(|| {
                format!("the host sent an invalid start time: `{}`", cause.started)
            })?;
            (cause.started, time)
        },
        runtime: Duration::try_from_secs_f64(cause.runtime_seconds).unwrap_or_default(),
        param: parse_optional("param", cause.param)?,
        memo: parse_optional("memo", cause.memo)?.unwrap_or_default(),
        memo_touched: false,
        patch: crate::Patch::default(),
    })
}

impl crate::bindings::Guest for Component {
    fn describe() -> wit::DescribeOutput {
        let registrations = registry::registrations();
        // Options the registration record has no field for go through `spawning` (a
        // guest without any never imports it).
        for r in registrations.iter().filter(|r| r.has_spawning_options()) {
            crate::host::declare_spawning(crate::host::SpawningOptions {
                id: r.id.clone(),
                cancellation_backoff_seconds: r.cancellation_backoff_seconds,
                cancellation_timeout_seconds: r.cancellation_timeout_seconds,
                cancellation_polling_seconds: r.cancellation_polling_seconds,
                initial_delay_callback: r.initial_delay_callback,
            });
        }
        registry::declare_logins();
        registry::declare_admission(&registrations);
        registry::declare_everything(&registrations);
        registry::declare_chosen(&registrations);
        wit::DescribeOutput {
            sdk_version: crate::SDK_VERSION.to_owned(),
            handlers: registrations.into_iter().map(registration_to_wit).collect(),
            permissions: crate::permissions::permissions()
                .iter()
                .map(|p| wit::Permission {
                    target: selector_to_wit(&p.target),
                    verbs: p.verbs.clone(),
                })
                .collect(),
        }
    }

    fn invoke(cause: wit::Cause) -> wit::Reply {
        let mut cause = match cause_from_wit(cause) {
            Ok(cause) => cause,
            Err(message) => {
                return wit::Reply {
                    outcome: wit::Outcome::Permanent(message),
                    patch: None,
                    memo: None,
                };
            }
        };
        let outcome = outcome_to_wit(registry::invoke(&mut cause));
        wit::Reply {
            outcome,
            patch: cause.patch.to_json(),
            memo: cause.memo_json(),
        }
    }

    fn index(cause: wit::Cause) -> wit::IndexOutcome {
        let mut cause = match cause_from_wit(cause) {
            Ok(cause) => cause,
            Err(message) => return wit::IndexOutcome::Permanent(message),
        };
        match registry::index(&mut cause) {
            IndexOutcome::Keep => wit::IndexOutcome::Keep,
            IndexOutcome::Entries(entries) => wit::IndexOutcome::Entries(entries),
            IndexOutcome::Temporary(message, delay) => {
                wit::IndexOutcome::Temporary((message, delay))
            }
            IndexOutcome::Permanent(message) => wit::IndexOutcome::Permanent(message),
            IndexOutcome::Failed(message) => wit::IndexOutcome::Failed(message),
        }
    }

    fn when(cause: wit::Cause) -> bool {
        // The host asks a timer's or daemon's initial delay the way it asks a filter.
        let asks_initial_delay = cause.reason.as_deref() == Some(INITIAL_DELAY);
        // And whether a handler selects a resource: its description is the host's.
        let asks_selection = cause.reason.as_deref() == Some(RESOURCE_SELECTION);
        match cause_from_wit(cause) {
            Ok(cause) if asks_selection => crate::host::resource_info()
                .is_some_and(|resource| registry::chooses(&cause, &resource)),
            Ok(cause) if asks_initial_delay => {
                if let Some(seconds) = registry::initial_delay(&cause) {
                    crate::host::answer_initial_delay(seconds);
                }
                true
            }
            Ok(cause) => registry::when(&cause),
            Err(message) => {
                crate::log::log(crate::log::Level::Error, &message);
                false
            }
        }
    }
}
