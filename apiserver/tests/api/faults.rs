//! Injected faults: 410, 429 with Retry-After, 500, delays; never on by default.

use super::*;
use kapsel_apiserver::{Fault, RequestMatcher};
use serde_json::json;
use std::time::Instant;

#[tokio::test]
async fn injected_errors_hit_only_matching_requests() {
    let (server, _client) = start().await;
    let f = server.faults();
    let cms = "/api/v1/namespaces/default/configmaps";
    f.fail_next(
        2,
        RequestMatcher::any().verb("list").plural("configmaps"),
        Fault::TooManyRequests {
            retry_after_secs: 3,
        },
    );
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/secrets")
            .await
            .code,
        200
    );
    assert_eq!(
        post(&server, cms, json!({"metadata": {"name": "a"}}))
            .await
            .code,
        201
    );
    for _ in 0..2 {
        let r = get(&server, cms).await;
        assert_status(&r, 429, "TooManyRequests");
        assert_eq!(r.header("retry-after"), Some("3"));
        assert_eq!(r.json()["details"]["retryAfterSeconds"], 3);
    }
    assert_eq!(get(&server, cms).await.code, 200);
    f.fail_next(
        1,
        RequestMatcher::any().verb("create"),
        Fault::InternalError,
    );
    assert_status(
        &post(&server, cms, json!({"metadata": {"name": "b"}})).await,
        500,
        "InternalError",
    );
    assert_eq!(
        post(&server, cms, json!({"metadata": {"name": "b"}}))
            .await
            .code,
        201
    );
    f.fail_next(1, RequestMatcher::any().verb("watch"), Fault::Gone);
    assert_status(
        &get(&server, &format!("{cms}?watch=true")).await,
        410,
        "Expired",
    );
    f.fail_next(1, RequestMatcher::any(), Fault::InternalError);
    assert_status(&get(&server, "/version").await, 500, "InternalError");
    assert_eq!(get(&server, "/version").await.code, 200);
}

#[tokio::test]
async fn delayed_responses() {
    let (server, _client) = start().await;
    server
        .faults()
        .delay_responses(Some(Duration::from_millis(300)));
    let t = Instant::now();
    assert_eq!(get(&server, "/api/v1/namespaces").await.code, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    server.faults().delay_responses(None);
    let t = Instant::now();
    assert_eq!(get(&server, "/api/v1/namespaces").await.code, 200);
    assert!(t.elapsed() < Duration::from_millis(300));
}

#[tokio::test]
async fn kube_client_retries_after_429() {
    let (server, client) = start().await;
    server.faults().fail_next(
        1,
        RequestMatcher::any().plural("configmaps"),
        Fault::TooManyRequests {
            retry_after_secs: 1,
        },
    );
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(client);
    // kube-rs's default retry layer honours 429 and tries again.
    assert!(api.list(&Default::default()).await.is_ok());
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/configmaps")
            .await
            .code,
        200
    );
}

#[tokio::test]
async fn injected_conflicts_and_invalid_patches_name_the_object() {
    let (server, _client) = start().await;
    let f = server.faults();
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        post(&server, cms, json!({"metadata": {"name": "a"}}))
            .await
            .code,
        201
    );
    let merge = |body: Value| {
        let server = &server;
        async move {
            raw(
                server,
                "PATCH",
                &format!("{cms}/a"),
                Some("application/merge-patch+json"),
                body.to_string().as_bytes(),
            )
            .await
        }
    };
    let patches = RequestMatcher::any().verb("patch").plural("configmaps");
    f.fail_next(1, patches.clone(), Fault::Conflict);
    f.fail_next(1, patches, Fault::Invalid);
    assert_eq!(f.unserved(), 2);
    // Reads are not patches: the faults wait for the writes.
    assert_eq!(get(&server, &format!("{cms}/a")).await.code, 200);

    let r = merge(json!({"data": {"k": "1"}})).await;
    assert_status(&r, 409, "Conflict");
    assert_eq!(r.json()["details"]["name"], "a");
    assert_eq!(r.json()["details"]["kind"], "configmaps");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified"),
        "{}",
        r.body
    );
    assert_eq!(f.unserved(), 1);

    let r = merge(json!({"data": {"k": "2"}})).await;
    assert_status(&r, 422, "Invalid");
    assert_eq!(r.json()["details"]["name"], "a");
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        "metadata.resourceVersion"
    );
    assert_eq!(f.unserved(), 0);

    // Neither rejected patch was applied; the next one is.
    assert_eq!(
        get(&server, &format!("{cms}/a")).await.json()["data"],
        Value::Null
    );
    assert_eq!(merge(json!({"data": {"k": "3"}})).await.code, 200);
    assert_eq!(
        get(&server, &format!("{cms}/a")).await.json()["data"]["k"],
        "3"
    );
}
