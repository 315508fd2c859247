//! What checks make before they compare (ConfigMaps, a CRD with its objects served), made
//! without being recorded.

use crate::run::{Run, request};
use serde_json::{Value, json};

/// A ConfigMap with these labels and data.
pub(crate) fn configmap(name: &str, labels: Value, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": data,
    })
}

/// Makes ConfigMaps without recording it (what a check lists or watches).
pub(crate) async fn make_configmaps(r: &Run, names: &[(&str, Value)]) {
    let path = r.configmaps("");
    for (name, labels) in names {
        let body = configmap(name, labels.clone(), json!({"k": "v"}));
        let made = r
            .quietly(&request(
                "POST",
                &path,
                Some("application/json"),
                Some(&body),
            ))
            .await;
        assert_eq!(made.status, 201, "setup: {}", made.body);
    }
}

/// The group of the check's CRD: `<check>.<token>.kapsel.dev`, one per check and run.
pub(crate) fn widget_group(r: &Run, check: &str) -> String {
    format!("{check}.{}.kapsel.dev", r.token)
}

/// A namespaced CRD `widgets.<group>`, version v1, with a schema (spec.size an integer at
/// most 10, spec.color one of red, blue), the status and scale subresources and a column.
pub(crate) fn widget_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "replicas": {"type": "integer"},
                    }},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"},
                        "replicas": {"type": "integer"},
                    }},
                }}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
            }],
        },
    })
}

/// Makes the check's CRD without recording it, and waits until it is Established and its
/// objects are served. Answers the path of the widgets of the check's namespace.
pub(crate) async fn make_widgets(r: &Run, check: &str) -> String {
    let group = widget_group(r, check);
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = widget_crd(&group);
    let made = r
        .quietly(&request("POST", crds, Some("application/json"), Some(&crd)))
        .await;
    assert_eq!(made.status, 201, "setup: {}", made.body);
    let widgets = format!("/apis/{group}/v1/namespaces/{}/widgets", r.ns);
    wait_until_served(r, &widgets).await;
    widgets
}

/// Lists `path` until it answers 200 (a CRD's objects are served a moment after it is
/// made), at most 10 s.
pub(crate) async fn wait_until_served(r: &Run, path: &str) {
    for _ in 0..100 {
        if r.quietly(&request("GET", path, None, None)).await.status == 200 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("setup: {path} was not served within 10 s");
}
