//! The README's recipe for another project's tests, step by step: a server per test,
//! a client from its kubeconfig, CRDs loaded from YAML, objects of them, and a fresh
//! cluster for the next test.

use super::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;

const CRD_YAML: &str = include_str!("../../../examples/manifests/kopfexamples-crd.yaml");

/// Applies every document of a YAML stream (server-side apply, as `kubectl apply
/// --server-side` does), whatever its kinds.
async fn apply_yaml(client: &Client, yaml: &str) -> Vec<String> {
    let mut applied = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let obj: DynamicObject = serde::Deserialize::deserialize(doc).expect("an object");
        let types = obj.types.clone().expect("apiVersion and kind");
        let (group, version) = match types.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let discovered = kube::discovery::pinned_kind(
            client,
            &kube::core::GroupVersionKind::gvk(&group, &version, &types.kind),
        )
        .await
        .expect("a served kind");
        let (ar, caps): (ApiResource, _) = discovered;
        let name = obj.metadata.name.clone().expect("a name");
        let api: Api<DynamicObject> = match (&obj.metadata.namespace, caps.scope) {
            (Some(ns), kube::discovery::Scope::Namespaced) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            (None, kube::discovery::Scope::Namespaced) => {
                Api::default_namespaced_with(client.clone(), &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        api.patch(&name, &PatchParams::apply("my-tests"), &Patch::Apply(&obj))
            .await
            .expect("applied");
        applied.push(name);
    }
    applied
}

#[tokio::test]
async fn another_projects_tests_start_load_crds_and_reset() {
    for round in 0..2 {
        let started = std::time::Instant::now();
        let server = ApiServer::start(Config::default()).await.expect("a server");
        // The kubeconfig is also what `kapsel dev-cluster --kubeconfig` writes.
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = Client::try_from(config).unwrap();
        eprintln!(
            "round {round}: a server and a client in {:?}",
            started.elapsed()
        );
        assert_eq!(
            apply_yaml(&client, CRD_YAML).await,
            ["kopfexamples.kopf.dev"]
        );
        let ar = ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample"),
            "kopfexamples",
        );
        let kex: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &ar);
        // Each round's cluster is new: the object of the first round is not there.
        assert!(kex.get_opt("kex").await.unwrap().is_none(), "round {round}");
        let mut obj = DynamicObject::new("kex", &ar);
        obj.data = serde_json::json!({"spec": {"duration": "1m"}});
        kex.create(&PostParams::default(), &obj).await.unwrap();
        server.shutdown().await.unwrap();
    }
}
