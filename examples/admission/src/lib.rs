//! Admission webhooks, as in Kopf's `examples/17-admission` (reduced to one handler of
//! each kind); in Kopf:
//!
//! ```python
//! @kopf.on.validate('kopfexamples')
//! def check_field(spec, **_):
//!     if spec.get('field') == 'forbidden':
//!         raise kopf.AdmissionError("field must not be forbidden", code=422)
//!
//! @kopf.on.mutate('kopfexamples', operations=['CREATE'])
//! def mark_seen(patch, **_):
//!     patch.metadata.labels['admission.kapsel.dev/seen'] = 'yes'
//! ```
//!
//! in Rust. The host serves the webhooks and configures the API server to call them, so
//! with the operator running, `kubectl apply` of a kopfexample whose `spec.field` is
//! `forbidden` fails with "field must not be forbidden" (HTTP 422), and every kopfexample
//! created gets the label `admission.kapsel.dev/seen: "yes"` before it is stored.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-admission`
//! (the component is `target/wasm32-wasip2/release/admission.wasm`).
//! Run: `kapsel run --embedded -A --admission-listen 127.0.0.1:9443
//! --admission-managed kopfexamples.kapsel.dev target/wasm32-wasip2/release/admission.wasm`
//! (the in-memory API server calls the webhooks it serves).
//! Test: `kapsel test target/wasm32-wasip2/release/admission.wasm tests/cases/`: reviews
//! sent to the handlers, and writes through a cluster that calls them.

use kapsel::{AdmissionError, Cause};

/// Refuses a kopfexample whose `spec.field` is `forbidden`, on creation and on update.
#[kapsel::on::validate("kopfexamples", operations = ["CREATE", "UPDATE"])]
fn check_field(cause: &Cause) -> kapsel::Result<()> {
    if cause.spec()["field"] == "forbidden" {
        return Err(AdmissionError::new("field must not be forbidden")
            .code(422)
            .into());
    }
    Ok(())
}

/// Labels every new kopfexample before it is stored.
#[kapsel::on::mutate("kopfexamples", operations = ["CREATE"])]
fn mark_seen(cause: &mut Cause) {
    cause
        .patch
        .set_at(&["metadata", "labels", "admission.kapsel.dev/seen"], "yes");
}

#[cfg(test)]
mod tests {
    use kapsel::admission::{Operation, UserInfo};
    use kapsel::json;
    use kapsel::testing::admission::review;

    fn kex(field: &str) -> kapsel::Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"namespace": "default", "name": "kopf-example-1"},
               "spec": {"field": field}})
    }

    #[test]
    fn refuses_a_forbidden_field_with_422() {
        for operation in [Operation::Create, Operation::Update] {
            let answer = review("check_field")
                .operation(operation)
                .object(kex("forbidden"))
                .user_info(UserInfo::new("alice"))
                .call();
            assert!(!answer.allowed, "{operation}");
            assert_eq!(
                (answer.message.as_deref(), answer.code),
                (Some("field must not be forbidden"), Some(422))
            );
        }
    }

    #[test]
    fn allows_any_other_field() {
        let answer = review("check_field").object(kex("value")).call();
        assert!(answer.allowed);
        assert_eq!((answer.message, answer.patch), (None, None));
    }

    #[test]
    fn labels_new_objects() {
        let answer = review("mark_seen")
            .operation(Operation::Create)
            .object(kex("value"))
            .call();
        assert!(answer.allowed);
        assert_eq!(
            answer.patch,
            Some(json!({"metadata": {"labels": {"admission.kapsel.dev/seen": "yes"}}}))
        );
    }

    #[test]
    fn declares_a_validating_and_a_mutating_webhook() {
        let declared = kapsel::testing::admission::declarations();
        assert_eq!(
            declared
                .iter()
                .map(|d| (
                    d["id"].as_str(),
                    d["webhook"].as_str(),
                    d["operations"].clone()
                ))
                .collect::<Vec<_>>(),
            [
                (
                    Some("check_field"),
                    Some("validating"),
                    json!(["CREATE", "UPDATE"])
                ),
                (Some("mark_seen"), Some("mutating"), json!(["CREATE"])),
            ]
        );
    }
}
