//! Every patch type, and the rules for status subresources and generation.

use super::*;
use serde_json::json;

async fn patch(server: &ApiServer, path: &str, ct: &str, body: Value) -> Raw {
    raw(server, "PATCH", path, Some(ct), body.to_string().as_bytes()).await
}

#[tokio::test]
async fn merge_json_and_unsupported_patches() {
    let (server, _client) = start().await;
    let p = "/api/v1/namespaces/default/configmaps/c";
    post(&server, "/api/v1/namespaces/default/configmaps", json!({"metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2"}})).await;
    let r = patch(
        &server,
        p,
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"a": null, "c": "3"}}, "data": {"y": "9"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    assert_eq!(v["data"], json!({"x": "1", "y": "9"}));
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // JSON patch with a passing and then a failing `test` of the resourceVersion.
    let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, {"op": "add", "path": "/data/z", "value": "3"}]);
    let r = patch(&server, p, "application/json-patch+json", ops.clone()).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["data"]["z"], "3");
    let r = patch(&server, p, "application/json-patch+json", ops).await;
    assert_status(&r, 422, "Invalid");
    // kube-apiserver's generic 422: its message, empty details, no cause.
    assert_eq!(
        r.json()["message"],
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(r.json()["details"], json!({}));
    assert_status(
        &patch(
            &server,
            p,
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/nope/x"}]),
        )
        .await,
        422,
        "Invalid",
    );
    let r = patch(
        &server,
        p,
        "application/json-patch+json",
        json!({"op": "add"}),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert_eq!(
        r.json()["message"],
        "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
    );
    // An operation that is none: kube-apiserver fails it when it applies it (422).
    let unknown = json!([{"op": "frobnicate", "path": "/data"}]);
    let r = patch(&server, p, "application/json-patch+json", unknown).await;
    assert_status(&r, 422, "Invalid");
    assert_status(
        &patch(&server, p, "application/json", json!({})).await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &patch(&server, p, "text/plain", json!({})).await,
        415,
        "UnsupportedMediaType",
    );
    // A resourceVersion in a merge patch is a precondition.
    assert_status(
        &patch(
            &server,
            p,
            "application/merge-patch+json",
            json!({"metadata": {"resourceVersion": "1"}}),
        )
        .await,
        409,
        "Conflict",
    );
    assert_status(
        &patch(
            &server,
            "/api/v1/namespaces/default/configmaps/none",
            "application/merge-patch+json",
            json!({}),
        )
        .await,
        404,
        "NotFound",
    );
    // Clients cannot set deletionTimestamp or change the uid.
    let r = patch(
        &server,
        p,
        "application/merge-patch+json",
        json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z", "uid": "x"}}),
    )
    .await;
    assert_eq!(r.code, 200);
    assert!(r.json()["metadata"].get("deletionTimestamp").is_none());
    assert_ne!(r.json()["metadata"]["uid"], "x");
}

#[tokio::test]
async fn strategic_merge_and_apply() {
    let (server, _client) = start().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "image": "img:1", "env": [{"name": "E1", "value": "1"}], "ports": [{"containerPort": 80}]},
        {"name": "b", "image": "img:2"}]}});
    let r = post(&server, "/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["status"]["phase"], "Pending");
    let p = "/api/v1/namespaces/default/pods/p";
    let r = patch(&server, p, "application/strategic-merge-patch+json", json!({"spec": {"containers": [
        {"name": "a", "image": "img:3", "env": [{"name": "E2", "value": "2"}], "ports": [{"containerPort": 81}]},
        {"name": "b", "$patch": "delete"}]},
        "metadata": {"$setElementOrder/finalizers": [], "labels": {"l": "v"}}})).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let c = &r.json()["spec"]["containers"];
    assert_eq!(c.as_array().unwrap().len(), 1);
    assert_eq!(c[0]["image"], "img:3");
    assert_eq!(
        c[0]["env"],
        json!([{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}])
    );
    assert_eq!(
        c[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81, "protocol": "TCP"}])
    );
    assert_eq!(r.json()["metadata"]["labels"], json!({"l": "v"}));
    // Server-side apply creates when absent; a later apply by the same manager without
    // a field it applied before removes that field (no one else owns it).
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n";
    let ap = "/api/v1/namespaces/default/configmaps/applied?fieldManager=kubectl&force=true";
    let r = raw(
        &server,
        "PATCH",
        ap,
        Some("application/apply-patch+yaml"),
        yaml.as_bytes(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let yaml2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: \"2\"\n";
    let r = raw(
        &server,
        "PATCH",
        ap,
        Some("application/apply-patch+yaml"),
        yaml2.as_bytes(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["data"], json!({"b": "2"}));
    let r = raw(
        &server,
        "PATCH",
        ap,
        Some("application/apply-patch+yaml"),
        b"a: [unclosed",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
}

async fn crd_with_object(server: &ApiServer) -> String {
    assert_eq!(
        post(
            server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            kopf_crd()
        )
        .await
        .code,
        201
    );
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "ex"}, "spec": {"duration": "1m"}, "status": {"x": 1}});
    let r = post(
        server,
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
        obj,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    // POST ignores status when the status subresource exists.
    assert!(r.json().get("status").is_none(), "{}", r.body);
    "/apis/kopf.dev/v1/namespaces/default/kopfexamples/ex".to_string()
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let (server, _client) = start().await;
    let p = crd_with_object(&server).await;
    let m = "application/merge-patch+json";
    // Status through the main resource is ignored; spec bumps generation.
    let r = patch(
        &server,
        &p,
        m,
        json!({"spec": {"duration": "2m"}, "status": {"y": 2}}),
    )
    .await;
    let v = r.json();
    assert_eq!(v["metadata"]["generation"], 2);
    assert!(v.get("status").is_none());
    // /status changes only status (spec in the request is ignored), never generation.
    let r = patch(
        &server,
        &format!("{p}/status"),
        m,
        json!({"spec": {"duration": "9m"}, "status": {"y": 2}, "metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["status"], json!({"y": 2}));
    assert_eq!(v["spec"]["duration"], "2m");
    assert!(v["metadata"].get("labels").is_none());
    assert_eq!(v["metadata"]["generation"], 2);
    // Metadata changes do not bump generation either.
    let r = patch(
        &server,
        &p,
        m,
        json!({"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}}),
    )
    .await;
    assert_eq!(r.json()["metadata"]["generation"], 2);
    let g = get(&server, &format!("{p}/status")).await.json();
    assert_eq!(g["status"], json!({"y": 2}));
    // PUT on /status.
    let mut whole = g.clone();
    whole["status"] = json!({"z": 3});
    whole["spec"] = json!({"ignored": true});
    let r = raw(
        &server,
        "PUT",
        &format!("{p}/status"),
        Some("application/json"),
        whole.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["status"], json!({"z": 3}));
    assert_eq!(r.json()["spec"]["duration"], "2m");
    // Custom resources refuse updates without a resourceVersion.
    let mut blind = r.json();
    blind["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let r = raw(
        &server,
        "PUT",
        &p,
        Some("application/json"),
        blind.to_string().as_bytes(),
    )
    .await;
    assert_status(&r, 422, "Invalid");
    // Built-ins with status subresource: configmaps have none, so /status is 404 there.
    post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c"}}),
    )
    .await;
    assert_status(
        &patch(
            &server,
            "/api/v1/namespaces/default/configmaps/c/status",
            m,
            json!({}),
        )
        .await,
        404,
        "NotFound",
    );
}

#[tokio::test]
async fn custom_resources_follow_their_schema() {
    let (server, _client) = start().await;
    let mut crd = kopf_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer"},
            "mode": {"type": "string", "default": "fast", "enum": ["fast", "slow"]},
            "items": {"type": "array", "items": {"type": "string"}}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd
        )
        .await
        .code,
        201
    );
    let base = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";
    // Unknown fields are pruned, defaults applied.
    let r = post(
        &server,
        base,
        json!({"metadata": {"name": "a"}, "spec": {"size": 1, "junk": true}, "extra": 1}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["spec"], json!({"size": 1, "mode": "fast"}));
    assert!(r.json().get("extra").is_none());
    // Wrong types, missing required fields, values outside the enum: 422.
    assert_status(
        &post(
            &server,
            base,
            json!({"metadata": {"name": "b"}, "spec": {"size": "big"}}),
        )
        .await,
        422,
        "Invalid",
    );
    assert_status(
        &post(
            &server,
            base,
            json!({"metadata": {"name": "b"}, "spec": {}}),
        )
        .await,
        422,
        "Invalid",
    );
    let p = format!("{base}/a");
    assert_status(
        &patch(
            &server,
            &p,
            "application/merge-patch+json",
            json!({"spec": {"mode": "medium"}}),
        )
        .await,
        422,
        "Invalid",
    );
    // Status keeps unknown fields (preserve-unknown-fields).
    let r = patch(
        &server,
        &format!("{p}/status"),
        "application/merge-patch+json",
        json!({"status": {"any": {"x": 1}}}),
    )
    .await;
    assert_eq!(r.json()["status"], json!({"any": {"x": 1}}));
    // Custom resources have no strategic merge patch; apply merges lists atomically.
    assert_status(
        &patch(
            &server,
            &p,
            "application/strategic-merge-patch+json",
            json!({}),
        )
        .await,
        415,
        "UnsupportedMediaType",
    );
    // The merge patches above own spec.size (an Update manager): the apply takes it over.
    let r = raw(&server, "PATCH", &format!("{p}?fieldManager=t&force=true"), Some("application/apply-patch+yaml"), b"apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: a\nspec:\n  size: 2\n  items: [x]\n").await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.json()["spec"],
        json!({"size": 2, "mode": "fast", "items": ["x"]})
    );
}

#[tokio::test]
async fn builtin_validation_and_protected_namespaces() {
    let (server, _client) = start().await;
    let pods = "/api/v1/namespaces/default/pods";
    assert_status(
        &post(
            &server,
            pods,
            json!({"metadata": {"name": "p"}, "spec": {}}),
        )
        .await,
        422,
        "Invalid",
    );
    assert_status(
        &post(
            &server,
            pods,
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
        )
        .await,
        422,
        "Invalid",
    );
    for ns in ["default", "kube-system", "kube-public"] {
        assert_status(
            &raw(
                &server,
                "DELETE",
                &format!("/api/v1/namespaces/{ns}"),
                None,
                b"",
            )
            .await,
            403,
            "Forbidden",
        );
    }
}

#[tokio::test]
async fn scale_subresource() {
    let (server, _client) = start().await;
    let dep = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    assert_eq!(
        post(&server, "/apis/apps/v1/namespaces/default/deployments", dep)
            .await
            .code,
        201
    );
    let p = "/apis/apps/v1/namespaces/default/deployments/d/scale";
    let s = get(&server, p).await.json();
    assert_eq!(s["kind"], "Scale");
    assert_eq!(s["apiVersion"], "autoscaling/v1");
    assert_eq!(s["spec"]["replicas"], 1);
    assert_eq!(s["status"]["selector"], "app=d");
    let r = patch(
        &server,
        p,
        "application/merge-patch+json",
        json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["replicas"], 3);
    let d = get(&server, "/apis/apps/v1/namespaces/default/deployments/d")
        .await
        .json();
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
    let mut stale = s.clone();
    stale["spec"]["replicas"] = json!(5);
    let r = raw(
        &server,
        "PUT",
        p,
        Some("application/json"),
        stale.to_string().as_bytes(),
    )
    .await;
    assert_status(&r, 409, "Conflict");
    let apps = get(&server, "/apis/apps/v1").await.json();
    assert!(
        apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "deployments/scale" && r["kind"] == "Scale")
    );
    // A CRD with a scale subresource.
    let mut crd = kopf_crd();
    crd["spec"]["versions"][0]["subresources"]["scale"] =
        json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"});
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await;
    post(
        &server,
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
        json!({"metadata": {"name": "k"}, "spec": {"replicas": 2}}),
    )
    .await;
    let s = get(
        &server,
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples/k/scale",
    )
    .await
    .json();
    assert_eq!(s["spec"]["replicas"], 2);
    assert_status(
        &get(&server, "/api/v1/namespaces/default/configmaps/x/scale").await,
        404,
        "NotFound",
    );
}

#[tokio::test]
async fn deleting_a_custom_object_answers_a_success_status() {
    let (server, _client) = start().await;
    let p = crd_with_object(&server).await;
    let uid = get(&server, &p).await.json()["metadata"]["uid"].clone();
    let r = raw(&server, "DELETE", &p, None, b"").await;
    assert_eq!(r.code, 200, "{}", r.body);
    // As kube-apiserver answers an object gone at once (not the object, as for pods).
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "ex", "group": "kopf.dev", "kind": "kopfexamples", "uid": uid}})
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_custom_resource_list_says_continue_even_when_empty() {
    let (server, _client) = start().await;
    let p = crd_with_object(&server).await;
    let list = p.trim_end_matches("/ex");
    // kube-apiserver's unstructured list of a custom resource has continue "", where a
    // built-in's list leaves it out.
    let custom = get(&server, list).await.json();
    assert_eq!(custom["metadata"]["continue"], "", "{custom}");
    let builtin = get(&server, "/api/v1/namespaces/default/configmaps")
        .await
        .json();
    assert!(builtin["metadata"].get("continue").is_none(), "{builtin}");
    server.shutdown().await.unwrap();
}
