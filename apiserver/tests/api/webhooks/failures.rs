//! Failed webhook calls: kube's `failed calling webhook` error under `failurePolicy: Fail`,
//! the write let through under `Ignore`.

use super::hook::Webhook;
use super::{config_map, register};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

/// An address nothing listens on: bound, then let go.
async fn nothing_listens() -> std::net::SocketAddr {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
}

#[tokio::test]
async fn an_unreachable_webhook_that_must_not_fail_refuses_the_write() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let gone = nothing_listens().await;
    let mut unreachable = hook.entry("gone.test.kapsel.dev", "/validate", "Fail");
    unreachable["clientConfig"]["url"] = json!(format!("https://{gone}/validate"));
    register(&client, vec![unreachable], vec![]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let status = crate::api_status(
        cms.create(&pp, &config_map("x", json!({}), json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 500);
    assert_eq!(status.reason, "InternalError");
    let expected = format!(
        "Internal error occurred: failed calling webhook \"gone.test.kapsel.dev\": failed to call webhook: Post \"https://{gone}/validate?timeout=10s\": "
    );
    assert!(status.message.starts_with(&expected), "{}", status.message);
}

#[tokio::test]
async fn an_ignored_unreachable_webhook_lets_the_write_through() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let gone = nothing_listens().await;
    let mut ignored = hook.entry("ignored.test.kapsel.dev", "/validate", "Ignore");
    ignored["clientConfig"]["url"] = json!(format!("https://{gone}/validate"));
    register(&client, vec![ignored], vec![]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(
        &PostParams::default(),
        &config_map("x", json!({}), json!({})),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("x").await.unwrap().is_some());
}

#[tokio::test]
async fn a_webhook_signed_by_another_ca_fails_its_call() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let other = Webhook::start().await;
    let mut entry = hook.entry("strange.test.kapsel.dev", "/validate", "Fail");
    entry["clientConfig"]["caBundle"] = json!(other.ca_bundle());
    register(&client, vec![entry], vec![]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let status = crate::api_status(
        cms.create(
            &PostParams::default(),
            &config_map("x", json!({}), json!({})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(status.code, 500);
    assert!(
        status
            .message
            .contains("failed calling webhook \"strange.test.kapsel.dev\""),
        "{}",
        status.message
    );
    assert!(hook.reviews().is_empty());
}

/// A create against one webhook entry that fails its call: the client's error message.
async fn failed_create(entry: serde_json::Value) -> String {
    let (_server, client) = crate::start().await;
    register(&client, vec![entry], vec![]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let status = crate::api_status(
        cms.create(
            &PostParams::default(),
            &config_map("x", json!({}), json!({})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    status.message
}

#[tokio::test]
async fn a_webhook_past_its_timeout_fails_its_call() {
    let hook = Webhook::start().await;
    let mut entry = hook.entry("slow.test.kapsel.dev", "/slow", "Fail");
    entry["timeoutSeconds"] = json!(1);
    let message = failed_create(entry).await;
    let expected = format!(
        "Internal error occurred: failed calling webhook \"slow.test.kapsel.dev\": failed to call webhook: Post \"{}/slow?timeout=1s\": context deadline exceeded",
        hook.url
    );
    assert!(message.starts_with(&expected), "{message}");
}

#[tokio::test]
async fn a_webhook_answering_another_review_fails_its_call() {
    let hook = Webhook::start().await;
    let entry = hook.entry("stranger.test.kapsel.dev", "/wrong-uid", "Fail");
    let message = failed_create(entry).await;
    let expected = "Internal error occurred: failed calling webhook \"stranger.test.kapsel.dev\": received invalid webhook response: expected response.uid=";
    assert!(message.starts_with(expected), "{message}");
    assert!(message.ends_with(", got \"not-it\""), "{message}");
    assert_eq!(hook.reviews().len(), 1);
}

#[tokio::test]
async fn without_a_ca_bundle_only_the_system_roots_are_trusted() {
    let hook = Webhook::start().await;
    let mut entry = hook.entry("untrusted.test.kapsel.dev", "/validate", "Fail");
    entry["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    let message = failed_create(entry).await;
    let expected = format!(
        "Internal error occurred: failed calling webhook \"untrusted.test.kapsel.dev\": failed to call webhook: Post \"{}/validate?timeout=10s\": tls: ",
        hook.url
    );
    assert!(message.starts_with(&expected), "{message}");
    assert!(hook.reviews().is_empty());
}
