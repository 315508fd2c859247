//! Kopf's rules for owner references, names, namespaces and labels
//! (`tests/hierarchies/` in Kopf), one test per rule.

use serde_json::{Value, json};

use super::*;

fn owner() -> Value {
    json!({"apiVersion": "owner-api-version", "kind": "OwnerKind",
           "metadata": {"namespace": "owner-namespace", "name": "owner-name", "uid": "owner-uid",
                        "labels": {"label-1": "value-1", "label-2": "value-2"}}})
}

fn owner_with(uid: &str, kind: &str, name: &str) -> Value {
    let mut owner = owner();
    owner["kind"] = json!(kind);
    owner["metadata"]["name"] = json!(name);
    owner["metadata"]["uid"] = json!(uid);
    owner
}

fn uids(object: &Value) -> Vec<&str> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .expect("a list of references")
        .iter()
        .filter_map(|r| r["uid"].as_str())
        .collect()
}

#[test]
fn the_owner_reference_has_kopfs_fields_in_kopfs_order() {
    let mut object = json!({});
    append_owner_reference(&mut object, &owner()).unwrap();
    let reference = &object["metadata"]["ownerReferences"][0];
    assert_eq!(
        reference,
        &json!({"controller": true, "blockOwnerDeletion": true,
                "apiVersion": "owner-api-version", "kind": "OwnerKind",
                "name": "owner-name", "uid": "owner-uid"})
    );
    let keys: Vec<&String> = reference.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "controller",
            "blockOwnerDeletion",
            "apiVersion",
            "kind",
            "name",
            "uid"
        ]
    );
    assert_eq!(build_owner_reference(&owner()), *reference);
}

#[test]
fn owner_reference_flags_can_be_false_or_left_out() {
    let mut object = json!({});
    Options::new()
        .controller(false)
        .block_owner_deletion(false)
        .append_owner_reference(&mut object, &owner())
        .unwrap();
    let reference = &object["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&reference["controller"], &reference["blockOwnerDeletion"]),
        (&json!(false), &json!(false))
    );
    let reference = Options::new()
        .controller(None)
        .block_owner_deletion(None)
        .owner_reference(&owner());
    assert!(reference.get("controller").is_none() && reference.get("blockOwnerDeletion").is_none());
}

#[test]
fn owner_reference_leaves_out_what_the_owner_lacks() {
    let node = json!({"kind": "Node", "metadata": {"name": "n1", "uid": null}});
    assert_eq!(
        build_owner_reference(&node),
        json!({"controller": true, "blockOwnerDeletion": true, "kind": "Node", "name": "n1"})
    );
}

#[test]
fn appending_deduplicates_by_uid_alone() {
    let mut object = json!({});
    for owner in [
        owner_with("uid-0", "KindA", "name-a"),
        owner_with("uid-0", "KindA", "name-b"),
        owner_with("uid-0", "KindB", "name-b"),
    ] {
        append_owner_reference(&mut object, &owner).unwrap();
    }
    assert_eq!(uids(&object), ["uid-0"]);
    assert_eq!(object["metadata"]["ownerReferences"][0]["name"], "name-a");
}

#[test]
fn appending_distinguishes_by_uid() {
    let mut object = json!({"metadata": {"ownerReferences": null}});
    append_owner_reference(&mut object, &owner_with("uid-a", "K", "n")).unwrap();
    append_owner_reference(&mut object, &owner_with("uid-b", "K", "n")).unwrap();
    assert_eq!(uids(&object), ["uid-a", "uid-b"]);
}

#[test]
fn removal_identifies_by_uid_alone() {
    let mut object = json!({"metadata": {"ownerReferences": [
        {"uid": "uid-0", "kind": "KindA"}, {"uid": "uid-1"}, {"uid": "uid-0", "kind": "KindB"}]}});
    remove_owner_reference(&mut object, &owner_with("uid-0", "Other", "other")).unwrap();
    assert_eq!(uids(&object), ["uid-1"]);
}

#[test]
fn removal_leaves_an_empty_list_as_kopf_does() {
    let mut object = json!({"kind": "Job"});
    remove_owner_reference(&mut object, &owner()).unwrap();
    assert_eq!(
        object,
        json!({"kind": "Job", "metadata": {"ownerReferences": []}})
    );
    let mut object = json!({});
    append_owner_reference(&mut object, &owner()).unwrap();
    remove_owner_reference(&mut object, &owner()).unwrap();
    assert_eq!(object["metadata"]["ownerReferences"], json!([]));
}

