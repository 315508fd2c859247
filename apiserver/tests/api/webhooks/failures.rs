//! Failed webhook calls: kube's `failed calling webhook` error under `failurePolicy: Fail`,
//! the write let through under `Ignore`; a webhook by Service and the reasons it cannot be
//! reached.

use super::hook::Webhook;
use super::{config_map, register};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Service};
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

/// A webhook by `clientConfig.service` is called at one of the Service's endpoints (kube's
/// endpoint routing), trusting a certificate for `<name>.<namespace>.svc`; without an
/// endpoint, the call fails with kube's reason.
#[tokio::test]
async fn a_webhook_by_service_is_called_at_an_endpoint_of_the_service() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start_for("hooks.default.svc").await;
    let port: u16 = hook.url.rsplit(':').next().unwrap().parse().unwrap();
    let mut entry = hook.entry("by-service.test.kapsel.dev", "/validate", "Fail");
    entry["clientConfig"] = json!({
        "service": {"namespace": "default", "name": "hooks", "port": 443, "path": "/validate"},
        "caBundle": hook.ca_bundle(),
    });
    register(&client, vec![entry], vec![]).await;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let status = crate::api_status(
        cms.create(&pp, &config_map("no-service", json!({}), json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 500);
    assert!(
        status
            .message
            .ends_with("failed to call webhook: services \"hooks\" not found"),
        "{status:?}"
    );
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service = serde_json::from_value(json!({
        "metadata": {"name": "hooks"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]},
    }))
    .unwrap();
    services.create(&pp, &service).await.unwrap();
    let status = crate::api_status(
        cms.create(&pp, &config_map("no-endpoint", json!({}), json!({})))
            .await
            .unwrap_err(),
    );
    assert!(
        status
            .message
            .ends_with("failed to call webhook: no endpoints available for service \"hooks\""),
        "{status:?}"
    );
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let endpoint = serde_json::from_value(json!({
        "metadata": {"name": "hooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}],
    }))
    .unwrap();
    endpoints.create(&pp, &endpoint).await.unwrap();
    let status = crate::api_status(
        cms.create(&pp, &config_map("bad", json!({"deny": "yes"}), json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert_eq!(
        status.message,
        "admission webhook \"by-service.test.kapsel.dev\" denied the request: label deny is set"
    );
    cms.create(&pp, &config_map("good", json!({}), json!({})))
        .await
        .unwrap();
    assert_eq!(hook.reviews().len(), 2, "called at the endpoint");
}

/// A webhook that answers an error with a Status says why through it; one without says
/// kube's "did not return more information".
#[tokio::test]
async fn a_failed_webhooks_status_says_why() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    register(
        &client,
        vec![
            hook.entry("broken.test.kapsel.dev", "/broken", "Fail"),
            hook.entry("mute.test.kapsel.dev", "/mute", "Ignore"),
        ],
        vec![],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let status = crate::api_status(
        cms.create(
            &PostParams::default(),
            &config_map("any", json!({}), json!({})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(status.code, 500);
    assert_eq!(
        status.message,
        "Internal error occurred: failed calling webhook \"broken.test.kapsel.dev\": \
         failed to call webhook: the policy store is down"
    );
}

/// A DELETE whose preconditions fail is refused with kube's 409 after the mutating
/// webhooks and before the validating ones, as kube's registry checks them.
#[tokio::test]
async fn a_delete_whose_preconditions_fail_reaches_no_validating_webhook() {
    let (_server, client) = crate::start().await;
    let (mutating, validating) = (Webhook::start().await, Webhook::start().await);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &config_map("kept", json!({}), json!({})),
    )
    .await
    .unwrap();
    register(
        &client,
        vec![validating.entry("check.test.kapsel.dev", "/validate", "Fail")],
        vec![mutating.entry("label.test.kapsel.dev", "/mutate", "Fail")],
    )
    .await;
    let wrong = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("not-its-uid".to_owned()),
            resource_version: None,
        }),
        ..kube::api::DeleteParams::default()
    };
    let status = crate::api_status(cms.delete("kept", &wrong).await.unwrap_err());
    assert_eq!(status.code, 409, "{status:?}");
    assert!(
        status
            .message
            .contains("the UID in the precondition (not-its-uid) does not match"),
        "{status:?}"
    );
    assert_eq!(mutating.reviews().len(), 1, "the mutating webhook first");
    assert!(
        validating.reviews().is_empty(),
        "no validating webhook after"
    );
    cms.delete("kept", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(validating.reviews().len(), 1);
}
