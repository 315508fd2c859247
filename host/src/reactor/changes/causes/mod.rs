//! Cause detection and handler selection for changing handlers (KOPF.md §1.6, §3).
//!
//! The decision order is Kopf's exactly: gone, free, delete, create (which forces
//! `initial` off, so creation never mixes with resuming), resume, noop, update. The
//! selection then mirrors Kopf's changing registry: the reason must match (or the
//! handler has none: resume and field handlers), resume handlers only on initial
//! sightings and during deletion only with `deleted=true`, then the label, annotation,
//! field/value and old/new filters, then deduplication by (guest, id). `when` and value
//! callbacks live in the guest, so they are left to the caller's evaluator.

use std::collections::HashSet;

use serde_json::Value;

use super::deletion::{is_deletion_blocked, is_deletion_ongoing};
use super::diff::{Diff, diff, reduce, resolve};
use crate::pyformat::py_eq;

/// Why a changing cycle runs (Kopf's `Reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Reason {
    Create,
    Update,
    Delete,
    Resume,
    Noop,
    Free,
    Gone,
}

impl Reason {
    /// The word stored as a record's `purpose`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Create => "create",
            Reason::Update => "update",
            Reason::Delete => "delete",
            Reason::Resume => "resume",
            Reason::Noop => "noop",
            Reason::Free => "free",
            Reason::Gone => "gone",
        }
    }

    #[cfg(test)]
    pub(crate) fn parse(text: &str) -> Option<Reason> {
        [
            Reason::Create,
            Reason::Update,
            Reason::Delete,
            Reason::Resume,
            Reason::Noop,
            Reason::Free,
            Reason::Gone,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }

    /// Whether handlers run for it (Kopf's `HANDLER_REASONS`).
    pub(crate) fn runs_handlers(self) -> bool {
        matches!(
            self,
            Reason::Create | Reason::Update | Reason::Delete | Reason::Resume
        )
    }
}

/// Kopf's `TITLES`, used in "<Title> is processed: …" (capitalised there).
pub(crate) fn title(purpose: &str) -> String {
    match purpose {
        "create" => "creation".into(),
        "update" => "updating".into(),
        "delete" => "deletion".into(),
        "resume" => "resuming".into(),
        other => format!("'{other}'"),
    }
}

/// Upper-case the first letter (Python's `str.capitalize` on Kopf's lower-case titles).
pub(crate) fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A detected changing cause.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChangingCause {
    pub(crate) reason: Reason,
    pub(crate) initial: bool,
    /// Deletion is ongoing (`metadata.deletionTimestamp` is set).
    pub(crate) deleted: bool,
    /// The stored diff-base essence, if any.
    pub(crate) old: Option<Value>,
    /// The current essence (absent only for odd inputs).
    pub(crate) new: Option<Value>,
    pub(crate) diff: Diff,
}

/// Kopf's `detect_changing_cause`, decision for decision.
pub(crate) fn detect_cause(
    event_deleted: bool,
    body: &Value,
    finalizer: &str,
    old: Option<Value>,
    new: Value,
    initial: bool,
) -> ChangingCause {
    let diff = diff(old.as_ref().unwrap_or(&Value::Null), &new);
    let deleted = is_deletion_ongoing(body);
    let (reason, initial) = if event_deleted {
        (Reason::Gone, initial)
    } else if deleted && !is_deletion_blocked(body, finalizer) {
        (Reason::Free, initial)
    } else if deleted {
        (Reason::Delete, initial)
    } else if old.is_none() {
        (Reason::Create, false)
    } else if diff.is_empty() && initial {
        (Reason::Resume, initial)
    } else if diff.is_empty() {
        (Reason::Noop, initial)
    } else {
        (Reason::Update, initial)
    };
    ChangingCause {
        reason,
        initial,
        deleted,
        old,
        new: Some(new),
        diff,
    }
}

/// A label/annotation/field criterion (Kopf's literal, `PRESENT`, `ABSENT`, callable).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Criterion {
    /// Not given (for `value`: "present before or after"; for `old`/`new`: not checked).
    #[default]
    Unset,
    Present,
    Absent,
    /// Equality (labels/annotations: a JSON string; fields: any JSON value).
    Equals(Value),
    /// A guest-side callback, evaluated by the caller.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the contract has data matchers only (callables go through `when`); Kopf's callable filters map here when it grows them"
        )
    )]
    Callback,
}

/// Which criterion a guest callback is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallbackSlot<'a> {
    Label(&'a str),
    Annotation(&'a str),
    Value,
    Old,
    New,
}

/// A changing handler as far as the pure core needs it; the lead maps the registry onto it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ChangingHandler {
    /// The full id (with the `/<field>` suffix for field handlers).
    pub(crate) id: String,
    /// The guest that owns the handler (for deduplication).
    pub(crate) guest: String,
    /// `None` for on.resume, on.field and sub-handlers.
    pub(crate) reason: Option<Reason>,
    /// An on.resume handler.
    pub(crate) initial: bool,
    /// on.resume `deleted=True`.
    pub(crate) deleted: bool,
    /// A non-optional on.delete handler.
    pub(crate) requires_finalizer: bool,
    /// on.update and on.field require the field to have changed.
    pub(crate) field_needs_change: bool,
    pub(crate) labels: Vec<(String, Criterion)>,
    pub(crate) annotations: Vec<(String, Criterion)>,
    pub(crate) field: Option<Vec<String>>,
    pub(crate) value: Criterion,
    pub(crate) old: Criterion,
    pub(crate) new: Criterion,
    /// Has a `when` filter: the caller evaluates it last, on the returned list.
    pub(crate) has_when: bool,
}

