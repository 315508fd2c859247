//! Unit tests of field ownership on built-in and custom types.

use super::*;
use serde_json::json;

fn configmaps() -> ResourceType {
    crate::builtins::builtins()
        .into_iter()
        .find(|t| t.plural == "configmaps")
        .expect("configmaps")
}

fn who(m: &str) -> Who {
    Who {
        manager: m.into(),
        subresource: None,
        user: None,
    }
}

#[test]
fn conflict_messages_name_fields_and_managers() {
    let rt = configmaps();
    let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1", "y": "2"}});
    let live = apply(&rt, None, &a, &who("alpha"), false).unwrap();
    let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "9"}});
    let e = apply(&rt, Some(&live), &b, &who("beta"), false).unwrap_err();
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alpha\": .data.x"
    );
    let both = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "9", "y": "8"}});
    let e = apply(&rt, Some(&live), &both, &who("beta"), false).unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"alpha\":\n- .data.x\n- .data.y"
    );
    let causes = &e.details.as_ref().unwrap()["causes"];
    assert_eq!(
        causes[0],
        json!({"reason": "FieldManagerConflict", "message": "conflict with \"alpha\"", "field": ".data.x"})
    );
}

/// Objects shaped like a Kubernetes object, over a small alphabet so that an update often
/// leaves members equal, changes some, adds and removes others.
fn object() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0i64..3).prop_map(|n| json!(n)),
        prop::sample::select(vec!["", "x", "y"]).prop_map(|s| json!(s)),
    ];
    let value = leaf.prop_recursive(3, 16, 3, |inner| {
        let key = prop::sample::select(vec!["a", "b", "name", "c"]).prop_map(String::from);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let labels = prop::collection::btree_map(
        prop::sample::select(vec!["app", "tier"]).prop_map(String::from),
        prop::sample::select(vec!["web", "db"]).prop_map(|v| json!(v)),
        0..3,
    );
    let finalizers = prop::collection::vec(
        prop::sample::select(vec!["kopf.zalando.org/KopfFinalizerMarker", "other"])
            .prop_map(|v| json!(v)),
        0..2,
    );
    let members = prop::collection::btree_map(
        prop::sample::select(vec!["spec", "status", "data", "extra"]).prop_map(String::from),
        value,
        0..4,
    );
    (labels, finalizers, members, any::<bool>(), 0u8..3).prop_map(
        |(labels, finalizers, members, owned, rv)| {
            let mut obj: serde_json::Map<String, Value> = members.into_iter().collect();
            let mut meta = json!({"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": rv.to_string()});
            if !labels.is_empty() {
                meta["labels"] = Value::Object(labels.into_iter().collect());
            }
            if !finalizers.is_empty() {
                meta["finalizers"] = Value::Array(finalizers);
            }
            if owned {
                meta["managedFields"] = json!([{"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]);
            }
            obj.insert("apiVersion".into(), json!("v1"));
            obj.insert("kind".into(), json!("ConfigMap"));
            obj.insert("metadata".into(), meta);
            Value::Object(obj)
        },
    )
}

proptest::proptest! {
    /// An update's change of ownership computed from the members that differ is the one
    /// computed from the whole objects, through the main resource and through `status`,
    /// on a built-in and on a custom type.
    #[test]
    fn the_differing_members_change_what_the_whole_objects_change(
        old in object(),
        new in object(),
        status in proptest::prelude::any::<bool>(),
        custom in proptest::prelude::any::<bool>(),
    ) {
        let mut rt = configmaps();
        if custom {
            rt.custom = true;
            rt.has_status = true;
            rt.kind_schema = Default::default();
        }
        let ctx = Ctx::new(&rt);
        let mut who = who("m");
        if status {
            who.subresource = Some("status");
        }
        if let Ok((changed, removed)) = update_change(&ctx, &old, &new, &who) {
            let (old_part, new_part) = differing(&old, &new);
            let (changed_part, removed_part) =
                update_change(&ctx, &old_part, &new_part, &who).expect("a part of what walked");
            proptest::prop_assert_eq!(changed.members(), changed_part.members());
            proptest::prop_assert_eq!(removed.members(), removed_part.members());
        }
    }
}
