//! Admission webhooks called by the server as kube-apiserver calls them, through kube-rs
//! against the test's HTTPS webhook (`hook`): refusals, mutations, old objects, deletes,
//! dry runs, selectors, reinvocation and warnings; failed calls in `failures`.

mod failures;
mod hook;
mod races;

use hook::Webhook;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

pub(super) async fn register(client: &kube::Client, validating: Vec<Value>, mutating: Vec<Value>) {
    let pp = PostParams::default();
    if !validating.is_empty() {
        let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "test-validating"}, "webhooks": validating}))
        .unwrap();
        Api::all(client.clone()).create(&pp, &config).await.unwrap();
    }
    if !mutating.is_empty() {
        let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "test-mutating"}, "webhooks": mutating}))
        .unwrap();
        Api::all(client.clone()).create(&pp, &config).await.unwrap();
    }
}

pub(super) fn config_map(name: &str, labels: Value, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data}))
        .unwrap()
}

#[tokio::test]
async fn a_validating_webhook_refuses_a_create_with_its_message_and_code() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    register(
        &client,
        vec![hook.entry("deny.test.kapsel.dev", "/validate", "Fail")],
        vec![],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let denied = cms
        .create(&pp, &config_map("bad", json!({"deny": "yes"}), json!({})))
        .await
        .unwrap_err();
    let status = crate::api_status(denied);
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "admission webhook \"deny.test.kapsel.dev\" denied the request: label deny is set"
    );
    cms.create(&pp, &config_map("good", json!({}), json!({})))
        .await
        .unwrap();
    let reviews = hook.reviews();
    assert_eq!(reviews.len(), 2);
    let request = &reviews[1]["request"];
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["name"], "good");
    assert_eq!(request["namespace"], "default");
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert!(request["oldObject"].is_null());
    assert!(cms.get_opt("bad").await.unwrap().is_none());
}

#[tokio::test]
async fn a_mutating_webhook_patches_what_is_stored_before_validation() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    register(
        &client,
        vec![hook.entry("deny.test.kapsel.dev", "/validate", "Fail")],
        vec![hook.entry("label.test.kapsel.dev", "/mutate", "Fail")],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(
            &PostParams::default(),
            &config_map("plain", Value::Null, json!({})),
        )
        .await
        .unwrap();
    let labels = created.metadata.labels.unwrap();
    assert_eq!(labels["admission.kapsel.dev/seen"], "yes");
    let stored = cms.get("plain").await.unwrap();
    assert_eq!(
        stored.metadata.labels.unwrap()["admission.kapsel.dev/seen"],
        "yes"
    );
    // The validating webhook saw the mutated object.
    let reviews = hook.reviews();
    let validated = reviews
        .iter()
        .find(|r| r["request"]["object"]["metadata"]["uid"].is_string())
        .unwrap();
    assert_eq!(
        validated["request"]["object"]["metadata"]["labels"]["admission.kapsel.dev/seen"],
        "yes"
    );
}

#[tokio::test]
async fn an_update_is_validated_with_the_old_object() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    cms.create(
        &pp,
        &config_map("lock", json!({}), json!({"state": "locked"})),
    )
    .await
    .unwrap();
    cms.create(
        &pp,
        &config_map("open", json!({}), json!({"state": "open"})),
    )
    .await
    .unwrap();
    register(
        &client,
        vec![hook.entry("deny.test.kapsel.dev", "/validate", "Fail")],
        vec![],
    )
    .await;
    let mut locked = cms.get("lock").await.unwrap();
    locked.data = Some([("state".to_string(), "open".to_string())].into());
    let status = crate::api_status(cms.replace("lock", &pp, &locked).await.unwrap_err());
    assert_eq!(status.code, 400);
    assert_eq!(
        status.message,
        "admission webhook \"deny.test.kapsel.dev\" denied the request: the old version is locked"
    );
    assert_eq!(
        cms.get("lock").await.unwrap().data.unwrap()["state"],
        "locked"
    );
    let mut open = cms.get("open").await.unwrap();
    open.data = Some([("state".to_string(), "locked".to_string())].into());
    cms.replace("open", &pp, &open).await.unwrap();
    let reviews = hook.reviews();
    let last = &reviews.last().unwrap()["request"];
    assert_eq!(last["operation"], "UPDATE");
    assert_eq!(last["oldObject"]["data"]["state"], "open");
    assert_eq!(last["object"]["data"]["state"], "locked");
    assert_eq!(
        cms.get("open").await.unwrap().data.unwrap()["state"],
        "locked"
    );
}
#[tokio::test]
async fn webhook_warnings_reach_the_client_as_warning_headers() {
    let (server, client) = crate::start().await;
    let hook = Webhook::start().await;
    register(
        &client,
        vec![hook.entry("warn.test.kapsel.dev", "/validate", "Fail")],
        vec![],
    )
    .await;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}});
    let answer = crate::raw(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(answer.code, 201, "{}", answer.body);
    assert_eq!(
        answer.header("warning"),
        Some("299 - \"checked by the test webhook\"")
    );
}

