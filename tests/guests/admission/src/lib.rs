//! A guest for the host's admission webhook tests (Kopf's `on.validate`, `on.mutate`), on
//! `kopfexamples` (`kopf.dev/v1`, `KopfExample`). Each handler acts on one value of
//! `spec.field` (or on one operation), so that a test picks the behaviour by what it
//! writes:
//!
//! - `refuse_forbidden` refuses `spec.field: forbidden` with "field must not be forbidden",
//!   code 422;
//! - `warn_long` allows, with the warning "spec.field is long", a `spec.field` longer than
//!   10 characters;
//! - `keep_immutable` (`UPDATE` only) refuses a change of `spec.immutable` (old against
//!   new) with "spec.immutable cannot change", code 403;
//! - `mark_seen` (mutating, `CREATE` only) adds the label `admission.kapsel.dev/seen: "yes"`;
//! - `on_delete` (mutating, `DELETE` only) allows and changes nothing;
//! - `fragile` traps (panics) on `spec.field: trap` and never returns on `spec.field: spin`
//!   (stopped by its 500 ms budget), under `failurePolicy: Fail`, for objects without the
//!   label `admission.kapsel.dev/failures`; `fragile_ignored` does the same, with
//!   `ignore_failures` (`failurePolicy: Ignore`), for objects labelled
//!   `admission.kapsel.dev/failures: ignore`;
//! - `dry_runs` (`side_effects`: `sideEffects: NoneOnDryRun`) warns "dry run seen" on a
//!   dry run.
//!
//! Build: `GUEST_FOLDERS=tests/guests/admission scripts/build-guests` (the component is
//! `admission.wasm`).

use kapsel::admission;
use kapsel::{AdmissionError, Cause};

/// The label `mark_seen` adds.
const SEEN: &str = "admission.kapsel.dev/seen";

fn field(cause: &Cause) -> &str {
    cause.spec()["field"].as_str().unwrap_or_default()
}

/// Refuses `spec.field: forbidden`, with code 422.
#[kapsel::on::validate("kopf.dev", "v1", "kopfexamples")]
fn refuse_forbidden(cause: &Cause) -> kapsel::Result<()> {
    if field(cause) == "forbidden" {
        return Err(AdmissionError::new("field must not be forbidden")
            .code(422)
            .into());
    }
    Ok(())
}

/// Allows a long `spec.field`, with a warning.
#[kapsel::on::validate("kopf.dev", "v1", "kopfexamples")]
fn warn_long(cause: &Cause) {
    if field(cause).chars().count() > 10 {
        admission::warn("spec.field is long");
    }
}

/// Refuses an update that changes `spec.immutable`.
#[kapsel::on::validate("kopf.dev", "v1", "kopfexamples", operations = ["UPDATE"])]
fn keep_immutable(cause: &Cause) -> kapsel::Result<()> {
    let old = cause.old().and_then(|old| old["spec"].get("immutable"));
    let new = cause.new().and_then(|new| new["spec"].get("immutable"));
    if old != new {
        return Err(AdmissionError::new("spec.immutable cannot change")
            .code(403)
            .into());
    }
    Ok(())
}

/// Labels every new kopfexample as seen.
#[kapsel::on::mutate("kopf.dev", "v1", "kopfexamples", operations = ["CREATE"])]
fn mark_seen(cause: &mut Cause) {
    cause.patch.set_at(&["metadata", "labels", SEEN], "yes");
}

/// Called on deletions; allows them and changes nothing.
#[kapsel::on::mutate("kopf.dev", "v1", "kopfexamples", operations = ["DELETE"])]
fn on_delete(cause: &Cause) {
    let operation = cause.admission().map(|request| request.operation);
    kapsel::info!("deleting, operation {operation:?}");
}

/// Traps on `spec.field: trap`, never returns on `spec.field: spin`.
#[kapsel::on::validate(
    "kopf.dev", "v1", "kopfexamples",
    labels("admission.kapsel.dev/failures" = absent),
    deadline_ms = 500,
)]
fn fragile(cause: &Cause) {
    misbehave(field(cause));
}

/// As `fragile`, with the API server ignoring its failures.
#[kapsel::on::validate(
    "kopf.dev", "v1", "kopfexamples",
    labels("admission.kapsel.dev/failures" = "ignore"),
    ignore_failures,
    deadline_ms = 500,
)]
fn fragile_ignored(cause: &Cause) {
    misbehave(field(cause));
}

fn misbehave(field: &str) {
    match field {
        "trap" => panic!("trapped on purpose"),
        "spin" => spin(),
        _ => {}
    }
}

fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

/// Has side effects, so it is told of dry runs: it warns of each.
/// The `when` filter of an admission handler sees the request too (Kopf's `when=` gets
/// `operation`, `userinfo`, `dryrun`): only creations by someone (the embedded API
/// server without RBAC names its writers `system:anonymous`).
fn created_by_admin(cause: &Cause) -> bool {
    let request = kapsel::admission::request();
    field(cause) == "when"
        && request.is_some_and(|request| {
            request.operation == admission::Operation::Create
                && !request.user_info.username.is_empty()
        })
}

#[kapsel::on::validate("kopf.dev", "v1", "kopfexamples", when = created_by_admin)]
fn refuse_when(_cause: &Cause) -> kapsel::Result<()> {
    Err(AdmissionError::new("the when filter saw the request")
        .code(409)
        .into())
}

