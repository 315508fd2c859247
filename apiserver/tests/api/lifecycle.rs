//! Finalizers and deletionTimestamp, owner-reference garbage collection, namespace deletion.

use super::*;
use serde_json::json;

#[tokio::test]
async fn finalizers_hold_deletion() {
    let (server, _client) = start().await;
    let p = "/api/v1/namespaces/default/configmaps/f";
    let r = post(&server, "/api/v1/namespaces/default/configmaps", json!({"metadata": {"name": "f", "finalizers": ["kopf.zalando.org/KopfFinalizerMarker", "other.example.com/x"]}})).await;
    assert_eq!(r.code, 201);
    let r = raw(
        &server,
        "DELETE",
        p,
        Some("application/json"),
        br#"{"propagationPolicy": "Background"}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let v = r.json();
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 0);
    // Deletion bumps the generation of types that have one; a ConfigMap has none.
    assert!(v["metadata"].get("generation").is_none(), "{v}");
    // Deleting again returns it unchanged.
    let again = raw(&server, "DELETE", p, None, b"").await.json();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        v["metadata"]["resourceVersion"]
    );
    // No new finalizers while deleting.
    let r = raw(&server, "PATCH", p, Some("application/merge-patch+json"), br#"{"metadata": {"finalizers": ["kopf.zalando.org/KopfFinalizerMarker", "other.example.com/x", "new.example.com/y"]}}"#).await;
    assert_status(&r, 422, "Invalid");
    // Worded as kube-apiserver: a Forbidden cause naming them (Go's %#v).
    let message = "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"new.example.com/y\"}";
    assert_eq!(
        r.json()["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "message": message, "field": "metadata.finalizers"}])
    );
    // Removing one keeps it; removing the last deletes it.
    let rv = v["metadata"]["resourceVersion"].as_str().unwrap();
    let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, {"op": "remove", "path": "/metadata/finalizers/0"}]);
    let r = raw(
        &server,
        "PATCH",
        p,
        Some("application/json-patch+json"),
        ops.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(get(&server, p).await.code, 200);
    let r = raw(
        &server,
        "PATCH",
        p,
        Some("application/merge-patch+json"),
        br#"{"metadata": {"finalizers": null}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_status(&get(&server, p).await, 404, "NotFound");
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let (server, _client) = start().await;
    let base = "/api/v1/namespaces/default/configmaps";
    let owner = post(&server, base, json!({"metadata": {"name": "owner"}}))
        .await
        .json();
    let uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]);
    post(
        &server,
        base,
        json!({"metadata": {"name": "dep1", "ownerReferences": oref}}),
    )
    .await;
    post(&server, base, json!({"metadata": {"name": "dep2", "ownerReferences": oref, "finalizers": ["x.example.com/y"]}})).await;
    post(
        &server,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "dep3", "ownerReferences": oref}}),
    )
    .await;
    let r = raw(&server, "DELETE", &format!("{base}/owner"), None, b"").await;
    assert_eq!(r.code, 200);
    assert_eq!(r.json()["status"], "Success");
    assert_status(
        &get(&server, &format!("{base}/dep1")).await,
        404,
        "NotFound",
    );
    assert_status(
        &get(&server, "/api/v1/namespaces/default/secrets/dep3").await,
        404,
        "NotFound",
    );
    // A dependent with a finalizer goes through deletion like any other.
    let d2 = get(&server, &format!("{base}/dep2")).await.json();
    assert!(d2["metadata"]["deletionTimestamp"].is_string());
    // Orphan leaves dependents and drops their reference.
    let owner = post(&server, base, json!({"metadata": {"name": "owner2"}}))
        .await
        .json();
    let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner2", "uid": owner["metadata"]["uid"]}]);
    post(
        &server,
        base,
        json!({"metadata": {"name": "kept", "ownerReferences": oref}}),
    )
    .await;
    let r = raw(
        &server,
        "DELETE",
        &format!("{base}/owner2?propagationPolicy=Orphan"),
        None,
        b"",
    )
    .await;
    assert_eq!(r.code, 200);
    let kept = get(&server, &format!("{base}/kept")).await;
    assert_eq!(kept.code, 200);
    assert!(kept.json()["metadata"].get("ownerReferences").is_none());
}

