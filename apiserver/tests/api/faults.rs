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