#[tokio::test]
async fn a_delete_is_validated_with_the_object_deleted() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    cms.create(
        &pp,
        &config_map("keep", json!({"protected": "yes"}), json!({})),
    )
    .await
    .unwrap();
    cms.create(&pp, &config_map("drop", json!({}), json!({})))
        .await
        .unwrap();
    register(
        &client,
        vec![hook.entry("deny.test.kapsel.dev", "/validate", "Fail")],
        vec![hook.entry("label.test.kapsel.dev", "/mutate", "Fail")],
    )
    .await;
    let dp = kube::api::DeleteParams::default();
    let status = crate::api_status(cms.delete("keep", &dp).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "admission webhook \"deny.test.kapsel.dev\" denied the request: protected objects stay"
    );
    assert!(cms.get_opt("keep").await.unwrap().is_some());
    cms.delete("drop", &dp).await.unwrap();
    assert!(cms.get_opt("drop").await.unwrap().is_none());
    let reviews = hook.reviews();
    let last = &reviews.last().unwrap()["request"];
    assert_eq!(last["operation"], "DELETE");
    assert!(last["object"].is_null());
    assert_eq!(last["oldObject"]["metadata"]["name"], "drop");
    assert_eq!(last["options"]["kind"], "DeleteOptions");
    // The mutating webhook was asked too, first.
    assert_eq!(reviews.len(), 4);
}

/// A collection delete admits each object's deletion as a DELETE of it (kube's per-item
/// validation): a refused one ends the request and stays.
#[tokio::test]
async fn a_collection_delete_is_validated_object_by_object() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    for (name, labels) in [
        ("a-drop", json!({"set": "x"})),
        ("b-keep", json!({"set": "x", "protected": "yes"})),
        ("c-other", json!({})),
    ] {
        cms.create(&pp, &config_map(name, labels, json!({})))
            .await
            .unwrap();
    }
    register(
        &client,
        vec![hook.entry("deny.test.kapsel.dev", "/validate", "Fail")],
        vec![],
    )
    .await;
    let dp = kube::api::DeleteParams::default();
    let lp = kube::api::ListParams::default().labels("set=x");
    let status = crate::api_status(cms.delete_collection(&dp, &lp).await.unwrap_err());
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "admission webhook \"deny.test.kapsel.dev\" denied the request: protected objects stay"
    );
    assert!(
        cms.get_opt("a-drop").await.unwrap().is_none(),
        "deleted before"
    );
    assert!(cms.get_opt("b-keep").await.unwrap().is_some(), "refused");
    assert!(
        cms.get_opt("c-other").await.unwrap().is_some(),
        "not selected"
    );
    let reviews = hook.reviews();
    let names: Vec<&Value> = reviews
        .iter()
        .map(|r| &r["request"]["oldObject"]["metadata"]["name"])
        .collect();
    assert_eq!(names, [&json!("a-drop"), &json!("b-keep")]);
    assert!(
        reviews
            .iter()
            .all(|r| r["request"]["operation"] == "DELETE")
    );
}