/// The garbage collector deletes dependents whose owners are all absent (never created,
/// or re-created under another uid), drops references to absent owners when another owner
/// is there, and leaves references to kinds it cannot resolve.
#[tokio::test]
async fn dependents_of_absent_owners_are_collected() {
    let (server, _client) = start().await;
    let base = "/api/v1/namespaces/default/configmaps";
    let ghost = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": "7d8e1a52-0000-4000-8000-000000000001"});
    let r = post(
        &server,
        base,
        json!({"metadata": {"name": "orphan", "ownerReferences": [ghost]}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_status(
        &get(&server, &format!("{base}/orphan")).await,
        404,
        "NotFound",
    );

    // An owner by that name exists, but with another uid: still absent.
    let live = post(&server, base, json!({"metadata": {"name": "never"}}))
        .await
        .json();
    post(
        &server,
        base,
        json!({"metadata": {"name": "stale", "ownerReferences": [ghost]}}),
    )
    .await;
    assert_status(
        &get(&server, &format!("{base}/stale")).await,
        404,
        "NotFound",
    );

    // One live owner: the dangling reference goes, the object stays.
    let solid = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": live["metadata"]["uid"]});
    post(
        &server,
        base,
        json!({"metadata": {"name": "half", "ownerReferences": [ghost, solid]}}),
    )
    .await;
    let half = get(&server, &format!("{base}/half")).await;
    assert_eq!(half.code, 200, "{}", half.body);
    assert_eq!(half.json()["metadata"]["ownerReferences"], json!([solid]));

    // A dependent keeps a finalizer's protection: it is marked for deletion only.
    post(&server, base, json!({"metadata": {"name": "held", "ownerReferences": [ghost], "finalizers": ["x.example.com/y"]}})).await;
    let held = get(&server, &format!("{base}/held")).await.json();
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");

    // A kind the server does not serve cannot be looked up: the reference stays.
    let unknown = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "name": "g", "uid": "7d8e1a52-0000-4000-8000-000000000002"});
    post(
        &server,
        base,
        json!({"metadata": {"name": "unsure", "ownerReferences": [unknown]}}),
    )
    .await;
    assert_eq!(get(&server, &format!("{base}/unsure")).await.code, 200);

    // An update that points a live object at an absent owner gets it collected too.
    let r = raw(
        &server,
        "PATCH",
        &format!("{base}/unsure"),
        Some("application/merge-patch+json"),
        json!({"metadata": {"ownerReferences": [ghost]}})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_status(
        &get(&server, &format!("{base}/unsure")).await,
        404,
        "NotFound",
    );
}

/// A namespaced owner is looked up in its dependent's namespace only: a dependent in
/// another namespace, or a cluster-scoped one, is collected at once, with kube's Warning
/// Event `OwnerRefInvalidNamespace` on it (in `default` for a cluster-scoped dependent).
#[tokio::test]
async fn an_owner_in_another_namespace_is_reported_and_taken_for_absent() {
    let (server, _client) = start().await;
    let r = post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "other"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let owner = post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "source"}}),
    )
    .await
    .json();
    let uid = owner["metadata"]["uid"].as_str().expect("a uid").to_owned();
    let reference = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "source", "uid": uid});
    let base = "/api/v1/namespaces/other/configmaps";
    let copy = post(
        &server,
        base,
        json!({"metadata": {"name": "copy", "ownerReferences": [reference]}}),
    )
    .await;
    assert_eq!(copy.code, 201, "{}", copy.body);
    let copy_uid = copy.json()["metadata"]["uid"].clone();
    assert_status(
        &get(&server, &format!("{base}/copy")).await,
        404,
        "NotFound",
    );
    let events = get(&server, "/api/v1/namespaces/other/events").await.json();
    let warnings: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["reason"] == "OwnerRefInvalidNamespace")
        .collect();
    assert_eq!(warnings.len(), 1, "{events}");
    let event = warnings[0];
    assert_eq!(event["type"], "Warning");
    assert_eq!(
        event["message"],
        format!(
            "ownerRef [v1/ConfigMap, namespace: other, name: source, uid: {uid}] does not exist in namespace \"other\""
        )
    );
    assert_eq!(
        event["involvedObject"],
        json!({"kind": "ConfigMap", "namespace": "other", "name": "copy", "uid": copy_uid, "apiVersion": "v1"})
    );
    assert_eq!(event["source"]["component"], "garbage-collector-controller");
    assert_eq!(event["count"], 1);

    // A cluster-scoped dependent: its Event is in `default`.
    let node = post(
        &server,
        "/api/v1/nodes",
        json!({"metadata": {"name": "n1", "ownerReferences": [reference]}}),
    )
    .await;
    assert_eq!(node.code, 201, "{}", node.body);
    assert_status(&get(&server, "/api/v1/nodes/n1").await, 404, "NotFound");
    let events = get(&server, "/api/v1/namespaces/default/events")
        .await
        .json();
    let messages: Vec<&str> = events["items"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| {
            e["reason"] == "OwnerRefInvalidNamespace" && e["involvedObject"]["kind"] == "Node"
        })
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert_eq!(
        messages,
        [format!(
            "ownerRef [v1/ConfigMap, namespace: , name: source, uid: {uid}] does not exist in namespace \"\""
        )]
    );

    // In the owner's namespace, the same reference holds, and nothing is reported.
    let kept = post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "kept", "ownerReferences": [reference]}}),
    )
    .await;
    assert_eq!(kept.code, 201, "{}", kept.body);
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/configmaps/kept")
            .await
            .code,
        200
    );
    let events = get(&server, "/api/v1/namespaces/default/events")
        .await
        .json();
    let reported = events["items"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["reason"] == "OwnerRefInvalidNamespace")
        .count();
    assert_eq!(reported, 1, "only the node's Event: {events}");
}

