//! Admission handlers called natively as the host's webhook server calls them: a
//! [`review`] of one write (its operation, object, old object, user, dry run) answered by
//! one `on::validate` or `on::mutate` handler, read back as the [`Answer`] the API server
//! would get (allowed or refused, with message and code, warnings, the patch).
//!
//! ```
//! use kapsel::admission::{Operation, UserInfo};
//! use kapsel::testing::admission::review;
//! use kapsel::json;
//!
//! #[kapsel::on::validate("kopfexamples")]
//! fn check_field(cause: &kapsel::Cause) -> kapsel::Result<()> {
//!     if cause.spec()["field"] == "forbidden" {
//!         return Err(kapsel::AdmissionError::new("field must not be forbidden").code(422).into());
//!     }
//!     Ok(())
//! }
//!
//! #[kapsel::on::mutate("kopfexamples", operations = ["CREATE"])]
//! fn mark_seen(cause: &mut kapsel::Cause) {
//!     if cause.admission().is_some_and(|r| r.dry_run) {
//!         kapsel::admission::warn("dry run");
//!     }
//!     cause.patch.set_at(&["metadata", "labels", "seen"], "yes");
//! }
//!
//! let answer = review("check_field").object(json!({"spec": {"field": "forbidden"}})).call();
//! assert!(!answer.allowed);
//! assert_eq!((answer.message.as_deref(), answer.code), (Some("field must not be forbidden"), Some(422)));
//!
//! let answer = review("mark_seen")
//!     .operation(Operation::Create)
//!     .object(json!({"metadata": {"name": "a"}}))
//!     .user_info(UserInfo::new("alice"))
//!     .dry_run(true)
//!     .call();
//! assert!(answer.allowed);
//! assert_eq!(answer.patch, Some(json!({"metadata": {"labels": {"seen": "yes"}}})));
//! assert_eq!(answer.warnings, ["dry run"]);
//! ```
//!
//! The handler is called whatever its filters and operations say (as [`invoke`] calls
//! any handler); [`when`](super::when) evaluates its `when` filter.

use serde_json::Value;

use super::{Outcome, cause, invoke};
pub use crate::admission::{Operation, Request, UserInfo};
use crate::diff::{DiffItem, DiffOp};
use crate::host::fake::admission as fake;
use crate::{Cause, HandlerKind, Reason};

/// Starts a review for the admission handler `handler_id`: a `CREATE` by nobody in
/// particular, not a dry run, until told otherwise.
pub fn review(handler_id: &str) -> Review {
    Review {
        handler_id: handler_id.to_owned(),
        request: Request::new(Operation::Create),
        object: None,
        old_object: None,
    }
}

/// One admission review, as the API server sends it; see [`review`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Review {
    handler_id: String,
    request: Request,
    object: Option<Value>,
    old_object: Option<Value>,
}

/// How the handler answered a [`Review`], as the API server gets it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Answer {
    /// The write may go on: the handler returned successfully.
    pub allowed: bool,
    /// Why it is refused: the failure's message.
    pub message: Option<String>,
    /// The refusal's HTTP code: the [`AdmissionError`](crate::AdmissionError)'s, or 500
    /// for any other failure (as Kopf's).
    pub code: Option<u16>,
    /// The warnings for the client ([`kapsel::admission::warn`](crate::admission::warn)),
    /// in order.
    pub warnings: Vec<String>,
    /// The merge patch the handler built (what a mutating handler changes).
    pub patch: Option<Value>,
    /// How the call ended, as [`invoke`] tells it.
    pub outcome: Outcome,
}

impl Review {
    /// What the write does.
    pub fn operation(mut self, operation: Operation) -> Self {
        self.request.operation = operation;
        self
    }

    /// The object written (the review's `object`); none on `DELETE`.
    pub fn object(mut self, object: Value) -> Self {
        self.object = Some(object);
        self
    }

    /// The object as it is stored (the review's `oldObject`), on `UPDATE` and `DELETE`.
    pub fn old_object(mut self, old_object: Value) -> Self {
        self.old_object = Some(old_object);
        self
    }

    /// Who writes.
    pub fn user_info(mut self, user_info: UserInfo) -> Self {
        self.request.user_info = user_info;
        self
    }