/// Evaluates guest callbacks: `(handler, slot, value) -> passes`.
pub(crate) type CallbackEval<'e> =
    dyn FnMut(&ChangingHandler, CallbackSlot<'_>, Option<&Value>) -> bool + 'e;

fn meta_ok(
    handler: &ChangingHandler,
    body: &Value,
    which: &str,
    criteria: &[(String, Criterion)],
    eval: &mut CallbackEval<'_>,
) -> bool {
    let map = body
        .get("metadata")
        .and_then(|m| m.get(which))
        .and_then(Value::as_object);
    criteria.iter().all(|(key, criterion)| {
        let found = map.and_then(|m| m.get(key));
        match criterion {
            Criterion::Unset => true,
            Criterion::Present => found.is_some(),
            Criterion::Absent => found.is_none(),
            Criterion::Equals(v) => found.is_some_and(|f| f == v),
            Criterion::Callback => {
                let slot = if which == "labels" {
                    CallbackSlot::Label(key)
                } else {
                    CallbackSlot::Annotation(key)
                };
                eval(handler, slot, found)
            }
        }
    })
}

fn criterion_ok(
    handler: &ChangingHandler,
    criterion: &Criterion,
    slot: CallbackSlot<'_>,
    value: Option<&Value>,
    eval: &mut CallbackEval<'_>,
) -> bool {
    match criterion {
        Criterion::Unset => true,
        Criterion::Present => value.is_some(),
        Criterion::Absent => value.is_none(),
        Criterion::Equals(v) => value.is_some_and(|x| py_eq(x, v)),
        Criterion::Callback => eval(handler, slot, value),
    }
}

/// Labels, annotations and field/value: Kopf's "prematch" (no change checks, no `when`).
/// Stealth mode and the finalizer decision use this.
pub(crate) fn prematch(
    handler: &ChangingHandler,
    cause: &ChangingCause,
    body: &Value,
    eval: &mut CallbackEval<'_>,
) -> bool {
    if !meta_ok(handler, body, "labels", &handler.labels, eval)
        || !meta_ok(handler, body, "annotations", &handler.annotations, eval)
    {
        return false;
    }
    let Some(field) = &handler.field else {
        return true;
    };
    // `new` first, as Kopf does, to avoid `old` callbacks when `new` passes.
    let values = [
        resolve(cause.new.as_ref(), field),
        resolve(cause.old.as_ref(), field),
    ];
    match &handler.value {
        Criterion::Unset | Criterion::Present => values.iter().any(Option::is_some),
        Criterion::Absent => values.iter().any(Option::is_none),
        Criterion::Equals(v) => values.iter().any(|x| x.is_some_and(|x| py_eq(x, v))),
        Criterion::Callback => values
            .iter()
            .any(|x| eval(handler, CallbackSlot::Value, *x)),
    }
}

/// Stealth mode (KOPF.md §3): no changing handler of the resource prematches the
/// object, so nothing is logged, stored or patched for it by the changing machinery.
pub(crate) fn is_stealth(
    handlers: &[ChangingHandler],
    cause: &ChangingCause,
    body: &Value,
    eval: &mut CallbackEval<'_>,
) -> bool {
    !handlers.iter().any(|h| prematch(h, cause, body, eval))
}

/// The old/new checks of on.update/on.field (Kopf's `_matches_field_changes`).
fn field_changes_ok(
    handler: &ChangingHandler,
    cause: &ChangingCause,
    eval: &mut CallbackEval<'_>,
) -> bool {
    let Some(field) = &handler.field else {
        return true;
    };
    let old = resolve(cause.old.as_ref(), field);
    let new = resolve(cause.new.as_ref(), field);
    let changed = match (old, new) {
        (None, None) => false,
        (Some(a), Some(b)) => !py_eq(a, b),
        _ => true,
    };
    (!handler.field_needs_change || changed)
        && criterion_ok(handler, &handler.old, CallbackSlot::Old, old, eval)
        && criterion_ok(handler, &handler.new, CallbackSlot::New, new, eval)
}

/// The handlers for a cause, in declaration order, deduplicated by (guest, id).
/// Returns indices into `handlers`; the caller evaluates `when` on them last.
pub(crate) fn select_handlers(
    handlers: &[ChangingHandler],
    cause: &ChangingCause,
    body: &Value,
    eval: &mut CallbackEval<'_>,
) -> Vec<usize> {
    let mut seen = HashSet::new();
    let mut selected = Vec::new();
    for (index, h) in handlers.iter().enumerate() {
        if h.reason.is_some_and(|r| r != cause.reason) {
            continue;
        }
        if h.initial && !cause.initial {
            continue; // resume handlers only on the first sighting in this process
        }
        if h.initial && cause.deleted && !h.deleted {
            continue; // nor during deletion, unless asked for
        }
        if !prematch(h, cause, body, eval) || !field_changes_ok(h, cause, eval) {
            continue;
        }
        if seen.insert((h.guest.clone(), h.id.clone())) {
            selected.push(index);
        }
    }
    selected
}

/// The `old`, `new` and `diff` a handler receives: essences, or for field handlers the
/// field's values and the diff re-rooted at the field.
pub(crate) fn handler_view(
    handler: &ChangingHandler,
    cause: &ChangingCause,
) -> (Value, Value, Diff) {
    match &handler.field {
        None => (
            cause.old.clone().unwrap_or(Value::Null),
            cause.new.clone().unwrap_or(Value::Null),
            cause.diff.clone(),
        ),
        Some(field) => (
            resolve(cause.old.as_ref(), field)
                .cloned()
                .unwrap_or(Value::Null),
            resolve(cause.new.as_ref(), field)
                .cloned()
                .unwrap_or(Value::Null),
            reduce(&cause.diff, field),
        ),
    }
}

#[cfg(test)]
mod tests;