#[test]
fn many_objects_at_any_depth_nulls_skipped() {
    let mut lone = json!({});
    let mut list = vec![json!({}), json!([{}, null, [{}]])];
    append_owner_reference([&mut lone], &owner()).unwrap();
    append_owner_reference(&mut list, &owner()).unwrap();
    assert_eq!(uids(&lone), ["owner-uid"]);
    assert_eq!(uids(&list[0]), ["owner-uid"]);
    assert_eq!(uids(&list[1][0]), ["owner-uid"]);
    assert_eq!(list[1][1], Value::Null);
    assert_eq!(uids(&list[1][2][0]), ["owner-uid"]);
    let mut nothing = Value::Null;
    append_owner_reference(&mut nothing, &owner()).unwrap();
    assert_eq!(nothing, Value::Null);
}

#[test]
fn labels_are_added_and_kept_unless_forced() {
    let mut bare = json!({});
    let mut labelled = json!({"metadata": {"labels": {"label": "old-value", "other": "x"}}});
    label([&mut bare, &mut labelled], [("label", "new-value")]).unwrap();
    assert_eq!(bare["metadata"]["labels"], json!({"label": "new-value"}));
    assert_eq!(labelled["metadata"]["labels"]["label"], "old-value");
    Options::new()
        .forced(true)
        .label(&mut labelled, [("label", "new-value")])
        .unwrap();
    assert_eq!(
        labelled["metadata"]["labels"],
        json!({"label": "new-value", "other": "x"})
    );
}

#[test]
fn label_values_may_be_null_and_labels_may_come_from_a_map() {
    let mut object = json!({"metadata": {"labels": null}});
    let source = json!({"app": "web", "gone": null});
    let labels = source.as_object().unwrap().clone();
    label(&mut object, labels).unwrap();
    label(&mut object, [("tier", Some("db")), ("none", None)]).unwrap();
    assert_eq!(
        object["metadata"]["labels"],
        json!({"app": "web", "gone": null, "tier": "db", "none": null})
    );
}

#[test]
fn nested_objects_are_labelled_only_where_they_exist() {
    for forced in [false, true] {
        let mut object = json!({"metadata": {"labels": {"label": "old-value"}},
                                "spec": {"jobTemplate": {}}});
        Options::new()
            .forced(forced)
            .nested("spec.jobTemplate")
            .nested("spec.unexistent")
            .nested_at(&["status", "nowhere"])
            .label(&mut object, [("label", "new-value")])
            .unwrap();
        let root = if forced { "new-value" } else { "old-value" };
        assert_eq!(object["metadata"]["labels"]["label"], root);
        assert_eq!(
            object["spec"]["jobTemplate"]["metadata"]["labels"]["label"],
            "new-value"
        );
        assert!(object["spec"].get("unexistent").is_none());
        assert!(object.get("status").is_none());
    }
    // A nested field, or a field on the way to it, that is null counts as absent.
    let mut objects = json!([{"spec": {"template": null}}, {"spec": null}]);
    let before = objects.clone();
    Options::new()
        .nested("spec.template")
        .label(&mut objects, [("a", "b")])
        .unwrap();
    assert_eq!(objects[0]["spec"], before[0]["spec"]);
    assert_eq!(objects[1]["spec"], before[1]["spec"]);
}

#[test]
fn existing_names_are_kept_unless_forced() {
    for strict in [false, true] {
        for named in [
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"generateName": "b"}}),
            json!({"metadata": {"name": "c", "generateName": "d"}}),
        ] {
            let mut object = named.clone();
            Options::new()
                .strict(strict)
                .harmonize_naming(&mut object, "provided-name")
                .unwrap();
            assert_eq!(object, named);
        }
    }
}

#[test]
fn names_are_prefixes_unless_strict() {
    for unnamed in [
        json!({}),
        json!({"metadata": {}}),
        json!({"metadata": {"name": null}}),
    ] {
        let mut loose = unnamed.clone();
        harmonize_naming(&mut loose, "provided-name").unwrap();
        assert_eq!(loose["metadata"], json!({"generateName": "provided-name-"}));
        let mut strict = unnamed.clone();
        Options::new()
            .strict(true)
            .harmonize_naming(&mut strict, "provided-name")
            .unwrap();
        assert_eq!(strict["metadata"], json!({"name": "provided-name"}));
    }
}

