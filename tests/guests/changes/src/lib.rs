//! A guest for the host's change-handling tests (KOPF.md §1.6, §3, §4, §5), on
//! `kopfexamples`.
//!
//! Every handler is filtered on a label `kapsel.test/<group>` being present, so an
//! object opts into a group of handlers by its labels and each test gets exactly the
//! handlers it is about (objects with none of these labels match nothing: Kopf's
//! "stealth mode"). The groups:
//!
//! - `basic`: `create_fn`, `update_fn`, `field_fn` (on `spec.field`), `delete_fn`
//!   (needs the finalizer), `delete_optional_fn` (optional), `resume_fn`;
//! - `stacked`: `stacked_fn`, one function registered as a creation, an update and a
//!   resume handler (one id), returning the kind and the reason it was called with;
//! - `optional`: `create_quiet` and the optional `delete_quiet` (no finalizer);
//! - `flaky`: `flaky` fails with a 1 s temporary error on attempts 0 and 1;
//! - `permanent`: `permanent_fn` fails permanently; `after_permanent` succeeds on
//!   its second attempt;
//! - `limits`: `limited` (`retries = 2`) and `slow` (`timeout = 1.5`) always fail
//!   temporarily;
//! - `trap`: `trapper` panics on its first attempt (backoff 0.5 s), `trap_permanent`
//!   always panics with `errors = "permanent"`, `trap_ignored` with `"ignored"`;
//! - `overruns`: `overrun` spins past its 100 ms call deadline on every attempt
//!   (`backoff = 7`, `retries = 3`), `overeat` allocates past its 16 MiB cap (`backoff =
//!   4`, `retries = 2`), `overrun_for_good` spins with `errors = "permanent"`;
//! - `long`: a handler with a 73-character id, failing once (0.3 s);
//! - `filters`: one handler per kind of filter (labels, annotations, field value,
//!   old/new transitions, `when`), and `by_managed_fields`, an event handler filtered
//!   on `metadata.managedFields` (sets `status.managed_mark`);
//! - `events`: `event_marker`, a raw event handler whose patch marks the object;
//! - `posting`: `post_events` posts a Kubernetes Event of each kind about its object
//!   (`kapsel::events::info`, `warn`, `exception`);
//! - `huge`: `huge_create` and `huge_update` return the size of `spec.blob` and the diff
//!   they were given, with long values cut to their length (objects larger than the
//!   annotations' limit);
//! - `lifecycle`: `lifecycle_one`, `lifecycle_two`, `lifecycle_three`, three creation
//!   handlers that succeed at once (which of them run in one cycle is the lifecycle's
//!   choice, `execution.lifecycle`), the first failing once when `spec.first_fails`;
//! - `loggers`: `logging_create` logs a line at each level, `logging_event` (a raw event
//!   handler) logs a warning (`posting.loggers` posts what the first logs, not the second);
//! - `consistency`: `consistency_create` and `consistency_update` succeed at once;
//!   `consistency_event`, a raw event handler, sets `status.consistency_seen` on every
//!   event once the creation is handled, so that after the first time its patch changes
//!   nothing and produces no new version: the operator then waits for an echo that never
//!   comes (`persistence.consistency_timeout`).
//!
//! Results land in `status.<handler id>`, so tests read what each handler saw there.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-changes`
//! (the component is `target/wasm32-wasip2/release/changes.wasm`).

use kapsel::{Cause, PermanentError, TemporaryError, Value, json};

// ---- basic: the whole lifecycle ------------------------------------------------------

/// Returns the field it saw at creation.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/basic" = present))]
fn create_fn(cause: &Cause) -> Value {
    json!({"message": "created", "field": cause.spec().get("field")})
}

/// Returns the essences and the diff it was given.
#[kapsel::on::update("kopfexamples", labels("kapsel.test/basic" = present))]
fn update_fn(cause: &Cause) -> Value {
    json!({"old": cause.old(), "new": cause.new(), "diff": cause.diff()})
}