/// Waits until the object at `path` is gone (404), following a watch of its collection.
async fn await_gone(client: &Client, ns: Option<&str>, plural_api: (&str, &str, &str), name: &str) {
    use kube::runtime::wait::{await_condition, conditions};
    let (group, version, kind) = plural_api;
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .expect("a kind");
    let api: kube::Api<kube::core::DynamicObject> = match ns {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &ar),
        None => kube::Api::all_with(client.clone(), &ar),
    };
    let Some(obj) = api.get_opt(name).await.expect("a get") else {
        return;
    };
    let uid = obj.metadata.uid.expect("a uid");
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(api, name, conditions::is_deleted(&uid)),
    )
    .await
    .expect("deleted in time")
    .expect("a watch");
}

async fn doomed_namespace(server: &ApiServer) {
    post(
        server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "doomed"}}),
    )
    .await;
    for cm in [
        json!({"metadata": {"name": "a"}}),
        json!({"metadata": {"name": "b", "finalizers": ["x.example.com/y"]}}),
    ] {
        assert_eq!(
            post(server, "/api/v1/namespaces/doomed/configmaps", cm)
                .await
                .code,
            201
        );
    }
    let r = raw(server, "DELETE", "/api/v1/namespaces/doomed", None, b"").await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["status"]["phase"], "Terminating");
}

/// As kube's namespace controller, the dev cluster waits before it deletes a terminating
/// namespace's content (5 s), so a client deleting the namespace and then its objects
/// (`kubectl delete -k`) finds them; new content is refused meanwhile.
#[tokio::test]
async fn a_terminating_namespace_keeps_its_content_for_kubes_delay() {
    let (server, _client) = start().await;
    doomed_namespace(&server).await;
    let ns = get(&server, "/api/v1/namespaces/doomed").await.json();
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["status"].get("conditions").is_none(), "{ns}");
    assert_eq!(
        get(&server, "/api/v1/namespaces/doomed/configmaps/a")
            .await
            .code,
        200
    );
    let r = raw(
        &server,
        "DELETE",
        "/api/v1/namespaces/doomed/configmaps/a",
        None,
        b"",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let refused = post(
        &server,
        "/api/v1/namespaces/doomed/configmaps",
        json!({"metadata": {"name": "c"}}),
    )
    .await;
    assert_status(&refused, 403, "Forbidden");
    assert_eq!(
        refused.json()["details"]["causes"],
        json!([{"reason": "NamespaceTerminating", "message": "namespace doomed is being terminated",
                "field": "metadata.namespace"}])
    );
}