#[test]
fn forced_names_replace_both_kinds_of_name() {
    let both = json!({"metadata": {"name": "c", "generateName": "d"}});
    let mut strict = both.clone();
    Options::new()
        .forced(true)
        .strict(true)
        .harmonize_naming(&mut strict, "provided-name")
        .unwrap();
    assert_eq!(strict["metadata"], json!({"name": "provided-name"}));
    let mut loose = both;
    Options::new()
        .forced(true)
        .harmonize_naming(&mut loose, "provided-name")
        .unwrap();
    assert_eq!(loose["metadata"], json!({"generateName": "provided-name-"}));
}

#[test]
fn namespaces_are_kept_unless_forced() {
    let mut bare = json!({});
    let mut null = json!({"metadata": {"namespace": null}});
    let mut placed = json!({"metadata": {"namespace": "mine"}});
    adjust_namespace([&mut bare, &mut null, &mut placed], Some("ns")).unwrap();
    assert_eq!(bare["metadata"]["namespace"], "ns");
    assert_eq!(null["metadata"]["namespace"], "ns");
    assert_eq!(placed["metadata"]["namespace"], "mine");
    Options::new()
        .forced(true)
        .adjust_namespace(&mut placed, Some("ns"))
        .unwrap();
    assert_eq!(placed["metadata"]["namespace"], "ns");
}

#[test]
fn a_cluster_scoped_owners_namespace_is_null() {
    let mut object = json!({});
    adjust_namespace(&mut object, None).unwrap();
    assert_eq!(object, json!({"metadata": {"namespace": null}}));
    let mut placed = json!({"metadata": {"namespace": "mine"}});
    Options::new()
        .forced(true)
        .adjust_namespace(&mut placed, None)
        .unwrap();
    assert_eq!(placed["metadata"]["namespace"], Value::Null);
}

#[test]
fn adoption_does_all_four_with_the_options() {
    let mut job = json!({"kind": "Job", "metadata": {"name": "mine", "namespace": "theirs",
                                                     "labels": {"label-1": "mine"}},
                         "spec": {"template": {}}});
    let mut pod = json!({"kind": "Pod"});
    Options::new()
        .forced(true)
        .strict(true)
        .nested("spec.template")
        .adopt([&mut job, &mut pod], &owner())
        .unwrap();
    for object in [&job, &pod] {
        assert_eq!(uids(object), ["owner-uid"]);
        assert_eq!(object["metadata"]["name"], "owner-name");
        assert_eq!(object["metadata"]["namespace"], "owner-namespace");
        assert_eq!(
            object["metadata"]["labels"],
            json!({"label-1": "value-1", "label-2": "value-2"})
        );
    }
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"],
        json!({"label-1": "value-1", "label-2": "value-2"})
    );
}

#[test]
fn adoption_by_default_keeps_what_the_child_has() {
    let mut job = json!({"kind": "Job", "metadata": {"name": "mine", "namespace": "owner-namespace",
                                                     "labels": {"label-1": "mine"}}});
    adopt(&mut job, &owner()).unwrap();
    assert_eq!(
        job["metadata"],
        json!({"name": "mine", "namespace": "owner-namespace",
               "labels": {"label-1": "mine", "label-2": "value-2"},
               "ownerReferences": [build_owner_reference(&owner())]})
    );
    let mut bare = json!({});
    adopt(&mut bare, &owner()).unwrap();
    assert_eq!(bare["metadata"]["generateName"], "owner-name-");
}

#[test]
fn adoption_by_an_owner_without_labels_or_namespace() {
    let owner = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}});
    let mut object = json!({});
    adopt(&mut object, &owner).unwrap();
    assert_eq!(object["metadata"]["labels"], json!({}));
    assert_eq!(object["metadata"]["namespace"], Value::Null);
}

#[test]
fn adoption_puts_children_in_the_owners_namespace_and_refuses_another() {
    // Kopf's rule: the owner's namespace where the child names none.
    let mut bare = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    adopt(&mut bare, &owner()).unwrap();
    assert_eq!(bare["metadata"]["namespace"], "owner-namespace");
    // Another namespace: the garbage collector would delete it; nothing changes.
    let mut elsewhere = json!([{"kind": "ConfigMap"},
                               {"kind": "ConfigMap", "metadata": {"namespace": "theirs"}}]);
    let before = elsewhere.clone();
    let error = adopt(&mut elsewhere, &owner()).unwrap_err();
    assert_eq!(
        error,
        HierarchyError::OwnerInAnotherNamespace {
            object: 1,
            namespace: "theirs".into(),
            owner_namespace: "owner-namespace".into()
        }
    );
    assert!(error.to_string().starts_with(
        "object 1 is in namespace \"theirs\" and its owner in \"owner-namespace\": Kubernetes would delete it at once"
    ), "{error}");
    assert_eq!(elsewhere, before);
    // Forced: put in the owner's namespace, as Kopf does.
    Options::new()
        .forced(true)
        .adopt(&mut elsewhere, &owner())
        .unwrap();
    assert_eq!(elsewhere[1]["metadata"]["namespace"], "owner-namespace");
    // A cluster-scoped owner may own objects in any namespace.
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}});
    let mut placed = json!({"kind": "ConfigMap", "metadata": {"namespace": "theirs"}});
    adopt(&mut placed, &node).unwrap();
    assert_eq!(placed["metadata"]["namespace"], "theirs");
}

