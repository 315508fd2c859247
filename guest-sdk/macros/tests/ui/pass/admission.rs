//! Admission attributes with every option; the registrations carry them, and the
//! deprecated single `operation` joins `operations`, as in Kopf.

#![deny(unsafe_code)]

use kapsel::Cause;

#[kapsel::on::validate(
    "kopf.dev", "v1", "kopfexamples",
    id = "check",
    operations = ["CREATE", "UPDATE", "CREATE"],
    subresource = "status",
    persistent,
    side_effects = true,
    ignore_failures = false,
    labels(app = present),
    field = "spec.field",
    value = "x",
    when = |_cause: &Cause| true,
    deadline_ms = 100,
)]
fn check(_cause: &Cause) -> kapsel::Result<()> {
    Err(kapsel::AdmissionError::new("no").code(422).into())
}

#[kapsel::on::mutate("kopfexamples")]
fn mark(cause: &mut Cause) {
    cause.patch.set_at(&["metadata", "labels", "seen"], "yes");
}

/// The error type itself, without `kapsel::Error`.
#[kapsel::on::validate("kopfexamples", operations = ["CONNECT"])]
fn direct() -> Result<(), kapsel::AdmissionError> {
    Err(kapsel::AdmissionError::new("direct").code(409))
}

#[allow(deprecated, reason = "Kopf's deprecated `operation`, on purpose")]
mod single {
    #[kapsel::on::validate("kopfexamples", operation = "DELETE")]
    fn single() {}
}

fn main() {
    let registrations = kapsel::testing::registrations();
    let of = |id: &str| {
        registrations
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .expect("registered")
    };
    let check = of("check/spec.field");
    assert_eq!(check["kind"], "validate");
    assert_eq!(
        check["admission"],
        kapsel::json!({"operations": ["CREATE", "UPDATE"], "subresource": "status",
                       "persistent": true, "side-effects": true, "ignore-failures": false})
    );
    assert_eq!(check["has-when"], true);
    assert_eq!(check["deadline-ms"], 100);
    assert_eq!(check["retries"], kapsel::Value::Null);
    let mark = of("mark");
    assert_eq!(mark["kind"], "mutate");
    assert_eq!(mark["admission"]["operations"], kapsel::json!([]));
    assert_eq!(of("single")["admission"]["operations"], kapsel::json!(["DELETE"]));
    let answer = kapsel::testing::admission::review("direct")
        .object(kapsel::json!({}))
        .call();
    assert_eq!((answer.message.as_deref(), answer.code), (Some("direct"), Some(409)));
}