#[kapsel::on::validate("kopf.dev", "v1", "kopfexamples", side_effects)]
fn dry_runs(cause: &Cause) {
    if cause.admission().is_some_and(|request| request.dry_run) {
        admission::warn("dry run seen");
    }
}

#[cfg(test)]
mod tests {
    use kapsel::admission::{Operation, UserInfo};
    use kapsel::json;
    use kapsel::testing::admission::{declarations, review};

    use super::SEEN;

    /// The label choosing which copy of the fragile validator an object meets.
    const FAILURES: &str = "admission.kapsel.dev/failures";

    fn kex(spec: kapsel::Value) -> kapsel::Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"name": "ex", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn refuses_forbidden_with_422_and_warns_of_long_fields() {
        let refused = review("refuse_forbidden")
            .object(kex(json!({"field": "forbidden"})))
            .call();
        assert_eq!(
            (refused.allowed, refused.message.as_deref(), refused.code),
            (false, Some("field must not be forbidden"), Some(422))
        );
        assert!(
            review("refuse_forbidden")
                .object(kex(json!({"field": "x"})))
                .call()
                .allowed
        );
        let long = review("warn_long")
            .object(kex(json!({"field": "more than ten"})))
            .call();
        assert_eq!(
            (long.allowed, long.warnings),
            (true, vec!["spec.field is long".to_owned()])
        );
        let short = review("warn_long")
            .object(kex(json!({"field": "0123456789"})))
            .call();
        assert!(short.warnings.is_empty());
    }

    #[test]
    fn immutable_fields_stay() {
        let update = |old, new| {
            review("keep_immutable")
                .operation(Operation::Update)
                .old_object(kex(json!({"immutable": old})))
                .object(kex(json!({"immutable": new})))
                .call()
        };
        let changed = update("a", "b");
        assert_eq!(
            (changed.allowed, changed.message.as_deref(), changed.code),
            (false, Some("spec.immutable cannot change"), Some(403))
        );
        assert!(update("a", "a").allowed);
    }

    #[test]
    fn marks_new_objects_and_lets_deletions_be() {
        let created = review("mark_seen").object(kex(json!({}))).call();
        assert_eq!(
            created.patch,
            Some(json!({"metadata": {"labels": {SEEN: "yes"}}}))
        );
        let deleted = review("on_delete")
            .operation(Operation::Delete)
            .old_object(kex(json!({})))
            .user_info(UserInfo::new("admin"))
            .call();
        assert_eq!((deleted.allowed, deleted.patch), (true, None));
    }

    #[test]
    fn warns_of_dry_runs_only() {
        let dry = review("dry_runs")
            .object(kex(json!({})))
            .dry_run(true)
            .call();
        assert_eq!(dry.warnings, ["dry run seen"]);
        let wet = review("dry_runs").object(kex(json!({}))).call();
        assert!(wet.warnings.is_empty());
    }

    #[test]
    fn refuses_rm_through_exec_only() {
        let exec = |command: &[&str]| {
            review("no_rm_exec")
                .operation(Operation::Connect)
                .subresource("exec")
                .object(json!({"kind": "PodExecOptions", "apiVersion": "v1", "command": command}))
                .call()
        };
        let refused = exec(&["rm", "-rf", "/"]);
        assert!(!refused.allowed);
        assert_eq!(refused.code, Some(403));
        assert_eq!(refused.message.as_deref(), Some("no rm through exec"));
        assert!(exec(&["ls"]).allowed);
    }

    #[test]
    fn declares_each_webhook_with_its_options() {
        let declared = declarations();
        let of = |id: &str| declared.iter().find(|d| d["id"] == id).cloned().expect(id);
        assert_eq!(declared.len(), 10);
        assert_eq!(of("no_rm_exec")["operations"], json!(["CONNECT"]));
        assert_eq!(of("no_rm_exec")["subresource"], "exec");
        assert_eq!(of("keep_immutable")["operations"], json!(["UPDATE"]));
        assert_eq!(of("mark_seen")["webhook"], "mutating");
        assert_eq!(of("on_delete")["operations"], json!(["DELETE"]));
        assert_eq!(of("fragile")["ignore-failures"], false);
        assert_eq!(of("fragile_ignored")["ignore-failures"], true);
        assert_eq!(of("dry_runs")["side-effects"], true);
        let registrations = kapsel::testing::registrations();
        let fragile_ignored = registrations
            .iter()
            .find(|r| r["id"] == "fragile_ignored")
            .expect("registered");
        assert_eq!(fragile_ignored["labels"][0]["key"], FAILURES);
        assert_eq!(fragile_ignored["deadline-ms"], 500);
    }
}

/// Refuses `rm` through exec: a CONNECT of `pods/exec`, whose body is the connection's
/// options (`PodExecOptions`).
#[kapsel::on::validate("pods", operations = ["CONNECT"], subresource = "exec")]
fn no_rm_exec(cause: &Cause) -> kapsel::Result<()> {
    let command = cause.body()["command"].as_array();
    if command.is_some_and(|c| c.iter().any(|arg| arg == "rm")) {
        return Err(AdmissionError::new("no rm through exec").code(403).into());
    }
    Ok(())
}