#[test]
fn adoption_refuses_a_cluster_scoped_child_of_a_namespaced_owner() {
    for (api_version, kind) in [
        ("v1", "Namespace"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("storage.k8s.io/v1", "StorageClass"),
    ] {
        let mut child = json!({"apiVersion": api_version, "kind": kind});
        let error = Options::new()
            .forced(true)
            .adopt(&mut child, &owner())
            .unwrap_err();
        assert_eq!(
            error,
            HierarchyError::ClusterScopedChild {
                object: 0,
                kind: kind.into()
            }
        );
        assert_eq!(child, json!({"apiVersion": api_version, "kind": kind}));
    }
    // A namespaced kind of the same name in another group, or a cluster-scoped owner.
    let mut role = json!({"apiVersion": "example.com/v1", "kind": "ClusterRole"});
    adopt(&mut role, &owner()).unwrap();
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}});
    let mut namespace = json!({"apiVersion": "v1", "kind": "Namespace"});
    adopt(&mut namespace, &node).unwrap();
    assert_eq!(uids(&namespace), ["u"]);
}

#[test]
fn adoption_needs_the_owners_name_even_for_named_children() {
    let mut object = json!({"metadata": {"name": "mine"}});
    let before = object.clone();
    for nameless in [json!({}), json!({"metadata": {"name": null, "uid": "u"}})] {
        assert_eq!(
            adopt(&mut object, &nameless),
            Err(HierarchyError::OwnerWithoutName)
        );
        assert_eq!(object, before);
    }
}

#[test]
fn malformed_objects_change_nothing() {
    let cases = [
        (json!([{}, "text"]), "object 1 is a string, not an object"),
        (
            json!([{}, {"metadata": []}]),
            "object 1: metadata is an array, not an object",
        ),
        (
            json!([{}, {"metadata": {"ownerReferences": {}}}]),
            "object 1: metadata.ownerReferences is an object, not an array",
        ),
        (
            json!([{}, {"metadata": {"labels": "a=b"}}]),
            "object 1: metadata.labels is a string, not an object",
        ),
        (
            json!([{}, {"spec": {"template": {"metadata": {"labels": 1}}}}]),
            "object 1: spec.template.metadata.labels is a number, not an object",
        ),
        (
            json!([{}, {"spec": "text"}]),
            "object 1: spec is a string, not an object",
        ),
        (
            json!([{}, {"spec": {"template": [true]}}]),
            "object 1: spec.template is an array, not an object",
        ),
    ];
    let options = Options::new().nested("spec.template");
    for (mut objects, message) in cases {
        let before = objects.clone();
        let error = options.adopt(&mut objects, &owner()).unwrap_err();
        assert_eq!(error.to_string(), message);
        assert_eq!(objects, before, "{message}");
    }
    // Each operation checks only the fields it changes.
    let mut odd = json!({"metadata": {"labels": "a=b", "ownerReferences": {}}});
    harmonize_naming(&mut odd, "n").unwrap();
    adjust_namespace(&mut odd, Some("ns")).unwrap();
    assert!(label(&mut odd, [("a", "b")]).is_err());
    assert!(append_owner_reference(&mut odd, &owner()).is_err());
    assert!(remove_owner_reference(&mut odd, &owner()).is_err());
    let mut text = json!("text");
    assert_eq!(
        harmonize_naming(&mut text, "n").unwrap_err(),
        HierarchyError::Malformed {
            object: 0,
            field: String::new(),
            expected: "an object",
            found: "a string"
        }
    );
}

#[test]
fn errors_convert_into_handler_errors() {
    let error: crate::Error = HierarchyError::OwnerWithoutName.into();
    assert_eq!(error.kind(), crate::ErrorKind::Arbitrary);
    assert!(
        error
            .to_string()
            .starts_with("the owner has no metadata.name")
    );
}