/// Returns the field's old and new values and the cause it ran for.
#[kapsel::on::field("kopfexamples", field = "spec.field", labels("kapsel.test/basic" = present))]
fn field_fn(cause: &Cause) -> Value {
    json!({"old": cause.old(), "new": cause.new(), "reason": cause.reason()})
}

/// Requires the finalizer; logs so that tests see it ran (the object goes away).
#[kapsel::on::delete("kopfexamples", labels("kapsel.test/basic" = present))]
fn delete_fn(cause: &Cause) {
    kapsel::info!("deleting {}", cause.name().unwrap_or_default());
}

/// Optional: runs only because `delete_fn` holds the finalizer.
#[kapsel::on::delete("kopfexamples", optional, labels("kapsel.test/basic" = present))]
fn delete_optional_fn(cause: &Cause) {
    kapsel::info!("optionally deleting {}", cause.name().unwrap_or_default());
}

/// Returns the cause it ran for: `resume` alone, or `update` when the object changed
/// while the operator was down.
#[kapsel::on::resume("kopfexamples", labels("kapsel.test/basic" = present))]
fn resume_fn(cause: &Cause) -> Value {
    json!({"reason": cause.reason()})
}

// ---- stacked: one function, three registrations -----------------------------------------

/// One id under three kinds: returns the kind and the reason it was called with.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/stacked" = present))]
#[kapsel::on::update("kopfexamples", labels("kapsel.test/stacked" = present))]
#[kapsel::on::resume("kopfexamples", labels("kapsel.test/stacked" = present))]
fn stacked_fn(cause: &Cause) -> Value {
    json!({"kind": cause.kind(), "reason": cause.reason()})
}

// ---- optional: no finalizer ------------------------------------------------------------

/// Creation without any deletion handler that needs a finalizer.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/optional" = present))]
fn create_quiet() -> Value {
    json!({"done": true})
}

/// Never runs: nothing holds the finalizer for it.
#[kapsel::on::delete("kopfexamples", optional, labels("kapsel.test/optional" = present))]
fn delete_quiet(cause: &Cause) {
    kapsel::info!("quietly deleting {}", cause.name().unwrap_or_default());
}

// ---- errors and retries ----------------------------------------------------------------

/// Fails temporarily (retry in 1 s) on attempts 0 and 1, succeeds on attempt 2.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/flaky" = present))]
fn flaky(cause: &Cause) -> kapsel::Result<Value> {
    if cause.retry() < 2 {
        return Err(TemporaryError::new("not yet").with_delay(1.0).into());
    }
    Ok(json!({"retry": cause.retry(), "runtime": cause.runtime().as_secs_f64()}))
}

/// Fails for good at once.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/permanent" = present))]
fn permanent_fn() -> kapsel::Result<Value> {
    Err(PermanentError::new("nope").into())
}

/// Fails once (0.3 s), then succeeds: whichever of the two runs first, the cycle stays
/// open after `permanent_fn` fails, so that its record is seen on the object.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/permanent" = present))]
fn after_permanent(cause: &Cause) -> kapsel::Result<Value> {
    if cause.retry() == 0 {
        return Err(TemporaryError::new("wait").with_delay(0.3).into());
    }
    Ok(json!({"done": true}))
}

/// Two attempts in total (KOPF.md §5.2: `retries = N` means N attempts).
#[kapsel::on::create("kopfexamples", retries = 2, labels("kapsel.test/limits" = present))]
fn limited() -> kapsel::Result<Value> {
    Err(TemporaryError::new("always failing").with_delay(0.3).into())
}

/// The second failure would retry after the 1.5 s timeout: final at once.
#[kapsel::on::create("kopfexamples", timeout = 1.5, labels("kapsel.test/limits" = present))]
fn slow() -> kapsel::Result<Value> {
    Err(TemporaryError::new("too slow").with_delay(1.0).into())
}

