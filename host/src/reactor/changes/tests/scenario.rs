//! End-to-end runs of the pure core on plain data with a fake clock: KOPF.md §4.9's
//! captured create → update → delete sequence, continuing from state written by Kopf,
//! and a superseded cause. Each step is one processing cycle, as the integration will
//! drive it; the patches are applied to the body as the API server would.

use std::cell::RefCell;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value, json};

use super::super::progress::parse_time;
use super::super::*;
use crate::handlers::execution::{Attempt, RetryPolicy, decide, display_name, precheck};
use crate::runtime::HandlerKind;

const FIN: &str = "kopf.zalando.org/KopfFinalizerMarker";

fn t0() -> DateTime<Utc> {
    parse_time("2026-11-30T03:32:51.611056+00:00").expect("time")
}

fn ms(n: i64) -> DateTime<Utc> {
    t0() + TimeDelta::milliseconds(n)
}

fn p(path: &str) -> Vec<String> {
    path.split('.').map(str::to_owned).collect()
}

/// A handler of guest `g` for one reason.
pub(super) fn on(id: &str, reason: Reason) -> ChangingHandler {
    ChangingHandler {
        id: id.into(),
        guest: "g".into(),
        reason: Some(reason),
        ..Default::default()
    }
}

/// A handler of guest `g` for changes of the field at `path` (`on.field`).
pub(super) fn on_field(path: &str) -> ChangingHandler {
    ChangingHandler {
        id: format!("field_fn/{path}"),
        guest: "g".into(),
        field: Some(p(path)),
        field_needs_change: true,
        ..Default::default()
    }
}

/// A deletion handler of guest `g` (it needs the finalizer).
pub(super) fn on_delete(id: &str) -> ChangingHandler {
    ChangingHandler {
        requires_finalizer: true,
        ..on(id, Reason::Delete)
    }
}

fn handlers() -> Vec<ChangingHandler> {
    vec![
        on("create_fn", Reason::Create),
        on("create_2", Reason::Create),
        on("update_fn", Reason::Update),
        on_field("spec.field"),
        on_delete("delete_fn"),
    ]
}

/// What one cycle produced.
pub(super) struct Step {
    pub(super) patch: Patch,
    /// What the diff-base and progress storages could not read.
    pub(super) warnings: Vec<String>,
    pub(super) json_patch: Option<Value>,
    pub(super) log: Vec<String>,
    pub(super) ran: Vec<String>,
    /// The API server would refuse the JSON patch (its `test` or a path fails): only
    /// for bodies no API server sends (see `properties`); the body is left as it was.
    pub(super) refused: bool,
    wakeup: Wakeup,
}