#[tokio::test]
async fn namespace_deletion_deletes_contents() {
    let config = Config::default().namespace_deletion_delay(Duration::ZERO);
    let (server, client) = start_with(config).await;
    doomed_namespace(&server).await;
    await_gone(&client, Some("doomed"), ("", "v1", "ConfigMap"), "a").await;
    // Held by b's finalizer: the namespace stays Terminating and says why.
    let ns = get(&server, "/api/v1/namespaces/doomed").await.json();
    assert_eq!(ns["status"]["phase"], "Terminating");
    let condition = |ty: &str| {
        ns["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .find(|c| c["type"] == ty)
            .cloned()
            .unwrap_or_else(|| panic!("{ty}: {ns}"))
    };
    assert_eq!(
        condition("NamespaceContentRemaining")["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert_eq!(
        condition("NamespaceFinalizersRemaining")["message"],
        "Some content in the namespace has finalizers remaining: x.example.com/y in 1 resource instances"
    );
    assert_eq!(
        condition("NamespaceDeletionContentFailure")["status"],
        "False"
    );
    let r = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/doomed/configmaps/b",
        Some("application/merge-patch+json"),
        br#"{"metadata": {"finalizers": []}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_status(
        &get(&server, "/api/v1/namespaces/doomed").await,
        404,
        "NotFound",
    );
}

/// An empty namespace goes after the delay too, and one of the same name made again is
/// handled again.
#[tokio::test]
async fn an_empty_namespace_goes_after_the_delay_each_time() {
    let config = Config::default().namespace_deletion_delay(Duration::from_millis(50));
    let (server, client) = start_with(config).await;
    for _ in 0..2 {
        let r = post(
            &server,
            "/api/v1/namespaces",
            json!({"metadata": {"name": "brief"}}),
        )
        .await;
        assert_eq!(r.code, 201, "{}", r.body);
        let r = raw(&server, "DELETE", "/api/v1/namespaces/brief", None, b"").await;
        assert_eq!(r.code, 200, "{}", r.body);
        await_gone(&client, None, ("", "v1", "Namespace"), "brief").await;
    }
}

#[tokio::test]
async fn crd_deletion_waits_for_instance_finalizers() {
    let (server, _client) = start().await;
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        kopf_crd(),
    )
    .await;
    let obj = json!({"metadata": {"name": "ex", "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"]}, "spec": {}});
    assert_eq!(
        post(
            &server,
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
            obj
        )
        .await
        .code,
        201
    );
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev";
    assert_eq!(raw(&server, "DELETE", crd, None, b"").await.code, 200);
    let p = "/apis/kopf.dev/v1/namespaces/default/kopfexamples/ex";
    assert!(get(&server, p).await.json()["metadata"]["deletionTimestamp"].is_string());
    assert!(
        get(&server, crd).await.json()["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Terminating")
    );
    assert_status(
        &post(
            &server,
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
            json!({"metadata": {"name": "new"}}),
        )
        .await,
        405,
        "MethodNotAllowed",
    );
    raw(
        &server,
        "PATCH",
        p,
        Some("application/merge-patch+json"),
        br#"{"metadata": {"finalizers": null}}"#,
    )
    .await;
    assert_status(&get(&server, crd).await, 404, "NotFound");
    assert_status(&get(&server, "/apis/kopf.dev/v1").await, 404, "NotFound");
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() {
    let (server, _client) = start().await;
    let base = "/api/v1/namespaces/default/configmaps";
    let owner = post(&server, base, json!({"metadata": {"name": "owner"}}))
        .await
        .json();
    let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]);
    post(&server, base, json!({"metadata": {"name": "dep", "ownerReferences": oref, "finalizers": ["x.example.com/y"]}})).await;
    let r = raw(
        &server,
        "DELETE",
        &format!("{base}/owner"),
        Some("application/json"),
        br#"{"propagationPolicy": "Foreground"}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let o = get(&server, &format!("{base}/owner")).await.json();
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(
        get(&server, &format!("{base}/dep")).await.json()["metadata"]["deletionTimestamp"]
            .is_string()
    );
    raw(
        &server,
        "PATCH",
        &format!("{base}/dep"),
        Some("application/merge-patch+json"),
        br#"{"metadata": {"finalizers": null}}"#,
    )
    .await;
    assert_status(&get(&server, &format!("{base}/dep")).await, 404, "NotFound");
    assert_status(
        &get(&server, &format!("{base}/owner")).await,
        404,
        "NotFound",
    );
    // Without dependents, foreground deletion is immediate.
    post(&server, base, json!({"metadata": {"name": "lonely"}})).await;
    let r = raw(
        &server,
        "DELETE",
        &format!("{base}/lonely?propagationPolicy=Foreground"),
        None,
        b"",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_status(
        &get(&server, &format!("{base}/lonely")).await,
        404,
        "NotFound",
    );
}