/// Traps on the first attempt (an arbitrary error: retried after the backoff).
#[kapsel::on::create("kopfexamples", backoff = 0.5, labels("kapsel.test/trap" = present))]
fn trapper(cause: &Cause) -> Value {
    if cause.retry() == 0 {
        panic!("trapped on purpose");
    }
    json!({"recovered_at_retry": cause.retry()})
}

/// Always traps; arbitrary errors are final for it.
#[kapsel::on::create(
    "kopfexamples",
    errors = "permanent",
    labels("kapsel.test/trap" = present)
)]
fn trap_permanent() -> Value {
    panic!("trapped for good");
}

/// Always traps; arbitrary errors count as success without a result.
#[kapsel::on::create("kopfexamples", errors = "ignored", labels("kapsel.test/trap" = present))]
fn trap_ignored() -> Value {
    panic!("trapped and ignored");
}

// ---- overruns: what the sandbox stops is an arbitrary error --------------------------

/// Never returns: stopped at its 100 ms deadline, then retried after 7 s, 3 attempts.
#[kapsel::on::create(
    "kopfexamples",
    deadline_ms = 100,
    backoff = 7,
    retries = 3,
    labels("kapsel.test/overruns" = present)
)]
fn overrun() -> Value {
    spin()
}

/// Allocates without bound: stopped at its 16 MiB cap, then retried after 4 s, 2 attempts.
#[kapsel::on::create(
    "kopfexamples",
    memory_mib = 16,
    backoff = 4,
    retries = 2,
    labels("kapsel.test/overruns" = present)
)]
fn overeat() -> Value {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        chunks.push(vec![1; 1 << 20]);
        std::hint::black_box(&chunks);
    }
}

/// Never returns, and an arbitrary error is final for it.
#[kapsel::on::create(
    "kopfexamples",
    deadline_ms = 100,
    errors = "permanent",
    labels("kapsel.test/overruns" = present)
)]
fn overrun_for_good() -> Value {
    spin()
}

fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

/// A 73-character id: its annotation keys are cut and hashed (KOPF.md §4.3). Fails
/// once, so that its progress record stays on the object for a moment.
#[kapsel::on::create(
    "kopfexamples",
    id = "a_handler_whose_id_is_far_too_long_for_the_name_part_of_an_annotation_key",
    labels("kapsel.test/long" = present)
)]
fn long_id(cause: &Cause) -> kapsel::Result<Value> {
    if cause.retry() == 0 {
        return Err(TemporaryError::new("once more").with_delay(0.3).into());
    }
    Ok(json!({"done": true}))
}

// ---- filters (KOPF.md §3) --------------------------------------------------------------

#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/filters" = present, "kapsel.test/colour" = "red")
)]
fn by_label_value() -> bool {
    true
}

#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/filters" = present, "kapsel.test/size" = present)
)]
fn by_label_present() -> bool {
    true
}

#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/filters" = present, "kapsel.test/skip" = absent)
)]
fn by_label_absent() -> bool {
    true
}

#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/filters" = present),
    annotations("kapsel.test/mode" = "fast")
)]
fn by_annotation_value() -> bool {
    true
}

#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/filters" = present),
    annotations("kapsel.test/owner" = present)
)]
fn by_annotation_present() -> bool {
    true
}

#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/filters" = present),
    annotations("kapsel.test/skip" = absent)
)]
fn by_annotation_absent() -> bool {
    true
}

/// Id `by_field_value/spec.size`.
#[kapsel::on::create(
    "kopfexamples",
    field = "spec.size",
    value = 3,
    labels("kapsel.test/filters" = present)
)]
fn by_field_value() -> bool {
    true
}

/// A field without a value: the field must be present.
#[kapsel::on::create(
    "kopfexamples",
    field = "spec.size",
    labels("kapsel.test/filters" = present)
)]
fn by_field_present() -> bool {
    true
}

#[kapsel::on::create(
    "kopfexamples",
    field = "spec.size",
    value = absent,
    labels("kapsel.test/filters" = present, "kapsel.test/skip" = absent)
)]
fn by_field_absent() -> bool {
    true
}

