//! The `fieldValidation` query parameter on create, update and patch.

use crate::{assert_status, get, post, raw, start};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

/// A CRD with a structural schema: `spec.size`, `spec.data` (a string map) and
/// a free-form `spec.extra`.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "data": {"type": "object", "additionalProperties": {"type": "string"}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }}}],
        },
    })
}

async fn send(
    server: &kapsel_apiserver::ApiServer,
    method: &str,
    path: &str,
    ct: &str,
    body: &str,
) -> crate::Raw {
    raw(server, method, path, Some(ct), body.as_bytes()).await
}

fn warnings(r: &crate::Raw) -> Vec<&str> {
    r.headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("warning"))
        .map(|(_, v)| v.as_str())
        .collect()
}

#[tokio::test]
async fn strict_rejects_unknown_and_duplicate_fields() {
    let (server, _) = start().await;
    // The typo from kubectl's `apply` (which sends fieldValidation=Strict).
    let r = post(
        &server,
        &format!("{CMS}?fieldManager=kubectl-client-side-apply&fieldValidation=Strict"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typo"}, "data": {}, "datta": {"a": "b"}}),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert_eq!(
        r.json()["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"datta\""
    );
    assert_eq!(get(&server, &format!("{CMS}/typo")).await.code, 404);

    // Several fields: comma-separated; duplicates are reported too.
    let body = r#"{"metadata": {"name": "two", "lables": {}}, "data": {"a": "1"}, "bogus": 1, "data": {}}"#;
    let r = send(
        &server,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        "application/json",
        body,
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.ends_with(
            "strict decoding error: unknown field \"metadata.lables\", unknown field \"bogus\", duplicate field \"data\""
        ),
        "{message}"
    );

    // Custom resources: by the CRD's schema.
    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            widget_crd()
        )
        .await
        .code,
        201
    );
    let r = post(
        &server,
        &format!("{WIDGETS}?fieldValidation=Strict"),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"size": 1, "datta": {}, "extra": {"anything": [1]}}}),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert_eq!(
        r.json()["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.datta\""
    );

    // Updates and patches are checked too.
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}});
    assert_eq!(post(&server, WIDGETS, w).await.code, 201);
    let r = send(
        &server,
        "PATCH",
        &format!("{WIDGETS}/w?fieldValidation=Strict"),
        "application/merge-patch+json",
        r#"{"spec": {"sise": 2, "colour": "red"}}"#,
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert!(
        r.json()["message"].as_str().unwrap().ends_with(
            "strict decoding error: unknown field \"spec.sise\", unknown field \"spec.colour\""
        ),
        "{}",
        r.body
    );
    let mut current = get(&server, &format!("{WIDGETS}/w")).await.json();
    current["spec"]["datta"] = json!(1);
    let r = send(
        &server,
        "PUT",
        &format!("{WIDGETS}/w?fieldValidation=Strict"),
        "application/json",
        &current.to_string(),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert!(
        r.body.contains("unknown field \\\"spec.datta\\\""),
        "{}",
        r.body
    );
    assert_eq!(
        get(&server, &format!("{WIDGETS}/w")).await.json()["spec"],
        json!({"size": 1})
    );
}

#[tokio::test]
async fn strict_accepts_valid_objects() {
    let (server, _) = start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "ok", "labels": {"a": "b"}, "annotations": {"x": "y"}},
                    "data": {"k": "v"}, "binaryData": {"b": "AA=="}, "immutable": false});
    let r = post(&server, &format!("{CMS}?fieldValidation=Strict"), cm).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(warnings(&r).is_empty(), "{r:?}");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}}},
    });
    let r = post(
        &server,
        "/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict",
        deployment,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = send(
        &server,
        "PATCH",
        &format!("{CMS}/ok?fieldValidation=Strict"),
        "application/strategic-merge-patch+json",
        r#"{"data": {"k2": "v2"}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);

    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            widget_crd()
        )
        .await
        .code,
        201
    );
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                   "spec": {"size": 1, "data": {"a": "b"}, "extra": {"free": {"form": true}}}});
    let r = post(&server, &format!("{WIDGETS}?fieldValidation=Strict"), w).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["spec"]["extra"], json!({"free": {"form": true}}));
}

#[tokio::test]
async fn warn_accepts_with_warning_headers() {
    let (server, _) = start().await;
    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            widget_crd()
        )
        .await
        .code,
        201
    );
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                   "spec": {"size": 1, "datta": {"a": "b"}, "colour": "red"}});
    let r = post(&server, &format!("{WIDGETS}?fieldValidation=Warn"), w).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        warnings(&r),
        [
            r#"299 - "unknown field \"spec.datta\"""#,
            r#"299 - "unknown field \"spec.colour\"""#
        ]
    );
    // Stored without the unknown fields (pruned).
    assert_eq!(r.json()["spec"], json!({"size": 1}));
    assert_eq!(
        get(&server, &format!("{WIDGETS}/w")).await.json()["spec"],
        json!({"size": 1})
    );

    let r = send(
        &server,
        "PATCH",
        &format!("{WIDGETS}/w?fieldValidation=Warn"),
        "application/merge-patch+json",
        r#"{"spec": {"size": 2, "sise": 3}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(warnings(&r), [r#"299 - "unknown field \"spec.sise\"""#]);
    assert_eq!(r.json()["spec"], json!({"size": 2}));

    let r = post(
        &server,
        &format!("{CMS}?fieldValidation=Warn"),
        json!({"metadata": {"name": "c"}, "datta": {}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(warnings(&r), [r#"299 - "unknown field \"datta\"""#]);
}

#[tokio::test]
async fn ignore_absent_and_invalid_directives() {
    let (server, _) = start().await;
    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            widget_crd()
        )
        .await
        .code,
        201
    );
    // Ignore drops silently; no directive at all means Warn, as in kube-apiserver.
    for (i, q) in ["?fieldValidation=Ignore", ""].into_iter().enumerate() {
        let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": format!("w{i}")},
                       "spec": {"size": 1, "datta": {}}});
        let r = post(&server, &format!("{WIDGETS}{q}"), w).await;
        assert_eq!(r.code, 201, "{}", r.body);
        assert_eq!(warnings(&r).is_empty(), q.contains("Ignore"), "{r:?}");
        assert_eq!(r.json()["spec"], json!({"size": 1}));
    }

    for (method, path, ct) in [
        ("POST", CMS.to_string(), "application/json"),
        ("PUT", format!("{CMS}/x"), "application/json"),
        ("PATCH", format!("{CMS}/x"), "application/merge-patch+json"),
    ] {
        let r = send(
            &server,
            method,
            &format!("{path}?fieldValidation=strict"),
            ct,
            r#"{"metadata": {"name": "x"}}"#,
        )
        .await;
        assert_status(&r, 400, "BadRequest");
        assert_eq!(
            r.json()["message"],
            "fieldValidation: Unsupported value: \"strict\": supported values: \"Ignore\", \"Warn\", \"Strict\"",
            "{method}"
        );
    }
    assert_eq!(get(&server, &format!("{CMS}/x")).await.code, 404);
}