/// A write of a scale subresource is admitted by the webhooks of `<resource>/scale`, its
/// objects sent as `autoscaling/v1` Scales; a mutating webhook's patch changes the Scale
/// that is applied.
#[tokio::test]
async fn a_scale_is_admitted_as_an_autoscaling_scale() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let web = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let scales = |name: &str| {
        let mut entry = hook.entry(name, "/scale", "Fail");
        entry["rules"] = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"],
                                 "apiVersions": ["v1"], "resources": ["deployments/scale"]}]);
        entry
    };
    register(
        &client,
        vec![scales("bound.test.kapsel.dev")],
        vec![scales("round.test.kapsel.dev")],
    )
    .await;
    let scale_to = |replicas: i32| kube::api::Patch::Merge(json!({"spec": {"replicas": replicas}}));
    let pp = kube::api::PatchParams::default();
    let status = crate::api_status(
        deployments
            .patch_scale("web", &pp, &scale_to(9))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 422);
    // The mutating webhook (the same test webhook) is called first, and refuses first.
    assert_eq!(
        status.message,
        "admission webhook \"round.test.kapsel.dev\" denied the request: at most 5 replicas"
    );
    let scaled = deployments
        .patch_scale("web", &pp, &scale_to(3))
        .await
        .unwrap();
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(4), "rounded up");
    let stored = deployments.get("web").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(4));
    let reviews = hook.reviews();
    let request = &reviews.last().unwrap()["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(request["subResource"], "scale");
    assert_eq!(request["object"]["kind"], "Scale");
    assert_eq!(
        request["object"]["spec"]["replicas"], 4,
        "as the mutation left it"
    );
    assert_eq!(request["oldObject"]["spec"]["replicas"], 1);
}