/// Objects whose `spec.special` is `true`.
fn wants_special(cause: &Cause) -> bool {
    cause.spec().get("special") == Some(&Value::Bool(true))
}

#[kapsel::on::create(
    "kopfexamples",
    when = wants_special,
    labels("kapsel.test/filters" = present)
)]
fn by_when() -> bool {
    true
}

/// A label callback (Kopf's callable label filter): colours starting with `r`.
#[kapsel::on::create(
    "kopfexamples",
    labels(
        "kapsel.test/filters" = present,
        "kapsel.test/colour" = |colour, _| colour.is_some_and(|c| c.starts_with('r'))
    )
)]
fn by_label_callback() -> bool {
    true
}

/// Id `by_value_callback/spec.size`: a value callback, sizes of 4 and more.
#[kapsel::on::create(
    "kopfexamples",
    field = "spec.size",
    value = |size, _| size.and_then(Value::as_u64).is_some_and(|s| s >= 4),
    labels("kapsel.test/filters" = present)
)]
fn by_value_callback() -> bool {
    true
}

fn is_blue(cause: &Cause) -> bool {
    cause.label("kapsel.test/colour") == Some("blue")
}

fn is_skipped(cause: &Cause) -> bool {
    cause.label("kapsel.test/skip").is_some()
}

/// Kopf's combinators: special or blue, and not skipped.
#[kapsel::on::create(
    "kopfexamples",
    when = kapsel::filters::all(&[
        &kapsel::filters::any(&[&wants_special, &is_blue]),
        &kapsel::filters::not(is_skipped),
    ]),
    labels("kapsel.test/filters" = present)
)]
fn by_combinators() -> bool {
    true
}

/// A field filter on what every object has, its managed fields (which the host parses
/// only for such a filter): marks the object's `status.managed_mark`.
#[kapsel::on::event(
    "kopfexamples",
    field = "metadata.managedFields",
    labels("kapsel.test/filters" = present, "kapsel.test/colour" = "red")
)]
fn by_managed_fields(cause: &mut Cause) {
    if cause.status().get("managed_mark").is_none() {
        cause.patch.set("status.managed_mark", true);
    }
}

/// Transitions away from 3.
#[kapsel::on::update(
    "kopfexamples",
    field = "spec.size",
    old = 3,
    labels("kapsel.test/filters" = present)
)]
fn from_three(cause: &Cause) -> Value {
    json!({"old": cause.old(), "new": cause.new()})
}

/// Transitions to 5.
#[kapsel::on::update(
    "kopfexamples",
    field = "spec.size",
    new = 5,
    labels("kapsel.test/filters" = present)
)]
fn to_five(cause: &Cause) -> Value {
    json!({"old": cause.old(), "new": cause.new()})
}

/// Any change of the field (updates require it to change).
#[kapsel::on::update(
    "kopfexamples",
    field = "spec.size",
    labels("kapsel.test/filters" = present)
)]
fn size_changed(cause: &Cause) -> Value {
    json!({"old": cause.old(), "new": cause.new()})
}

// ---- events: raw event handlers' patches ---------------------------------------------

/// Marks the object, once, from a raw event handler: Kopf applies the patches of
/// `on.event` handlers with the event's other changes.
#[kapsel::on::event("kopfexamples", labels("kapsel.test/events" = present))]
fn event_marker(cause: &mut Cause) {
    if cause.status().get("event_mark").is_none() {
        let seen = cause.event_type().map_or("LISTED", |t| t.as_str());
        cause.patch.set("status.event_mark", seen);
    }
}

/// Posts one Event of each kind about its object: Normal `Noticed`, Warning
/// `Suspicious`, Error `Broken` (Kopf's `kopf.info`, `kopf.warn`, `kopf.exception`).
#[kapsel::on::create("kopfexamples", labels("kapsel.test/posting" = present))]
fn post_events(cause: &Cause) {
    let name = cause.name().unwrap_or_default();
    kapsel::events::info(cause.body(), "Noticed", &format!("noticed {name}"));
    kapsel::events::warn(cause.body(), "Suspicious", &format!("{name} looks odd"));
    kapsel::events::exception(cause.body(), "Broken", &format!("{name} is broken"));
}

