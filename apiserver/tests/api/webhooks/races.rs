//! Writes that race a webhook call: kube-apiserver applies a patch inside its storage's
//! optimistic-concurrency loop, so a write that lands while a patch is being admitted
//! makes the patch apply again to the newer version (admitted again), not fail.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::hook::Webhook;
use super::{config_map, register};

/// Waits until the webhook has had `n` reviews.
async fn reviews_reach(hook: &Webhook, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while hook.reviews().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the webhook got {} reviews, not {n}",
            hook.reviews().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_patch_raced_during_its_webhook_call_is_applied_to_the_newer_version() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    cms.create(
        &pp,
        &config_map("raced", json!({}), json!({"a": "0", "b": "0"})),
    )
    .await
    .unwrap();
    register(
        &client,
        vec![hook.entry("hold.test.kapsel.dev", "/hold-first", "Fail")],
        vec![],
    )
    .await;
    let slow = {
        let cms = cms.clone();
        tokio::spawn(async move {
            let patch = Patch::Merge(json!({"data": {"a": "1"}}));
            cms.patch("raced", &PatchParams::default(), &patch).await
        })
    };
    // The first patch is held in its webhook call while a second one is written.
    reviews_reach(&hook, 1).await;
    let patch = Patch::Merge(json!({"data": {"b": "1"}}));
    cms.patch("raced", &PatchParams::default(), &patch)
        .await
        .unwrap();
    hook.release();
    let patched = slow
        .await
        .unwrap()
        .expect("the held patch is applied again");
    let data = patched.data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("1", "1"));
    // Held, raced, and admitted again on the newer version.
    let reviews = hook.reviews();
    assert_eq!(reviews.len(), 3);
    assert_eq!(reviews[2]["request"]["oldObject"]["data"]["b"], "1");
}

#[tokio::test]
async fn a_patch_that_names_a_resource_version_keeps_its_conflict() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let created = cms
        .create(&pp, &config_map("pinned", json!({}), json!({"a": "0"})))
        .await
        .unwrap();
    // Mutating: called before the resourceVersion is checked, so every attempt shows.
    register(
        &client,
        vec![],
        vec![hook.entry("hold.test.kapsel.dev", "/hold-first", "Fail")],
    )
    .await;
    let rv = created.metadata.resource_version.unwrap();
    let slow = {
        let cms = cms.clone();
        tokio::spawn(async move {
            let patch =
                Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "data": {"a": "1"}}));
            cms.patch("pinned", &PatchParams::default(), &patch).await
        })
    };
    reviews_reach(&hook, 1).await;
    let patch = Patch::Merge(json!({"data": {"b": "1"}}));
    cms.patch("pinned", &PatchParams::default(), &patch)
        .await
        .unwrap();
    hook.release();
    let status = crate::api_status(slow.await.unwrap().unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(cms.get("pinned").await.unwrap().data.unwrap()["a"], "0");
    // Held, raced, and applied once more to the newer version, where the patch's own
    // resourceVersion is what conflicts: then no more attempts.
    assert_eq!(hook.reviews().len(), 3);
}

#[tokio::test]
async fn an_apply_that_races_a_create_applies_to_the_created_object() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    register(
        &client,
        vec![hook.entry("hold.test.kapsel.dev", "/hold-first", "Fail")],
        vec![],
    )
    .await;
    let slow = {
        let cms = cms.clone();
        tokio::spawn(async move {
            let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "contested"}, "data": {"a": "1"}});
            let params = PatchParams::apply("applier");
            cms.patch("contested", &params, &Patch::Apply(applied))
                .await
        })
    };
    reviews_reach(&hook, 1).await;
    cms.create(
        &PostParams::default(),
        &config_map("contested", json!({}), json!({"b": "1"})),
    )
    .await
    .unwrap();
    hook.release();
    let applied = slow
        .await
        .unwrap()
        .expect("the apply updates what was created");
    let data = applied.data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("1", "1"));
    assert_eq!(hook.reviews()[2]["request"]["operation"], "UPDATE");
}

#[tokio::test]
async fn an_unconditional_update_raced_during_its_webhook_call_is_written_over_the_newer_version() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    cms.create(&pp, &config_map("replaced", json!({}), json!({"a": "0"})))
        .await
        .unwrap();
    register(
        &client,
        vec![hook.entry("hold.test.kapsel.dev", "/hold-first", "Fail")],
        vec![],
    )
    .await;
    let slow = {
        let cms = cms.clone();
        tokio::spawn(async move {
            // No resourceVersion: ConfigMaps accept unconditional updates.
            let replacement = config_map("replaced", json!({}), json!({"a": "1"}));
            cms.replace("replaced", &PostParams::default(), &replacement)
                .await
        })
    };
    reviews_reach(&hook, 1).await;
    let patch = Patch::Merge(json!({"data": {"b": "1"}}));
    cms.patch("replaced", &PatchParams::default(), &patch)
        .await
        .unwrap();
    hook.release();
    let replaced = slow
        .await
        .unwrap()
        .expect("the update is written over the newer version");
    assert_eq!(
        replaced.data.unwrap(),
        [("a".to_string(), "1".to_string())].into()
    );
    assert_eq!(hook.reviews()[2]["request"]["oldObject"]["data"]["b"], "1");
}