#[tokio::test]
async fn a_webhook_with_side_effects_refuses_a_dry_run() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let mut entry = hook.entry("effects.test.kapsel.dev", "/validate", "Fail");
    entry["sideEffects"] = json!("Some");
    register(&client, vec![entry], vec![]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let status = crate::api_status(
        cms.create(&dry, &config_map("x", json!({}), json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 400);
    assert_eq!(
        status.message,
        "admission webhook \"effects.test.kapsel.dev\" does not support dry run"
    );
    // Without dryRun, the webhook is called.
    cms.create(
        &PostParams::default(),
        &config_map("x", json!({}), json!({})),
    )
    .await
    .unwrap();
    assert_eq!(hook.reviews().len(), 1);
}

#[tokio::test]
async fn webhooks_are_chosen_by_namespace_and_object_selectors() {
    use k8s_openapi::api::core::v1::Namespace;
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let pp = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, labels) in [("on", json!({"admission": "on"})), ("off", json!({}))] {
        let ns = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}));
        namespaces.create(&pp, &ns.unwrap()).await.unwrap();
    }
    let mut entry = hook.entry("deny.test.kapsel.dev", "/validate", "Fail");
    entry["namespaceSelector"] = json!({"matchLabels": {"admission": "on"}});
    entry["objectSelector"] =
        json!({"matchExpressions": [{"key": "checked", "operator": "In", "values": ["yes"]}]});
    register(&client, vec![entry], vec![]).await;
    let on: Api<ConfigMap> = Api::namespaced(client.clone(), "on");
    let off: Api<ConfigMap> = Api::namespaced(client, "off");
    let checked = json!({"deny": "yes", "checked": "yes"});
    // Not in a selected namespace, not a selected object: no call.
    off.create(&pp, &config_map("a", checked.clone(), json!({})))
        .await
        .unwrap();
    on.create(&pp, &config_map("b", json!({"deny": "yes"}), json!({})))
        .await
        .unwrap();
    assert!(hook.reviews().is_empty());
    let status = crate::api_status(
        on.create(&pp, &config_map("c", checked, json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403);
    assert_eq!(hook.reviews().len(), 1);
}

#[tokio::test]
async fn a_mutating_webhook_is_reinvoked_if_needed_after_a_later_one_changed_the_object() {
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let mut copy = hook.entry("copy.test.kapsel.dev", "/copy", "Fail");
    copy["reinvocationPolicy"] = json!("IfNeeded");
    let mut once = hook.entry("once.test.kapsel.dev", "/copy", "Fail");
    once["reinvocationPolicy"] = json!("Never");
    let label = hook.entry("label.test.kapsel.dev", "/mutate", "Fail");
    register(&client, vec![], vec![copy, once, label]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(
            &PostParams::default(),
            &config_map("r", json!({}), json!({})),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.annotations.unwrap()["copied"], "yes");
    // copy, once, label, then copy again (once is not reinvoked, label not: it was last).
    assert_eq!(hook.reviews().len(), 4);
}

#[tokio::test]
async fn a_webhook_for_one_version_is_called_for_another_unless_its_match_policy_is_exact() {
    let (server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let mut crd = crate::kopf_crd();
    let mut beta = crd["spec"]["versions"][0].clone();
    beta["name"] = json!("v1beta1");
    beta["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(beta);
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    assert_eq!(crate::post(&server, path, crd).await.code, 201);
    let rule = json!([{"operations": ["CREATE"], "apiGroups": ["kopf.dev"], "apiVersions": ["v1"], "resources": ["kopfexamples"]}]);
    let mut equivalent = hook.entry("deny.test.kapsel.dev", "/validate", "Fail");
    equivalent["rules"] = rule.clone();
    let mut exact = hook.entry("exact.test.kapsel.dev", "/validate", "Fail");
    exact["rules"] = rule;
    exact["matchPolicy"] = json!("Exact");
    register(&client, vec![equivalent, exact], vec![]).await;
    let object = json!({"apiVersion": "kopf.dev/v1beta1", "kind": "KopfExample",
        "metadata": {"name": "e", "labels": {"deny": "yes"}}, "spec": {}});
    let answer = crate::post(
        &server,
        "/apis/kopf.dev/v1beta1/namespaces/default/kopfexamples",
        object,
    )
    .await;
    assert_eq!(answer.code, 403, "{}", answer.body);
    assert!(answer.json().get("reason").is_none(), "{}", answer.body);
    assert_eq!(
        answer.json()["message"],
        "admission webhook \"deny.test.kapsel.dev\" denied the request: label deny is set"
    );
    let reviews = hook.reviews();
    assert_eq!(reviews.len(), 1, "the Exact webhook is not called");
    let request = &reviews[0]["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "kopf.dev", "version": "v1", "kind": "KopfExample"})
    );
    assert_eq!(request["requestKind"]["version"], "v1beta1");
    assert_eq!(request["resource"]["version"], "v1");
    assert_eq!(request["requestResource"]["version"], "v1beta1");
    assert_eq!(request["object"]["apiVersion"], "kopf.dev/v1");
}

#[tokio::test]
async fn webhooks_see_the_object_defaulted() {
    use k8s_openapi::api::core::v1::Service;
    let (_server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let mut entry = hook.entry("label.test.kapsel.dev", "/mutate", "Fail");
    entry["rules"][0]["resources"] = json!(["services"]);
    register(&client, vec![], vec![entry]).await;
    let service: Service = serde_json::from_value(
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .unwrap();
    Api::<Service>::namespaced(client, "default")
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let reviews = hook.reviews();
    let spec = &reviews[0]["request"]["object"]["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["ports"][0]["protocol"], "TCP");
}

#[tokio::test]
async fn a_connection_is_admitted_with_its_options_before_the_pod_is_looked_up() {
    let (server, client) = crate::start().await;
    let hook = Webhook::start().await;
    let mut entry = hook.entry("connect.test.kapsel.dev", "/connect", "Fail");
    entry["rules"] = json!([{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/exec"]}]);
    register(&client, vec![entry], vec![]).await;
    let exec = |pod: &str, command: &str| {
        format!(
            "/api/v1/namespaces/default/pods/{pod}/exec?command={command}&stdout=true&container=main"
        )
    };
    // Refused before the pod is looked for: there is none.
    let refused = crate::raw(&server, "POST", &exec("absent", "rm"), None, b"").await;
    assert_eq!(refused.code, 403, "{:?}", refused.json());
    assert_eq!(
        refused.json()["message"],
        "admission webhook \"connect.test.kapsel.dev\" denied the request: no rm through exec"
    );
    let reviews = hook.reviews();
    let request = &reviews.last().unwrap()["request"];
    assert_eq!(request["operation"], "CONNECT");
    assert_eq!(request["subResource"], "exec");
    assert_eq!(request["name"], "absent");
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "PodExecOptions"})
    );
    assert_eq!(
        request["object"],
        json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdout": true,
               "container": "main", "command": ["rm"]})
    );
    assert_eq!(request["options"], Value::Null);
    // Admitted, then looked up as without webhooks; attach matches no rule.
    let allowed = crate::raw(&server, "POST", &exec("absent", "ls"), None, b"").await;
    assert_eq!(allowed.code, 404, "{:?}", allowed.json());
    let attach = "/api/v1/namespaces/default/pods/absent/attach?stdout=true";
    assert_eq!(
        crate::raw(&server, "POST", attach, None, b"").await.code,
        404
    );
    assert_eq!(hook.reviews().len(), 2);
}