    /// Whether the write is a dry run.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.request.dry_run = dry_run;
        self
    }

    /// The subresource written (`status`, `scale`).
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.request.subresource = Some(subresource.to_owned());
        self
    }

    /// The write's options (`CreateOptions`, ...), as JSON.
    pub fn options(mut self, options: Value) -> Self {
        self.request.options = Some(options);
        self
    }

    /// The review's uid.
    pub fn uid(mut self, uid: &str) -> Self {
        self.request.uid = uid.to_owned();
        self
    }

    /// The cause the host hands the handler over, and makes the request the current one
    /// (what [`kapsel::admission::request`](crate::admission::request) answers) until the
    /// next review or [`reset`](super::reset): to call a handler function directly, then
    /// read [`warnings`].
    ///
    /// Its body is the object (the old object when there is none, on `DELETE`); `old()`
    /// and `new()` the old object and the object; its diff Kopf's between them; its reason
    /// `Validating` or `Mutating` by the handler's attribute.
    ///
    /// # Panics
    /// When the review has neither an object nor an old object (a test bug: the host
    /// refuses such a review, as Kopf does).
    pub fn cause(&self) -> Cause {
        let Some(body) = self.object.clone().or_else(|| self.old_object.clone()) else {
            panic!("kapsel::testing: a review needs an object or an old object");
        };
        let kind = crate::registry::kind_of(&self.handler_id).unwrap_or(HandlerKind::Validate);
        let reason = if kind == HandlerKind::Mutate {
            Reason::Mutating
        } else {
            Reason::Validating
        };
        let old = self.old_object.clone().unwrap_or(Value::Null);
        let new = self.object.clone().unwrap_or(Value::Null);
        let diff = serde_json::to_value(kopf_diff(&old, &new)).unwrap_or_default();
        fake::begin(Some(self.request.to_host()));
        cause()
            .handler_id(&self.handler_id)
            .kind(kind)
            .reason(reason)
            .body(body)
            .old(old)
            .new(new)
            .diff(diff)
            .build()
    }

    /// Calls the handler as the host's webhook server does (through the registry, by its
    /// id), and tells how it answered.
    ///
    /// # Panics
    /// As [`cause`](Self::cause).
    pub fn call(self) -> Answer {
        let mut cause = self.cause();
        // The host calls it as the event registration it is on the wire.
        cause.kind = HandlerKind::Event;
        let reply = invoke(&mut cause);
        let (allowed, message) = match &reply.outcome {
            Outcome::Done(_) => (true, None),
            Outcome::Temporary(message, _)
            | Outcome::Permanent(message)
            | Outcome::Failed(message) => (false, Some(message.clone())),
        };
        let code =
            (!allowed).then(|| fake::rejected().unwrap_or(crate::AdmissionError::DEFAULT_CODE));
        let warnings = fake::warnings();
        // The call is over: no request is current any more.
        fake::begin(None);
        Answer {
            allowed,
            message,
            code,
            warnings,
            patch: reply.patch,
            outcome: reply.outcome,
        }
    }
}

/// The warnings of the current admission call (since the last [`Review::cause`]).
pub fn warnings() -> Vec<String> {
    fake::warnings()
}

/// Every admission handler as `describe` names it to the host (JSON in the WIT's shape:
/// `id`, `webhook` (`validating`, `mutating`), `operations`, `subresource`, `persistent`,
/// `side-effects`, `ignore-failures`), one per id.
///
/// # Panics
/// As [`registrations`](super::registrations).
pub fn declarations() -> Vec<Value> {
    super::registrations();
    fake::declared()
        .into_iter()
        .map(|d| {
            serde_json::json!({
                "id": d.id,
                "webhook": if d.mutating { "mutating" } else { "validating" },
                "operations": d.operations,
                "subresource": d.subresource,
                "persistent": d.persistent,
                "side-effects": d.side_effects,
                "ignore-failures": d.ignore_failures,
            })
        })
        .collect()
}

/// Kopf's diff of two bodies (`kopf._cogs.structs.diffs.diff`): mappings key by key (added
/// keys, then removed ones, then common ones, each in key order), anything else as a
/// whole; `null` is absent.
fn kopf_diff(old: &Value, new: &Value) -> Vec<DiffItem> {
    let mut items = Vec::new();
    diff_into(&mut items, &mut Vec::new(), old, new);
    items
}

