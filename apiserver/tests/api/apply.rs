//! Server-side apply through kube-rs `Patch::Apply`: managedFields, field ownership,
//! conflicts and force, removal of fields a manager stops applying, Update managers, and
//! list merging by the schema's keys.

use super::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": data})
}

async fn apply_as<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    force: bool,
    obj: Value,
) -> kube::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut pp = PatchParams::apply(manager);
    pp.force = force;
    api.patch(name, &pp, &Patch::Apply(obj)).await
}

/// The managedFields entries as (manager, operation, fieldsV1).
fn entries(obj: &impl serde::Serialize) -> Vec<(String, String, Value)> {
    let v = serde_json::to_value(obj).unwrap();
    v["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn apply_owns_fields_conflicts_and_forces() {
    let (server, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");

    // Create by apply; managedFields in kube's shape.
    let mut first = cm(json!({"a": "1", "b": "2"}));
    first["metadata"]["labels"] = json!({"app": "web"});
    let created = apply_as(&api, "owned", "alpha", false, first)
        .await
        .unwrap();
    let v = serde_json::to_value(&created).unwrap();
    let mf = &v["metadata"]["managedFields"];
    assert_eq!(mf.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(mf[0]["manager"], "alpha");
    assert_eq!(mf[0]["operation"], "Apply");
    assert_eq!(mf[0]["apiVersion"], "v1");
    assert_eq!(mf[0]["fieldsType"], "FieldsV1");
    assert!(
        mf[0]["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{mf}"
    );
    assert_eq!(
        mf[0]["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );

    // Another manager changing an owned field: 409 naming the field and its manager.
    let err = apply_as(&api, "owned", "beta", false, cm(json!({"a": "9"})))
        .await
        .unwrap_err();
    let status = api_status(err);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"alpha\": .data.a"
    );
    // The same value is no conflict: both own the field.
    let shared = apply_as(&api, "owned", "beta", false, cm(json!({"b": "2"})))
        .await
        .unwrap();
    assert_eq!(entries(&shared).len(), 2);
    // Forced, the field changes hands.
    let forced = apply_as(&api, "owned", "beta", true, cm(json!({"a": "9", "b": "2"})))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "9");
    let owners = entries(&forced);
    let alpha = owners.iter().find(|e| e.0 == "alpha").unwrap();
    assert_eq!(
        alpha.2,
        json!({"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );

    // alpha stops applying b (beta owns it too: it stays) and the label (alpha's alone:
    // it goes).
    let after = apply_as(&api, "owned", "alpha", false, cm(json!({})))
        .await
        .unwrap();
    let data = after.data.clone().unwrap();
    assert_eq!(data.get("b").map(String::as_str), Some("2"), "{after:?}");
    assert_eq!(data.get("a").map(String::as_str), Some("9"), "{after:?}");
    assert!(
        after
            .metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key("app")),
        "{after:?}"
    );
    // beta stops applying b: it was the last owner, so b goes.
    let after = apply_as(&api, "owned", "beta", false, cm(json!({"a": "9"})))
        .await
        .unwrap();
    assert_eq!(
        after.data.unwrap().into_iter().collect::<Vec<_>>(),
        vec![("a".to_string(), "9".to_string())]
    );
    server.shutdown().await.unwrap();
}

/// kube-apiserver checks the name of the applied result: a configuration without
/// `metadata.name` applies to the object of the URL (kube-rs's own tests apply so), but
/// creates nothing, and a configuration naming another object is refused.
#[tokio::test]
async fn a_configuration_without_a_name_applies_to_the_object_of_the_url() {
    let (server, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let nameless = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data});
    let refused = api_status(
        apply_as(&api, "owned", "alpha", false, nameless(json!({"a": "1"})))
            .await
            .expect_err("nothing to take the name from"),
    );
    assert_eq!(refused.code, 400);
    assert_eq!(
        refused.message,
        "the name of the object () does not match the name on the URL (owned)"
    );
    apply_as(&api, "owned", "alpha", false, cm(json!({"a": "1"})))
        .await
        .unwrap();
    let applied = apply_as(&api, "owned", "alpha", false, nameless(json!({"a": "2"})))
        .await
        .expect("applied to the object of the URL");
    assert_eq!(applied.metadata.name.as_deref(), Some("owned"));
    assert_eq!(applied.data.unwrap()["a"], "2");
    let mut other = cm(json!({"a": "3"}));
    other["metadata"]["name"] = json!("other");
    let refused = api_status(
        apply_as(&api, "owned", "alpha", false, other)
            .await
            .expect_err("another object's name"),
    );
    assert_eq!(
        refused.message,
        "the name of the object (other) does not match the name on the URL (owned)"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_write_without_field_manager_or_user_agent_is_by_unknown() {
    let (server, _client) = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let r = post(&server, path, cm(json!({"a": "1"}))).await;
    assert_eq!(r.code, 201, "{}", r.body);
    // The manager kube-apiserver records when the request names none.
    let managers: Vec<String> = entries(&r.json()).into_iter().map(|e| e.0).collect();
    assert_eq!(managers, ["unknown"]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_configuration_without_kind_has_no_type() {
    let (server, _client) = start().await;
    let r = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/typeless?fieldManager=a",
        Some("application/apply-patch+yaml"),
        br#"{"apiVersion": "v1", "metadata": {"name": "typeless"}, "data": {"a": "1"}}"#,
    )
    .await;
    // As kube-apiserver answers it, and nothing is made.
    assert_status(&r, 400, "BadRequest");
    assert_eq!(r.json()["message"], "invalid object type: /v1, Kind=");
    let path = "/api/v1/namespaces/default/configmaps/typeless";
    assert_status(&get(&server, path).await, 404, "NotFound");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_map_a_write_removes_leaves_every_manager() {
    let (server, _client) = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let r = post(
        &server,
        &format!("{path}?fieldManager=creator"),
        cm(json!({"a": "1"})),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    // kube-apiserver: the write that removes `data` removes the map itself (`.`) from its
    // owner too; no manager owns anything then, and managedFields is gone.
    let r = raw(
        &server,
        "PATCH",
        &format!("{path}/owned?fieldManager=remover"),
        Some("application/merge-patch+json"),
        br#"{"data":null}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(entries(&r.json()), vec![], "{}", r.body);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn updates_record_their_managers() {
    let (server, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj: ConfigMap = serde_json::from_value(cm(json!({"a": "1"}))).unwrap();
    // `managedFields: [{}]` with a write resets them: only this write's manager remains.
    obj.metadata.managed_fields = Some(vec![Default::default()]);
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let created = api.create(&pp, &obj).await.unwrap();
    // The write brought `data`: its manager owns the map itself too (`.`), as
    // kube-apiserver records it.
    assert_eq!(
        entries(&created),
        vec![(
            "creator".into(),
            "Update".into(),
            json!({"f:data": {".": {}, "f:a": {}}})
        )]
    );
    // A merge patch by an applier-less editor takes the field it changes.
    let edit = PatchParams {
        field_manager: Some("editor".into()),
        ..Default::default()
    };
    let patched = api
        .patch(
            "owned",
            &edit,
            &Patch::Merge(json!({"data": {"a": "2", "b": "3"}})),
        )
        .await
        .unwrap();
    let owners = entries(&patched);
    assert_eq!(
        owners,
        vec![
            ("creator".into(), "Update".into(), json!({"f:data": {}})),
            (
                "editor".into(),
                "Update".into(),
                json!({"f:data": {"f:a": {}, "f:b": {}}})
            )
        ]
    );
    // Without fieldManager, the manager is the User-Agent's product name.
    let r = raw_with(
        &server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/owned",
        Some("application/merge-patch+json"),
        &[("User-Agent", "my-controller/1.2 (linux/amd64)")],
        br#"{"data":{"c":"4"}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let managers: Vec<String> = entries(&r.json()).into_iter().map(|e| e.0).collect();
    assert_eq!(managers, ["creator", "editor", "my-controller"]);
    // Apply against a field an Update manager set conflicts, worded as kube does.
    let err = apply_as(&api, "owned", "alpha", false, cm(json!({"c": "5"})))
        .await
        .unwrap_err();
    // kube-apiserver names the manager without the time of its write.
    let message = api_status(err).message;
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"my-controller\" using v1: .data.c"
    );

    // managedFields sent with an update are the ownership to start from (kubectl moves
    // client-side apply ownership to its server-side manager so); the write's own
    // changes are then recorded on top.
    let mut renamed = r.json()["metadata"]["managedFields"].clone();
    renamed[1]["manager"] = json!("kubectl");
    renamed[1]["operation"] = json!("Apply");
    let patch = json!([{"op": "replace", "path": "/metadata/managedFields", "value": renamed}]);
    let moved = api
        .patch(
            "owned",
            &edit,
            &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
        )
        .await
        .unwrap();
    let owners: Vec<(String, String)> = entries(&moved).into_iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(
        owners,
        [
            ("kubectl".into(), "Apply".into()),
            ("creator".into(), "Update".into()),
            ("my-controller".into(), "Update".into())
        ]
    );
    let moved = apply_as(
        &api,
        "owned",
        "kubectl",
        false,
        cm(json!({"a": "5", "b": "3"})),
    )
    .await
    .unwrap();
    assert_eq!(moved.data.unwrap()["a"], "5");

    // Apply needs a field manager; force is for apply only (both 422, as kube).
    let path = "/api/v1/namespaces/default/configmaps/owned";
    let r = raw(
        &server,
        "PATCH",
        path,
        Some("application/apply-patch+yaml"),
        b"{}",
    )
    .await;
    assert_status(&r, 422, "Invalid");
    assert_eq!(
        r.json()["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let r = raw(
        &server,
        "PATCH",
        &format!("{path}?force=true"),
        Some("application/merge-patch+json"),
        b"{}",
    )
    .await;
    assert_status(&r, 422, "Invalid");
    // An apply configuration may not carry managedFields.
    let mut with_mf = cm(json!({}));
    with_mf["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let err = apply_as(&api, "owned", "alpha", false, with_mf)
        .await
        .unwrap_err();
    assert_eq!(api_status(err).code, 400);
    server.shutdown().await.unwrap();
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}},
        },
    })
}

#[tokio::test]
async fn built_in_lists_merge_by_key() {
    let (server, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let alpha = deployment(
        json!([{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}]),
    );
    let d = apply_as(&api, "web", "alpha", false, alpha.clone())
        .await
        .unwrap();
    let fields = &entries(&d)[0].2;
    let app = &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
    assert_eq!(app["."], json!({}), "{fields}");
    assert_eq!(app["f:image"], json!({}), "{fields}");
    assert_eq!(
        app["f:ports"],
        json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}),
        "{fields}"
    );
    assert_eq!(
        app["f:env"]["k:{\"name\":\"A\"}"],
        json!({".": {}, "f:name": {}, "f:value": {}})
    );
    // selector is an atomic struct: owned as a whole.
    assert_eq!(fields["f:spec"]["f:selector"], json!({}), "{fields}");

    // beta adds a container, a port and an env var to alpha's container: merged by key.
    let beta = deployment(json!([
        {"name": "app", "ports": [{"containerPort": 9090, "name": "metrics"}], "env": [{"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "busybox"},
    ]));
    let d =
        serde_json::to_value(apply_as(&api, "web", "beta", false, beta).await.unwrap()).unwrap();
    let containers = &d["spec"]["template"]["spec"]["containers"];
    let names: Vec<&str> = containers
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["app", "sidecar"]);
    let app = &containers[0];
    assert_eq!(app["image"], "nginx");
    let ports: Vec<i64> = app["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["containerPort"].as_i64())
        .collect();
    assert_eq!(ports, [80, 9090]);
    let env: Vec<&str> = app["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(env, ["A", "B"]);

    // alpha re-applying what it had changes nothing; beta dropping its sidecar removes it.
    apply_as(&api, "web", "alpha", false, alpha).await.unwrap();
    let beta2 = deployment(
        json!([{"name": "app", "ports": [{"containerPort": 9090, "name": "metrics"}], "env": [{"name": "B", "value": "2"}]}]),
    );
    let d =
        serde_json::to_value(apply_as(&api, "web", "beta", false, beta2).await.unwrap()).unwrap();
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["app"]);
    server.shutdown().await.unwrap();
}

const LISTS_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
      "type": "object", "properties": {"spec": {"type": "object", "properties": {
        "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
          "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}}
      }}}}}}]}
}"#;

#[tokio::test]
async fn custom_resource_lists_follow_their_markers() {
    let (server, client) = start().await;
    let r = post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        serde_json::from_str(LISTS_CRD).unwrap(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let gvk = kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget");
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let widget = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    apply_as(
        &api,
        "w",
        "alpha",
        false,
        widget(json!({"items": [{"name": "a", "size": 1}], "tags": ["x"], "args": ["1", "2"]})),
    )
    .await
    .unwrap();
    let w = apply_as(
        &api,
        "w",
        "beta",
        false,
        widget(json!({"items": [{"name": "b", "size": 2}], "tags": ["y"]})),
    )
    .await
    .unwrap();
    let spec = &w.data["spec"];
    assert_eq!(
        spec["items"],
        json!([{"name": "a", "size": 1}, {"name": "b", "size": 2}])
    );
    assert_eq!(spec["tags"], json!(["x", "y"]));
    let beta = entries(&w).into_iter().find(|e| e.0 == "beta").unwrap().2;
    assert_eq!(beta["f:spec"]["f:tags"], json!({"v:\"y\"": {}}));
    // An atomic list is owned whole: another value conflicts, and force replaces it whole.
    let err = apply_as(&api, "w", "beta", false, widget(json!({"args": ["3"]})))
        .await
        .unwrap_err();
    assert_eq!(
        api_status(err).message,
        "Apply failed with 1 conflict: conflict with \"alpha\": .spec.args"
    );
    let w = apply_as(
        &api,
        "w",
        "beta",
        true,
        widget(json!({"items": [{"name": "b", "size": 2}], "tags": ["y"], "args": ["3"]})),
    )
    .await
    .unwrap();
    assert_eq!(w.data["spec"]["args"], json!(["3"]));
    server.shutdown().await.unwrap();
}