/// RFC 7386 merge-patch, as the API server applies it.
pub(in crate::reactor::changes) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (k, v) in patch {
            if v.is_null() {
                map.shift_remove(k);
            } else {
                merge(map.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// One processing cycle of the per-object pipeline, with the guest replaced by `invoke`;
/// the body is well-formed (the storages read it without warnings).
fn step(
    body: &mut Value,
    now: DateTime<Utc>,
    initial: bool,
    invoke: &mut dyn FnMut(&str, &ChangingCause, &ChangingHandler) -> Attempt,
) -> Step {
    let step = step_with(&handlers(), body, now, initial, invoke);
    assert!(step.warnings.is_empty(), "{:?}", step.warnings);
    assert!(
        !step.refused,
        "our JSON patch applies to the body it is for"
    );
    step
}

/// One processing cycle of `handlers` on whatever the body holds.
pub(super) fn step_with(
    handlers: &[ChangingHandler],
    body: &mut Value,
    now: DateTime<Utc>,
    initial: bool,
    invoke: &mut dyn FnMut(&str, &ChangingCause, &ChangingHandler) -> Attempt,
) -> Step {
    let settings = ChangeSettings::default();
    let (progress, diffbase) = (settings.progress(), settings.diffbase());
    let owned: Vec<String> = handlers.iter().map(|h| h.id.clone()).collect();
    let extra: Vec<Vec<String>> = handlers.iter().filter_map(|h| h.field.clone()).collect();
    let mut never = |_: &ChangingHandler, _: CallbackSlot<'_>, _: Option<&Value>| false;

    let (old, new, warnings) = diffbase.essences(body, &extra, progress);
    let cause = detect_cause(false, body, settings.finalizer(), old, new, initial);
    let selected: Vec<String> = select_handlers(handlers, &cause, body, &mut never)
        .into_iter()
        .map(|i| handlers[i].id.clone())
        .collect();
    let mut patch = Patch::default();
    let (mut log, mut ran, mut delays) = (Vec::new(), Vec::new(), Vec::new());
    let required = changing_requires_finalizer(handlers, &cause, body, &mut never);
    match finalizer_decision(body, settings.finalizer(), required) {
        FinalizerDecision::Add => {
            patch.finalizer = Some(FinalizerChange::Add(settings.finalizer().to_owned()))
        }
        FinalizerDecision::Remove => {
            patch.finalizer = Some(FinalizerChange::Remove(settings.finalizer().to_owned()))
        }
        FinalizerDecision::Keep if cause.reason.runs_handlers() => {
            let ctx = CycleContext {
                body,
                progress,
                diffbase,
                owned: &owned,
                selected: &selected,
                now,
            };
            let cycle = begin(&ctx, &cause, Lifecycle::Asap, &mut patch);
            log.extend(cycle.log.clone());
            let mut outcomes = Vec::new();
            for id in &cycle.plan {
                let handler = handlers
                    .iter()
                    .find(|h| &h.id == id)
                    .expect("planned handlers exist");
                let state = cycle.state.get(id).expect("planned handlers have state");
                let policy = RetryPolicy::default();
                let name = display_name(HandlerKind::Create, id);
                let (retries, runtime) = (state.retries, state.runtime(now));
                let result = precheck(&name, &policy, retries, runtime).unwrap_or_else(|| {
                    ran.push(id.clone());
                    decide(
                        &name,
                        &policy,
                        retries,
                        runtime,
                        invoke(id, &cause, handler),
                    )
                    .outcome
                });
                outcomes.push((id.clone(), result));
            }
            let end = finish(&ctx, &cause, cycle, outcomes, &mut patch);
            log.extend(end.log);
            delays = end.delays;
            if release_on_deletion(body, settings.finalizer(), !delays.is_empty()) {
                patch.finalizer = Some(FinalizerChange::Remove(settings.finalizer().to_owned()));
            }
        }
        FinalizerDecision::Keep => {}
    }
    progress.finalize(body, &mut patch);
    let (main, status) = patch.merge_patches(true);
    let json_patch = patch.finalizer_json_patch(body);
    for part in [main, status].into_iter().flatten() {
        merge(body, &part);
    }
    let mut refused = false;
    if let Some(ops) = &json_patch {
        // As the API server applies it: the `test` of the resourceVersion included.
        let ops: json_patch::Patch = serde_json::from_value(ops.clone()).expect("a JSON patch");
        refused = json_patch::patch(body, &ops).is_err();
    }
    let wakeup = after_patch(!patch.is_empty(), &delays);
    Step {
        patch,
        warnings,
        json_patch,
        log,
        ran,
        refused,
        wakeup,
    }
}

fn annotations(patch: &Patch) -> Value {
    patch
        .merge
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn record(started: &str, rest: &str) -> String {
    format!(r#"{{"started":"{started}",{rest}}}"#)
}

#[test]
fn the_captured_sequence() {
    let mut body = json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "kopf-example-1", "namespace": "default", "uid": "u1", "resourceVersion": "100",
                     "labels": {"somelabel": "somevalue"}},
        "spec": {"field": "value", "items": ["a"]},
    });
    let started = "2026-11-30T03:32:51.611056+00:00";
    let calls: RefCell<Vec<(String, Value, Value)>> = RefCell::new(Vec::new());
    let mut guest = |id: &str, cause: &ChangingCause, h: &ChangingHandler| {
        let (old, new, _) = handler_view(h, cause);
        calls.borrow_mut().push((id.to_owned(), old, new));
        let create_2_calls = calls.borrow().iter().filter(|c| c.0 == "create_2").count();
        match id {
            "create_fn" => Attempt::Success(json!({"message": "hello", "n": 1})),
            "create_2" if create_2_calls == 1 => Attempt::Temporary {
                message: "not yet".into(),
                delay: Some(1.0),
            },
            "create_2" => Attempt::Success(json!(42)),
            _ => Attempt::Success(Value::Null),
        }
    };

    // Initial listing: only the finalizer, by JSON patch; no handlers.
    let s = step(&mut body, ms(-100), true, &mut guest);
    assert!(s.patch.merge.is_empty() && s.ran.is_empty());
    assert_eq!(
        s.json_patch,
        Some(
            json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "100"},
                    {"op": "add", "path": "/metadata/finalizers", "value": [FIN]}])
        )
    );

    // create_fn runs; all three selected handlers get records.
    let s = step(&mut body, t0(), true, &mut guest);
    assert_eq!(s.ran, vec!["create_fn"]);
    assert_eq!(
        annotations(&s.patch),
        json!({
            "kopf.zalando.org/create_fn": record(started, &format!(r#""stopped":"{started}","purpose":"create","retries":1,"success":true,"failure":false"#)),
            "kopf.zalando.org/create_2": record(started, r#""purpose":"create","retries":0,"success":false,"failure":false"#),
            "kopf.zalando.org/field_fn.spec.field": record(started, r#""purpose":"create","retries":0,"success":false,"failure":false"#),
        })
    );
    assert_eq!(
        s.patch.merge_patches(true).1,
        Some(json!({"status": {"create_fn": {"message": "hello", "n": 1}}}))
    );
    assert_eq!(s.wakeup, Wakeup::ByPatch);

    // create_2 fails temporarily: only its record changes.
    let s = step(&mut body, ms(12), false, &mut guest);
    assert_eq!(s.ran, vec!["create_2"]);
    assert_eq!(
        annotations(&s.patch),
        json!({"kopf.zalando.org/create_2": record(started,
            r#""delayed":"2026-11-30T03:32:52.623056+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not yet""#)})
    );
    assert!(!s.patch.merge.contains_key("status"));

    // field_fn (fewest retries) sees the field's values: None → 'value'.
    let s = step(&mut body, ms(20), false, &mut guest);
    assert_eq!(s.ran, vec!["field_fn/spec.field"]);
    assert_eq!(
        calls.borrow().last(),
        Some(&(
            "field_fn/spec.field".to_owned(),
            Value::Null,
            json!("value")
        ))
    );
    assert_eq!(annotations(&s.patch).as_object().map(Map::len), Some(1));

    // Nothing awake: no patch, sleep until create_2 is due, then touch.
    let s = step(&mut body, ms(30), false, &mut guest);
    assert!(s.ran.is_empty() && s.patch.is_empty());
    assert_eq!(
        s.wakeup,
        Wakeup::SleepThenTouch(std::time::Duration::from_millis(982))
    );
    let mut touch = Patch::default();
    let touched_at = ms(1012);
    ChangeSettings::default()
        .progress()
        .touch(&body, &mut touch, Some(&touch_value(touched_at)));
    assert_eq!(
        annotations(&touch),
        json!({"kopf.zalando.org/touch-dummy": "2026-11-30T03:32:52.623056+00:00"})
    );
    merge(&mut body, &Value::Object(touch.merge));

    // create_2 succeeds: purge, diff-base, touch-dummy removed, result in status.
    let s = step(&mut body, ms(1012), false, &mut guest);
    assert_eq!(s.ran, vec!["create_2"]);
    assert_eq!(s.log, vec!["Creation is processed: 3 succeeded; 0 failed."]);
    assert_eq!(
        annotations(&s.patch),
        json!({
            "kopf.zalando.org/create_fn": null,
            "kopf.zalando.org/create_2": null,
            "kopf.zalando.org/field_fn.spec.field": null,
            "kopf.zalando.org/last-handled-configuration":
                "{\"spec\":{\"field\":\"value\",\"items\":[\"a\"]},\"metadata\":{\"labels\":{\"somelabel\":\"somevalue\"}}}\n",
            "kopf.zalando.org/touch-dummy": null,
        })
    );
    assert_eq!(
        s.patch.merge_patches(true).1,
        Some(json!({"status": {"create_2": 42}}))
    );
    assert_eq!(s.wakeup, Wakeup::Idle);

    // The echo of our own patch: noop.
    let s = step(&mut body, ms(1100), false, &mut guest);
    assert!(s.patch.is_empty() && s.ran.is_empty() && s.wakeup == Wakeup::Idle);

    // Spec edited: update_fn, then field_fn ('value' → 'changed'), then the new diff-base.
    body["spec"]["field"] = json!("changed");
    let s = step(&mut body, ms(2000), false, &mut guest);
    assert_eq!(s.ran, vec!["update_fn"]);
    let s = step(&mut body, ms(2100), false, &mut guest);
    assert_eq!(s.ran, vec!["field_fn/spec.field"]);
    assert_eq!(
        calls.borrow().last(),
        Some(&(
            "field_fn/spec.field".to_owned(),
            json!("value"),
            json!("changed")
        ))
    );
    assert_eq!(s.log, vec!["Updating is processed: 2 succeeded; 0 failed."]);
    assert_eq!(
        annotations(&s.patch)["kopf.zalando.org/last-handled-configuration"],
        json!(
            "{\"spec\":{\"field\":\"changed\",\"items\":[\"a\"]},\"metadata\":{\"labels\":{\"somelabel\":\"somevalue\"}}}\n"
        )
    );

    // Deletion: delete_fn, then the finalizer goes in the same cycle.
    body["metadata"]["deletionTimestamp"] = json!("2026-11-30T03:40:00Z");
    body["metadata"]["resourceVersion"] = json!("200");
    let s = step(&mut body, ms(3000), false, &mut guest);
    assert_eq!(s.ran, vec!["delete_fn"]);
    assert_eq!(s.log, vec!["Deletion is processed: 1 succeeded; 0 failed."]);
    assert!(
        s.patch.merge.is_empty(),
        "a record stored and purged in one cycle is never sent"
    );
    assert_eq!(
        s.json_patch,
        Some(
            json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "200"},
                    {"op": "remove", "path": "/metadata/finalizers"}])
        )
    );
    let create_calls = calls
        .borrow()
        .iter()
        .filter(|c| c.0.starts_with("create"))
        .count();
    assert_eq!(create_calls, 3, "no creation handler ran twice");
}

#[test]
fn continuing_from_state_written_by_kopf() {
    // Mid-creation, as Kopf left it (formats from KOPF.md §4.4/§4.9).
    let started = "2026-11-30T03:32:51.611056+00:00";
    let mut body = json!({
        "metadata": {"name": "kopf-example-1", "resourceVersion": "5", "finalizers": [FIN],
            "annotations": {
                "kopf.zalando.org/create_fn": record(started, &format!(r#""stopped":"{started}","purpose":"create","retries":1,"success":true,"failure":false"#)),
                "kopf.zalando.org/create_2": r#"{"started":"2026-11-30T03:32:51.611056+00:00","delayed":"2026-11-30T03:32:51.623181+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not yet"}"#,
                "kopf.zalando.org/field_fn.spec.field": record(started, r#""purpose":"create","retries":0,"success":false,"failure":false"#),
            }},
        "spec": {"field": "value"},
    });
    let ran = RefCell::new(Vec::new());
    let mut guest = |id: &str, _: &ChangingCause, _: &ChangingHandler| {
        ran.borrow_mut().push(id.to_owned());
        Attempt::Success(Value::Null)
    };
    // A restarted operator sees it in the initial listing: still a creation (no diff-base).
    let s = step(&mut body, ms(5000), true, &mut guest);
    assert_eq!(
        s.ran,
        vec!["field_fn/spec.field"],
        "fewest retries first; create_fn is finished"
    );
    assert!(
        annotations(&s.patch)
            .get("kopf.zalando.org/create_fn")
            .is_none(),
        "finished records are not re-written"
    );
    let s = step(&mut body, ms(5100), false, &mut guest);
    assert_eq!(s.ran, vec!["create_2"]);
    assert_eq!(s.log, vec!["Creation is processed: 3 succeeded; 0 failed."]);
    assert_eq!(*ran.borrow(), vec!["field_fn/spec.field", "create_2"]);
    let s = step(&mut body, ms(5200), true, &mut guest);
    assert!(
        s.ran.is_empty() && s.patch.is_empty(),
        "after a restart with no change: resume (no resume handlers here)"
    );
}

#[test]
fn an_update_supersedes_an_unfinished_creation() {
    let started = "2026-11-30T03:32:51.611056+00:00";
    let create_2 = record(
        started,
        r#""purpose":"create","retries":1,"success":false,"failure":false"#,
    );
    let field_fn = record(
        started,
        r#""purpose":"create","retries":0,"success":false,"failure":false"#,
    );
    let mut body = json!({
        "metadata": {"finalizers": [FIN], "annotations": {
            "kopf.zalando.org/last-handled-configuration": "{\"spec\":{\"field\":\"value\"}}\n",
            "kopf.zalando.org/create_2": create_2,
            "kopf.zalando.org/field_fn.spec.field": field_fn,
        }},
        "spec": {"field": "changed"},
    });
    let mut guest = |_: &str, _: &ChangingCause, _: &ChangingHandler| Attempt::Success(Value::Null);
    let s = step(&mut body, ms(100), false, &mut guest);
    assert_eq!(
        s.log,
        vec!["Creation is superseded by updating: 0 succeeded; 0 failed; 2 left to the moment."]
    );
    assert_eq!(s.ran, vec!["update_fn"]);
    let a = annotations(&s.patch);
    assert_eq!(a["kopf.zalando.org/create_2"], Value::Null, "purged");
    let field: Value = serde_json::from_str(
        a["kopf.zalando.org/field_fn.spec.field"]
            .as_str()
            .expect("re-purposed"),
    )
    .expect("json");
    assert_eq!(
        (field["purpose"].clone(), field["retries"].clone()),
        (json!("update"), json!(0))
    );
}
