//! `kapsel rbac`: the manifests an operator of some guests needs, resolved on a cluster.

use kapsel_host::RbacRequest;
use kapsel_host::testing::Cluster;
use kapsel_tests::{create_kopfexamples_crd, guest};
use serde_json::Value;

fn verbs(documents: &[Value], group: &str, resource: &str) -> Vec<String> {
    documents[1]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r["apiGroups"][0] == group && r["resources"][0] == resource)
        .map(|r| serde_json::from_value(r["verbs"].clone()).expect("verbs"))
        .unwrap_or_default()
}

fn parse(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .collect()
}

#[tokio::test]
async fn rbac_grants_what_the_guests_watch_patch_and_declare() {
    let cluster = Cluster::start().await.expect("cluster");
    let request = RbacRequest::new([guest("kube_calls")]).service_account("op", "ops");

    // Before the CRD exists, its selector resolves to nothing: said, not guessed.
    let text = kapsel_host::rbac(&request, cluster.client())
        .await
        .expect("manifests");
    assert_eq!(
        text.matches("#   kopfexamples").count(),
        1,
        "named once, however many handlers use it: {text}"
    );
    assert!(verbs(&parse(&text), "kopf.dev", "kopfexamples").is_empty());

    create_kopfexamples_crd(&cluster.client()).await;
    let text = kapsel_host::rbac(&request, cluster.client())
        .await
        .expect("manifests");
    assert!(!text.contains("Not resolved"), "{text}");
    let documents = parse(&text);
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    );
    assert_eq!(documents[0]["metadata"]["namespace"], "ops");
    assert_eq!(documents[2]["subjects"][0]["name"], "op");
    assert_eq!(
        verbs(&documents, "kopf.dev", "kopfexamples"),
        ["list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&documents, "kopf.dev", "kopfexamples/status"),
        ["patch"]
    );
    // `kapsel::permit!("v1", "configmaps", verbs = [...])`, and nothing for secrets.
    assert_eq!(
        verbs(&documents, "", "configmaps"),
        ["create", "delete", "get", "list", "patch"]
    );
    assert!(verbs(&documents, "", "secrets").is_empty());
    assert_eq!(verbs(&documents, "", "events"), ["create"]);
    cluster.shutdown().await.expect("shutdown");
}

/// A handler of every resource (`kopf.EVERYTHING`) is granted every resource of every
/// group, so that CRDs created after the operator started are served too; the manifests
/// say so at the top.
#[tokio::test]
async fn rbac_grants_every_resource_to_a_handler_of_everything() {
    let cluster = Cluster::start().await.expect("cluster");
    let request = RbacRequest::new([guest("selection")]).service_account("op", "ops");
    let text = kapsel_host::rbac(&request, cluster.client())
        .await
        .expect("manifests");
    assert!(
        text.starts_with("# Selecting every resource (EVERYTHING)"),
        "{text}"
    );
    assert!(
        text.contains("#   handler \"everything_fn\" of guest \"selection\""),
        "{text}"
    );
    let documents = parse(&text);
    assert_eq!(verbs(&documents, "*", "*"), ["list", "patch", "watch"]);
    assert_eq!(verbs(&documents, "*", "*/status"), ["patch"]);
    cluster.shutdown().await.expect("shutdown");
}

/// A handler whose guest chooses its resources (Kopf's callable selector) is granted what
/// the guest chooses of what the cluster serves now, asked as the operator asks it.
#[tokio::test]
async fn rbac_grants_what_a_guest_chooses() {
    let cluster = Cluster::start().await.expect("cluster");
    create_kopfexamples_crd(&cluster.client()).await;
    let request = RbacRequest::new([guest("choosing")]).service_account("op", "ops");
    let text = kapsel_host::rbac(&request, cluster.client())
        .await
        .expect("manifests");
    assert!(
        text.contains("#   handler \"chosen_fn\" of guest \"choosing\""),
        "{text}"
    );
    let documents = parse(&text);
    assert_eq!(
        verbs(&documents, "", "configmaps"),
        ["list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&documents, "kopf.dev", "kopfexamples"),
        ["list", "patch", "watch"]
    );
    assert!(verbs(&documents, "", "pods").is_empty(), "{text}");
    assert!(verbs(&documents, "*", "*").is_empty(), "{text}");
    cluster.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn rbac_refuses_what_is_not_a_guest() {
    let cluster = Cluster::start().await.expect("cluster");
    let request = RbacRequest::new(["/nonexistent/guest.wasm"]);
    let error = kapsel_host::rbac(&request, cluster.client())
        .await
        .expect_err("no guest");
    assert!(matches!(error, kapsel_host::Error::NoGuests(_)), "{error}");
    assert!(
        error.to_string().contains("/nonexistent/guest.wasm"),
        "{error}"
    );
    cluster.shutdown().await.expect("shutdown");
}
