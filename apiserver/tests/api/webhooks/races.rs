//! Writes that race a webhook call: kube-apiserver applies a patch inside its storage's
//! optimistic-concurrency loop, so a write that lands while a patch is being admitted
//! makes the patch apply again to the newer version (admitted again), not fail.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kapsel_apiserver::ApiServer;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::hook::Webhook;
use super::{config_map, register};

/// A server whose ConfigMaps are admitted by the test webhook's `/hold-first` (a mutating
/// webhook when `mutating`, else a validating one), with the ConfigMap `existing` if any.
async fn held(
    mutating: bool,
    existing: Option<(&str, Value)>,
) -> (ApiServer, Api<ConfigMap>, Webhook) {
    let (server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    if let Some((name, data)) = existing {
        cms.create(&PostParams::default(), &config_map(name, json!({}), data))
            .await
            .unwrap();
    }
    let entry = vec![hook.entry("hold.test.kapsel.dev", "/hold-first", "Fail")];
    let (validating, mutating) = if mutating {
        (vec![], entry)
    } else {
        (entry, vec![])
    };
    register(&client, validating, mutating).await;
    (server, cms, hook)
}

/// Runs `slow` until it is held in its first webhook call, writes `racing` meanwhile,
/// then lets the held call answer: what `slow` ends with.
async fn raced<T: Send + 'static>(
    hook: &Webhook,
    slow: impl Future<Output = T> + Send + 'static,
    racing: impl Future<Output = ()>,
) -> T {
    let slow = tokio::spawn(slow);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while hook.reviews().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the webhook was never called"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    racing.await;
    hook.release();
    slow.await.unwrap()
}

/// Sets `data.b` of ConfigMap `name` to "1" (the racing write).
async fn set_b(cms: &Api<ConfigMap>, name: &str) {
    let patch = Patch::Merge(json!({"data": {"b": "1"}}));
    cms.patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_patch_raced_during_its_webhook_call_is_applied_to_the_newer_version() {
    let (_server, cms, hook) = held(false, Some(("raced", json!({"a": "0", "b": "0"})))).await;
    let slow = {
        let cms = cms.clone();
        async move {
            let patch = Patch::Merge(json!({"data": {"a": "1"}}));
            cms.patch("raced", &PatchParams::default(), &patch).await
        }
    };
    let patched = raced(&hook, slow, set_b(&cms, "raced"))
        .await
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
    // Mutating: called before the resourceVersion is checked, so every attempt shows.
    let (_server, cms, hook) = held(true, Some(("pinned", json!({"a": "0"})))).await;
    let rv = cms.get("pinned").await.unwrap().metadata.resource_version;
    let slow = {
        let cms = cms.clone();
        async move {
            let patch =
                Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "data": {"a": "1"}}));
            cms.patch("pinned", &PatchParams::default(), &patch).await
        }
    };
    let status = crate::api_status(raced(&hook, slow, set_b(&cms, "pinned")).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(cms.get("pinned").await.unwrap().data.unwrap()["a"], "0");
    // Held, raced, and applied once more to the newer version, where the patch's own
    // resourceVersion is what conflicts: then no more attempts.
    assert_eq!(hook.reviews().len(), 3);
}

#[tokio::test]
async fn an_apply_that_races_a_create_applies_to_the_created_object() {
    let (_server, cms, hook) = held(false, None).await;
    let slow = {
        let cms = cms.clone();
        async move {
            let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "contested"}, "data": {"a": "1"}});
            let params = PatchParams::apply("applier");
            cms.patch("contested", &params, &Patch::Apply(applied))
                .await
        }
    };
    let create = async {
        let created = config_map("contested", json!({}), json!({"b": "1"}));
        cms.create(&PostParams::default(), &created).await.unwrap();
    };
    let applied = raced(&hook, slow, create)
        .await
        .expect("the apply updates what was created");
    let data = applied.data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("1", "1"));
    assert_eq!(hook.reviews()[2]["request"]["operation"], "UPDATE");
}

#[tokio::test]
async fn an_unconditional_update_raced_during_its_webhook_call_is_written_over_the_newer_version() {
    let (_server, cms, hook) = held(false, Some(("replaced", json!({"a": "0"})))).await;
    let slow = {
        let cms = cms.clone();
        async move {
            // No resourceVersion: ConfigMaps accept unconditional updates.
            let replacement = config_map("replaced", json!({}), json!({"a": "1"}));
            cms.replace("replaced", &PostParams::default(), &replacement)
                .await
        }
    };
    let replaced = raced(&hook, slow, set_b(&cms, "replaced"))
        .await
        .expect("the update is written over the newer version");
    assert_eq!(
        replaced.data.unwrap(),
        [("a".to_string(), "1".to_string())].into()
    );
    assert_eq!(hook.reviews()[2]["request"]["oldObject"]["data"]["b"], "1");
}
