//! Cause detection, handler views and matching, on plain data.

use super::*;
use serde_json::json;

const FIN: &str = "kopf.zalando.org/KopfFinalizerMarker";

fn never(_: &ChangingHandler, _: CallbackSlot<'_>, _: Option<&Value>) -> bool {
    false
}

fn field(id: &str, path: &str) -> ChangingHandler {
    ChangingHandler {
        id: format!("{id}/{path}"),
        guest: "g".into(),
        field: Some(path.split('.').map(str::to_owned).collect()),
        field_needs_change: true,
        ..ChangingHandler::default()
    }
}

fn on(id: &str, reason: Reason) -> ChangingHandler {
    ChangingHandler {
        id: id.into(),
        guest: "g".into(),
        reason: Some(reason),
        ..ChangingHandler::default()
    }
}

fn resume(id: &str, deleted: bool) -> ChangingHandler {
    ChangingHandler {
        id: id.into(),
        guest: "g".into(),
        initial: true,
        deleted,
        ..ChangingHandler::default()
    }
}

#[test]
fn decision_order() {
    let new = json!({"spec": 1});
    let live = json!({"metadata": {}});
    let deleting = json!({"metadata": {"deletionTimestamp": "t", "finalizers": [FIN]}});
    let freed = json!({"metadata": {"deletionTimestamp": "t", "finalizers": ["other"]}});
    let base = Some(json!({"spec": 1}));
    let r = |ev, body: &Value, old: Option<Value>, init| {
        detect_cause(ev, body, FIN, old, new.clone(), init).reason
    };
    assert_eq!(r(true, &deleting, None, true), Reason::Gone);
    assert_eq!(r(false, &freed, None, true), Reason::Free);
    assert_eq!(r(false, &deleting, None, true), Reason::Delete);
    assert_eq!(r(false, &live, None, true), Reason::Create);
    assert!(
        !detect_cause(false, &live, FIN, None, new.clone(), true).initial,
        "creation is never initial"
    );
    assert_eq!(r(false, &live, base.clone(), true), Reason::Resume);
    assert_eq!(r(false, &live, base, false), Reason::Noop);
    assert_eq!(
        r(false, &live, Some(json!({"spec": 2})), true),
        Reason::Update
    );
}

#[test]
fn selection_per_reason() {
    let handlers = vec![
        on("create_fn", Reason::Create),
        on("update_fn", Reason::Update),
        on("delete_fn", Reason::Delete),
        resume("resume_fn", false),
        resume("resume_del", true),
        field("field_fn", "spec.field"),
        on("create_fn", Reason::Create), // a second decorator of the same function
    ];
    let body = json!({});
    let ids = |cause: &ChangingCause| -> Vec<&str> {
        select_handlers(&handlers, cause, &body, &mut never)
            .into_iter()
            .map(|i| handlers[i].id.as_str())
            .collect()
    };
    let created = detect_cause(
        false,
        &body,
        FIN,
        None,
        json!({"spec": {"field": "value"}}),
        true,
    );
    assert_eq!(
        ids(&created),
        vec!["create_fn", "field_fn/spec.field"],
        "field handlers fire on creation; no resume"
    );
    let resumed = detect_cause(
        false,
        &body,
        FIN,
        Some(json!({"spec": 1})),
        json!({"spec": 1}),
        true,
    );
    assert_eq!(ids(&resumed), vec!["resume_fn", "resume_del"]);
    let updated = detect_cause(
        false,
        &body,
        FIN,
        Some(json!({"spec": {"field": "value"}})),
        json!({"spec": {"field": "changed"}}),
        false,
    );
    assert_eq!(ids(&updated), vec!["update_fn", "field_fn/spec.field"]);
    let other = detect_cause(
        false,
        &body,
        FIN,
        Some(json!({"spec": {"x": 1}})),
        json!({"spec": {"x": 2}}),
        true,
    );
    assert_eq!(
        ids(&other),
        vec!["update_fn", "resume_fn", "resume_del"],
        "resume mixed into update after downtime"
    );
    let deleting = json!({"metadata": {"deletionTimestamp": "t", "finalizers": [FIN]}});
    let deleted = detect_cause(false, &deleting, FIN, Some(json!({})), json!({}), true);
    assert_eq!(
        select_handlers(&handlers, &deleted, &deleting, &mut never)
            .into_iter()
            .map(|i| handlers[i].id.as_str())
            .collect::<Vec<_>>(),
        vec!["delete_fn", "resume_del"]
    );
}