// ---- huge: objects larger than the annotations' limit ----------------------------------

/// What a diff value looks like in a result: short values as they are, long ones as
/// their length (a result of the whole value would exceed the host's result limit).
fn summary(value: &Value) -> Value {
    match value.as_str() {
        Some(text) if text.len() > 200 => json!(format!("<{} chars>", text.len())),
        _ => value.clone(),
    }
}

/// Returns the size of the blob it saw.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/huge" = present))]
fn huge_create(cause: &Cause) -> Value {
    let blob = cause
        .spec()
        .get("blob")
        .and_then(Value::as_str)
        .unwrap_or_default();
    json!({"blob": blob.len()})
}

/// Returns the diff it was given, long values summarised, and whether the old blob was
/// given whole.
#[kapsel::on::update("kopfexamples", labels("kapsel.test/huge" = present))]
fn huge_update(cause: &Cause) -> Value {
    let diff: Vec<Value> = cause
        .diff()
        .iter()
        .map(|item| {
            let value = |v: &Option<Value>| v.as_ref().map_or(Value::Null, summary);
            json!([
                item.op.as_str(),
                item.path,
                value(&item.old),
                value(&item.new)
            ])
        })
        .collect();
    let old_blob = cause
        .old()
        .and_then(|old| old.pointer("/spec/blob"))
        .map(summary);
    json!({"diff": diff, "old_blob": old_blob})
}

// ---- lifecycle: which handlers run in one cycle --------------------------------------

/// The first of three creation handlers that succeed at once; or, when the object's
/// `spec.first_fails` is true, fails its first attempt with a retry due at once, so that
/// it is due again with one retry beside the others' none.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/lifecycle" = present))]
fn lifecycle_one(cause: &Cause) -> kapsel::Result<Value> {
    if cause.spec()["first_fails"] == true && cause.retry() == 0 {
        return Err(TemporaryError::new("once").with_delay(0.0).into());
    }
    Ok(json!({"done": 1}))
}

/// The second.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/lifecycle" = present))]
fn lifecycle_two() -> Value {
    json!({"done": 2})
}

/// The third.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/lifecycle" = present))]
fn lifecycle_three() -> Value {
    json!({"done": 3})
}

// ---- loggers: log lines posted as Events -----------------------------------------------

/// Logs one line at each level about the object.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/loggers" = present))]
fn logging_create(cause: &Cause) {
    let name = cause.name().unwrap_or_default();
    kapsel::debug!("{name}: a debug line");
    kapsel::info!("{name}: an info line");
    kapsel::warn!("{name}: a warning line");
    kapsel::error!("{name}: an error line");
}

/// Logs a warning at every event of the object.
#[kapsel::on::event("kopfexamples", labels("kapsel.test/loggers" = present))]
fn logging_event(cause: &Cause) {
    let name = cause.name().unwrap_or_default();
    kapsel::warn!("{name}: an event handler's line");
}

// ---- consistency: an echo that never comes ------------------------------------------

/// Succeeds at once.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/consistency" = present))]
fn consistency_create() -> Value {
    json!({"created": true})
}

/// Returns the new `spec.field`.
#[kapsel::on::update("kopfexamples", labels("kapsel.test/consistency" = present))]
fn consistency_update(cause: &Cause) -> Value {
    json!({"field": cause.spec().get("field")})
}

/// Once the creation is handled (the diff-base is stored), sets the same mark at every
/// event: from the second time on, a patch that changes nothing, so the API server
/// writes no new version.
#[kapsel::on::event("kopfexamples", labels("kapsel.test/consistency" = present))]
fn consistency_event(cause: &mut Cause) {
    if cause
        .annotation("kopf.zalando.org/last-handled-configuration")
        .is_some()
    {
        cause.patch.set("status.consistency_seen", "yes");
    }
}