fn diff_into(items: &mut Vec<DiffItem>, path: &mut Vec<String>, old: &Value, new: &Value) {
    let item = |op, old: &Value, new: &Value| DiffItem {
        op,
        path: path.clone(),
        old: (!old.is_null()).then(|| old.clone()),
        new: (!new.is_null()).then(|| new.clone()),
    };
    match (old, new) {
        _ if old == new => {}
        (Value::Null, _) => items.push(item(DiffOp::Add, old, new)),
        (_, Value::Null) => items.push(item(DiffOp::Remove, old, new)),
        (Value::Object(a), Value::Object(b)) => {
            let mut added: Vec<&String> = b.keys().filter(|k| !a.contains_key(*k)).collect();
            let mut removed: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
            let mut common: Vec<&String> = a.keys().filter(|k| b.contains_key(*k)).collect();
            added.sort();
            removed.sort();
            common.sort();
            let null = Value::Null;
            let keys = added.into_iter().chain(removed).chain(common);
            for key in keys {
                path.push(key.clone());
                diff_into(
                    items,
                    path,
                    a.get(key).unwrap_or(&null),
                    b.get(key).unwrap_or(&null),
                );
                path.pop();
            }
        }
        _ => items.push(item(DiffOp::Change, old, new)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::{self, AdmissionError};

    #[kapsel::on::validate("kopfexamples", operations = ["CREATE", "UPDATE"])]
    fn admission_check(cause: &Cause) -> crate::Result<()> {
        let field = cause.spec()["field"].as_str().unwrap_or_default();
        if field.len() > 10 {
            admission::warn("spec.field is long");
        }
        match field {
            "forbidden" => Err(AdmissionError::new("field must not be forbidden")
                .code(422)
                .into()),
            "plain" => Err(AdmissionError::new("plainly refused").into()),
            "permanent" => Err(crate::PermanentError::new("refused for good").into()),
            "arbitrary" => Err("x".parse::<u8>().map(drop).unwrap_err().into()),
            _ => Ok(()),
        }
    }

    #[kapsel::on::mutate(
        "kopfexamples",
        operations = ["CREATE", "DELETE"],
        subresource = "status",
        side_effects,
        ignore_failures = true
    )]
    fn admission_mark(cause: &mut Cause) -> Value {
        let request = cause.admission().expect("an admission call");
        let seen = json!({
            "name": cause.name(),
            "reason": cause.reason().map(Reason::as_str),
            "kind": format!("{:?}", cause.kind()),
            "operation": request.operation.as_str(),
            "user": request.user_info.username,
            "groups": request.user_info.groups,
            "dry_run": request.dry_run,
            "subresource": request.subresource,
            "uid": request.uid,
            "options": request.options,
            "old": cause.old(),
            "new": cause.new(),
            "diff": cause.diff(),
        });
        cause.patch.set_at(&["metadata", "labels", "seen"], "yes");
        seen
    }

    #[allow(
        deprecated,
        reason = "Kopf's deprecated single `operation`, declared on purpose"
    )]
    mod deprecated {
        #[kapsel::on::validate("kopfexamples", id = "admission_single", operation = "DELETE", operations = ["UPDATE"], persistent)]
        fn single() {}
    }

    #[kapsel::on::create("kopfexamples")]
    fn admission_error_elsewhere() -> crate::Result<()> {
        Err(AdmissionError::new("not an admission call")
            .code(409)
            .into())
    }

    fn kex(field: &str) -> Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"name": "ex", "namespace": "ns"}, "spec": {"field": field}})
    }

    #[test]
    fn a_validator_allows_or_refuses_with_its_message_and_code() {
        crate::testing::reset();
        let allowed = review("admission_check").object(kex("fine")).call();
        assert_eq!(
            (allowed.allowed, allowed.message, allowed.code),
            (true, None, None)
        );
        let refused = review("admission_check").object(kex("forbidden")).call();
        assert!(!refused.allowed);
        assert_eq!(
            (refused.message.as_deref(), refused.code),
            (Some("field must not be forbidden"), Some(422))
        );
        assert_eq!(
            refused.outcome,
            Outcome::Permanent("field must not be forbidden".into())
        );
        // Kopf's default code, and 500 for any other failure.
        for (field, message) in [
            ("plain", "plainly refused"),
            ("permanent", "refused for good"),
            ("arbitrary", "invalid digit found in string"),
        ] {
            let answer = review("admission_check").object(kex(field)).call();
            assert_eq!(
                (answer.allowed, answer.message.as_deref(), answer.code),
                (false, Some(message), Some(500)),
                "{field}"
            );
        }
    }

    #[test]
    fn warnings_reach_the_answer_only_during_an_admission_call() {
        crate::testing::reset();
        let answer = review("admission_check")
            .object(kex("forbidden-but-long"))
            .call();
        assert_eq!(
            (answer.allowed, answer.warnings),
            (true, vec!["spec.field is long".to_owned()])
        );
        // Each review starts without warnings; none is current after it.
        let answer = review("admission_check").object(kex("fine")).call();
        assert!(answer.warnings.is_empty());
        assert_eq!(admission::request(), None);
        admission::warn("outside any review");
        assert!(warnings().is_empty());
        // Called directly, with the review's cause.
        let cause = review("admission_check")
            .object(kex("long enough to warn"))
            .cause();
        assert_eq!(admission_check(&cause), Ok(()));
        assert_eq!(warnings(), ["spec.field is long"]);
        let error = admission_check(&review("admission_check").object(kex("forbidden")).cause())
            .unwrap_err();
        assert_eq!(error.admission_code(), Some(422));
    }

    #[test]
    fn a_mutator_sees_the_request_and_returns_its_patch() {
        crate::testing::reset();
        let answer = review("admission_mark")
            .operation(Operation::Create)
            .object(kex("new"))
            .user_info(UserInfo::new("alice").groups(["devs"]))
            .dry_run(true)
            .subresource("status")
            .uid("u-1")
            .options(json!({"fieldManager": "kubectl"}))
            .call();
        assert!(answer.allowed);
        assert_eq!(
            answer.patch,
            Some(json!({"metadata": {"labels": {"seen": "yes"}}}))
        );
        let Outcome::Done(Some(seen)) = answer.outcome else {
            panic!("{:?}", answer.outcome)
        };
        assert_eq!(
            seen,
            json!({
                "name": "ex", "reason": "mutating", "kind": "Mutate", "operation": "CREATE",
                "user": "alice", "groups": ["devs"], "dry_run": true, "subresource": "status",
                "uid": "u-1", "options": {"fieldManager": "kubectl"},
                "old": null, "new": kex("new"), "diff": [["add", [], null, kex("new")]],
            })
        );
    }

    #[test]
    fn on_delete_the_body_is_the_old_object() {
        crate::testing::reset();
        let answer = review("admission_mark")
            .operation(Operation::Delete)
            .old_object(kex("old"))
            .call();
        let Outcome::Done(Some(seen)) = answer.outcome else {
            panic!("{:?}", answer.outcome)
        };
        assert_eq!(
            (&seen["operation"], &seen["old"], &seen["new"]),
            (&json!("DELETE"), &kex("old"), &Value::Null)
        );
        assert_eq!(seen["diff"], json!([["remove", [], kex("old"), null]]));
        let update = review("admission_check")
            .operation(Operation::Update)
            .old_object(kex("old"))
            .object(kex("new"))
            .cause();
        assert_eq!(
            (update.spec()["field"].as_str(), update.diff().len()),
            (Some("new"), 1)
        );
        assert_eq!(update.reason(), Some(Reason::Validating));
    }

    #[test]
    fn an_admission_error_elsewhere_is_a_permanent_failure_without_a_refusal() {
        crate::testing::reset();
        let mut create = cause()
            .handler_id("admission_error_elsewhere")
            .changing(Reason::Create)
            .build();
        let reply = invoke(&mut create);
        assert_eq!(
            reply.outcome,
            Outcome::Permanent("not an admission call".into())
        );
        assert_eq!(fake::rejected(), None);
    }

    #[test]
    fn the_host_is_told_each_admission_handler_and_its_webhook() {
        let declared = declarations();
        let of = |id: &str| {
            declared
                .iter()
                .find(|d| d["id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("{id} not in {declared:?}"))
        };
        assert_eq!(
            of("admission_check"),
            json!({"id": "admission_check", "webhook": "validating",
                   "operations": ["CREATE", "UPDATE"], "subresource": null, "persistent": false,
                   "side-effects": false, "ignore-failures": false})
        );
        assert_eq!(
            of("admission_mark"),
            json!({"id": "admission_mark", "webhook": "mutating",
                   "operations": ["CREATE", "DELETE"], "subresource": "status",
                   "persistent": false, "side-effects": true, "ignore-failures": true})
        );
        // Kopf joins the deprecated `operation` to `operations`.
        assert_eq!(
            of("admission_single")["operations"],
            json!(["UPDATE", "DELETE"])
        );
        assert_eq!(of("admission_single")["persistent"], json!(true));
        assert!(
            !declared
                .iter()
                .any(|d| d["id"] == "admission_error_elsewhere")
        );
        let registrations = crate::testing::registrations();
        let check = registrations
            .iter()
            .find(|r| r["id"] == "admission_check")
            .expect("registered");
        assert_eq!(check["kind"], "validate");
        assert_eq!(
            check["admission"]["operations"],
            json!(["CREATE", "UPDATE"])
        );
    }

    #[test]
    fn diffs_as_kopf_does() {
        let old = json!({"spec": {"a": 1, "gone": true, "list": [1]}, "status": null});
        let new = json!({"spec": {"a": 2, "new": "x", "list": [1, 2]}});
        let diff = serde_json::to_value(kopf_diff(&old, &new)).unwrap();
        assert_eq!(
            diff,
            json!([
                ["add", ["spec", "new"], null, "x"],
                ["remove", ["spec", "gone"], true, null],
                ["change", ["spec", "a"], 1, 2],
                ["change", ["spec", "list"], [1], [1, 2]],
            ])
        );
        let created = serde_json::to_value(kopf_diff(&Value::Null, &new)).unwrap();
        assert_eq!(created, json!([["add", [], null, new]]));
        assert!(kopf_diff(&new, &new).is_empty());
    }
}