#[test]
fn field_filters_value_old_new() {
    let body = json!({});
    let cause = detect_cause(
        false,
        &body,
        FIN,
        Some(json!({"spec": {"f": "a"}})),
        json!({"spec": {"f": "b"}}),
        false,
    );
    let pick = |h: ChangingHandler| !select_handlers(&[h], &cause, &body, &mut never).is_empty();
    let mut h = field("fn", "spec.f");
    assert!(pick(h.clone()));
    h.old = Criterion::Equals(json!("a"));
    h.new = Criterion::Equals(json!("b"));
    assert!(pick(h.clone()));
    h.new = Criterion::Equals(json!("c"));
    assert!(!pick(h.clone()));
    let mut h = field("fn", "spec.f");
    h.value = Criterion::Equals(json!("a"));
    assert!(pick(h.clone()), "value matches either side");
    h.value = Criterion::Absent;
    assert!(!pick(h.clone()));
    let mut h = field("fn", "spec.g");
    assert!(!pick(h.clone()), "absent on both sides");
    h.field_needs_change = false;
    h.value = Criterion::Absent;
    assert!(pick(h), "on.create-like field filter without change check");
    let mut h = field("fn", "spec.f");
    h.value = Criterion::Callback;
    let mut seen = Vec::new();
    let mut eval = |_: &ChangingHandler, slot: CallbackSlot<'_>, v: Option<&Value>| {
        seen.push((format!("{slot:?}"), v.cloned()));
        v == Some(&json!("a"))
    };
    assert!(!select_handlers(&[h], &cause, &body, &mut eval).is_empty());
    assert_eq!(
        seen,
        vec![
            ("Value".to_owned(), Some(json!("b"))),
            ("Value".to_owned(), Some(json!("a")))
        ]
    );
}

#[test]
fn labels_and_annotations() {
    let body = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"a": "1"}}});
    let cause = detect_cause(false, &body, FIN, None, json!({}), false);
    let mut h = on("fn", Reason::Create);
    h.labels = vec![
        ("app".into(), Criterion::Equals(json!("web"))),
        ("x".into(), Criterion::Absent),
    ];
    h.annotations = vec![("a".into(), Criterion::Present)];
    assert_eq!(
        select_handlers(&[h.clone()], &cause, &body, &mut never),
        vec![0]
    );
    h.labels.push(("app".into(), Criterion::Callback));
    assert!(select_handlers(&[h.clone()], &cause, &body, &mut never).is_empty());
    assert!(
        is_stealth(&[h], &cause, &body, &mut never),
        "matches no handler: stealth"
    );
    assert!(
        select_handlers(
            &[on("fn", Reason::Create)],
            &cause,
            &json!(null),
            &mut never
        ) == vec![0]
    );
}

#[test]
fn field_handlers_see_their_field() {
    let cause = detect_cause(
        false,
        &json!({}),
        FIN,
        None,
        json!({"spec": {"field": "value"}}),
        false,
    );
    let (old, new, d) = handler_view(&field("field_fn", "spec.field"), &cause);
    assert_eq!(
        (old, new, d.to_json()),
        (
            Value::Null,
            json!("value"),
            json!([["add", [], null, "value"]])
        )
    );
    let (old, new, _) = handler_view(&on("create_fn", Reason::Create), &cause);
    assert_eq!(
        (old, new),
        (Value::Null, json!({"spec": {"field": "value"}}))
    );
    assert_eq!(capitalize(&title("create")), "Creation");
    assert_eq!(Reason::parse("update"), Some(Reason::Update));
}
