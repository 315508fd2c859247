//! Kopf's filter combinators (`kopf.all_`, `kopf.any_`, `kopf.none_`, `kopf.not_`) for a
//! handler's `when = ...`, and what the callback filters of the attributes read.
//!
//! ```
//! use kapsel::Cause;
//!
//! fn is_big(cause: &Cause) -> bool {
//!     cause.spec()["size"].as_u64().is_some_and(|size| size > 10)
//! }
//! fn is_paused(cause: &Cause) -> bool {
//!     cause.label("example.com/paused").is_some()
//! }
//!
//! // Kopf: when=kopf.all_([is_big, kopf.not_(is_paused)])
//! #[kapsel::on::update(
//!     "kopfexamples",
//!     when = kapsel::filters::all(&[&is_big, &kapsel::filters::not(is_paused)])
//! )]
//! fn resize(cause: &Cause) {}
//! ```
//!
//! A label, annotation or field filter may be a callback too, as Kopf's callables are:
//! a closure (or, for labels and annotations, a function) that gets the value it
//! filters on and the cause. The host evaluates the other filters itself; the callbacks
//! are evaluated in the guest, in the same call as the handler's `when`:
//!
//! ```
//! use kapsel::{Cause, Value};
//!
//! // Kopf: labels={'env': lambda value, **_: value and value.startswith('prod')}
//! #[kapsel::on::create(
//!     "kopfexamples",
//!     labels(env = |value, _| value.is_some_and(|v| v.starts_with("prod"))),
//!     field = "spec.size",
//!     value = |size, _| size.and_then(Value::as_u64).is_some_and(|s| s > 1),
//! )]
//! fn create_big_prod(cause: &Cause) {}
//! ```

use serde_json::Value;

use crate::Cause;

/// Passes when every filter passes (Kopf's `kopf.all_`); none passes.
pub fn all<'a>(filters: &'a [&'a dyn Fn(&Cause) -> bool]) -> impl Fn(&Cause) -> bool + 'a {
    move |cause| filters.iter().all(|filter| filter(cause))
}

/// Passes when any filter passes (Kopf's `kopf.any_`); none does not.
pub fn any<'a>(filters: &'a [&'a dyn Fn(&Cause) -> bool]) -> impl Fn(&Cause) -> bool + 'a {
    move |cause| filters.iter().any(|filter| filter(cause))
}

/// Passes when no filter passes (Kopf's `kopf.none_`).
pub fn none<'a>(filters: &'a [&'a dyn Fn(&Cause) -> bool]) -> impl Fn(&Cause) -> bool + 'a {
    move |cause| !filters.iter().any(|filter| filter(cause))
}

/// Passes when the filter does not (Kopf's `kopf.not_`).
pub fn not<F: Fn(&Cause) -> bool>(filter: F) -> impl Fn(&Cause) -> bool {
    move |cause| !filter(cause)
}

/// Calls a label or annotation callback: through a generic function, so that a closure's
/// parameter types are inferred, and clippy sees no closure called where it is written.
#[doc(hidden)]
pub fn check_text<F>(callback: F, value: Option<&str>, cause: &Cause) -> bool
where
    F: Fn(Option<&str>, &Cause) -> bool,
{
    callback(value, cause)
}

/// Calls a `value`, `old` or `new` callback (see [`check_text`]).
#[doc(hidden)]
pub fn check_value<F>(callback: F, value: Option<&Value>, cause: &Cause) -> bool
where
    F: Fn(Option<&Value>, &Cause) -> bool,
{
    callback(value, cause)
}

/// Calls a `when` filter (see [`check_text`]).
#[doc(hidden)]
pub fn check_cause<F: Fn(&Cause) -> bool>(filter: F, cause: &Cause) -> bool {
    filter(cause)
}

/// The value at a dotted path of the object (`spec.size`), for a `value` callback.
#[doc(hidden)]
pub fn field_value<'c>(cause: &'c Cause, path: &str) -> Option<&'c Value> {
    path.split('.')
        .try_fold(cause.body(), |value, key| value.get(key))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{cause, registrations, when};
    use crate::{Cause, Reason};

    fn is_web(cause: &Cause) -> bool {
        cause.label("app") == Some("web")
    }

    fn is_prod(value: Option<&str>, _: &Cause) -> bool {
        value.is_some_and(|v| v.starts_with("prod"))
    }

    #[crate::on::create(
        "kopfexamples",
        id = "callbacks", // with a field, its id is "callbacks/spec.size", as in Kopf
        labels(env = is_prod, app = "web"),
        annotations(note = |value, _| value.is_none()),
        field = "spec.size",
        value = |size, _| size.and_then(Value::as_u64).is_some_and(|s| s > 1)
    )]
    fn callbacks() {}

    #[crate::on::create(
        "kopfexamples",
        id = "combined",
        when = all(&[&is_web, &not(any(&[&|c: &Cause| c.label("x").is_some()]))])
    )]
    fn combined() {}

    fn object(id: &str, labels: Value, annotations: Value, size: u64) -> Cause {
        let body = json!({
            "metadata": {"labels": labels, "annotations": annotations},
            "spec": {"size": size},
        });
        cause()
            .handler_id(id)
            .changing(Reason::Create)
            .body(body)
            .build()
    }

    fn registration(id: &str) -> Value {
        registrations()
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_default()
    }

    #[test]
    fn callback_filters_are_left_to_the_guests_when() {
        let r = registration("callbacks/spec.size");
        assert_eq!(
            r["labels"],
            json!([{"key": "app", "matcher": {"equals": "web"}}]),
            "the host matches the literal label only"
        );
        assert_eq!(r["annotations"], json!([]));
        assert_eq!(
            (r["field"].clone(), r["value"].clone()),
            (json!("spec.size"), Value::Null)
        );
        assert_eq!(r["has-when"], json!(true));
    }

    #[test]
    fn callback_filters_all_have_to_pass() {
        let check = |labels, annotations, size| {
            when(&object("callbacks/spec.size", labels, annotations, size))
        };
        assert!(check(json!({"env": "prod-1"}), json!({}), 2));
        assert!(
            !check(json!({"env": "dev"}), json!({}), 2),
            "the label's callback"
        );
        assert!(!check(json!({}), json!({}), 2), "an absent label is None");
        assert!(
            !check(json!({"env": "prod"}), json!({"note": "x"}), 2),
            "the annotation's"
        );
        assert!(!check(json!({"env": "prod"}), json!({}), 1), "the value's");
    }

    #[test]
    fn combinators_combine() {
        let check = |labels| when(&object("combined", labels, json!({}), 0));
        assert!(check(json!({"app": "web"})));
        assert!(!check(json!({"app": "web", "x": "1"})));
        assert!(!check(json!({})));
        let c = object("combined", json!({}), json!({}), 0);
        assert!(none(&[&is_web])(&c));
        assert!(!any(&[])(&c) && all(&[])(&c));
        assert_eq!(field_value(&c, "spec.size"), Some(&json!(0)));
        assert_eq!(field_value(&c, "spec.nothing.here"), None);
    }
}
