//! The RBAC side of deploying: an overlay's operator, restricted to a namespace, runs
//! on the Role `kapsel rbac` gave it there, and posts its Events about itself on its pod;
//! the committed manifests are what `make
//! deploy-manifests` writes; `kapsel rbac` resolves offline (`--crd`) as it does on a
//! cluster, and says what is wrong with a CRD file.

use std::process::Output;

use kapsel_apiserver::{ApiServer, Config};
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn an_overlay_of_ones_own_guests_runs_on_the_role_of_its_namespace() {
    let cluster = Cluster::start("overlay").await;
    let staged = stage_deploy(&cluster.scratch.0);
    let overlay = staged.join("overlays/example");
    cluster
        .kubectl_ok(&[
            "apply",
            "--server-side",
            "-k",
            &overlay.display().to_string(),
        ])
        .await;

    assert!(
        cluster
            .get("v1", "namespaces", None, "team-a")
            .await
            .is_some()
    );
    let configmaps = cluster.list("v1", "configmaps", Some("kapsel")).await;
    let names: Vec<&str> = configmaps
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("guest-"))
        .collect();
    assert_eq!(names, ["guest-children"], "its guests only");
    let rbac = "rbac.authorization.k8s.io/v1";
    let role = cluster
        .get(rbac, "roles", Some("team-a"), "kapsel")
        .await
        .expect("a Role in the namespace it serves");
    let resources = |role: &serde_json::Value| -> Vec<String> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["resources"][0].as_str().unwrap().to_owned())
            .collect()
    };
    // Its Events, its guest's permits, what its handlers watch and patch.
    assert_eq!(
        resources(&role),
        [
            "events",
            "pods",
            "services",
            "deployments",
            "kopfexamples",
            "kopfexamples/status"
        ]
    );
    let binding = cluster
        .get(rbac, "rolebindings", Some("team-a"), "kapsel")
        .await
        .unwrap();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kapsel", "namespace": "kapsel"}])
    );
    // Cluster-wide, only what cannot be namespaced; and no peering (--standalone).
    let cluster_role = cluster
        .get(rbac, "clusterroles", None, "kapsel")
        .await
        .unwrap();
    assert_eq!(resources(&cluster_role), ["customresourcedefinitions"]);
    let deployment = cluster
        .get("apps/v1", "deployments", Some("kapsel"), "kapsel")
        .await
        .unwrap();
    let args = strings_of(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert_eq!(
        args,
        [
            "run",
            "--namespace",
            "team-a",
            "--standalone",
            "--liveness",
            "http://0.0.0.0:8080/healthz",
            "--cache-dir",
            "/var/cache/kapsel",
            "/guests"
        ]
    );

    cluster
        .kubectl_ok(&[
            "apply",
            "-f",
            &kapsel_tests::workspace()
                .join("examples/manifests/kopfexamples-crd.yaml")
                .display()
                .to_string(),
        ])
        .await;
    let mut pod = Pod::start(&cluster, "kapsel", "kapsel").await;
    pod.wait_for_log("The operator is running").await;
    let object = kapsel_tests::workspace().join("examples/manifests/kopfexample-obj.yaml");
    cluster
        .kubectl_ok(&["apply", "-n", "team-a", "-f", &object.display().to_string()])
        .await;
    let kex = "kopf-example-1";
    eventually("children's Service in team-a", || {
        cluster.get("v1", "services", Some("team-a"), kex)
    })
    .await;
    eventually("children's result", || async {
        let object = cluster
            .get("kopf.dev/v1", "kopfexamples", Some("team-a"), kex)
            .await?;
        object.pointer("/status/web/service").cloned()
    })
    .await;

    // A broken guest added to its folder: the reload refuses it, and the Warning Event
    // is about the operator's pod, in its namespace (POD_NAME and POD_NAMESPACE from the
    // downward API), though it runs standalone, with the Role `kapsel rbac` gave it there.
    std::fs::write(pod.volume("guests").join("broken.wasm"), b"not a component").unwrap();
    let event = eventually("the GuestRefused Event", || async {
        let events = cluster.list("v1", "events", Some("kapsel")).await;
        events.into_iter().find(|e| e["reason"] == "GuestRefused")
    })
    .await;
    let involved = &event["involvedObject"];
    assert_eq!(
        (&involved["kind"], &involved["name"], &involved["namespace"]),
        (&json!("Pod"), &json!(pod.name), &json!("kapsel")),
        "{event}"
    );
    assert!(
        event["message"].as_str().unwrap().contains("broken.wasm"),
        "{event}"
    );
    let log = pod.stop().await;
    assert!(!mentions_a_refusal(&log), "{log}");
}

#[test]
fn the_generated_manifests_are_what_make_deploy_manifests_writes() {
    // The examples alone, as `make deploy-manifests` builds them (the test guests'
    // folder holds guests of the same names).
    let guests = kapsel_tests::deploy_guest("minimal");
    let output =
        std::process::Command::new(kapsel_tests::workspace().join("scripts/deploy-manifests"))
            .arg("--check")
            .env("KAPSEL", env!("CARGO_BIN_EXE_kapsel"))
            .env("GUEST_DIR", guests.parent().unwrap())
            .output()
            .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `kapsel rbac ARGS...` with this environment; its output.
async fn kapsel_rbac(args: &[&str], env: &[(&str, &str)]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_kapsel"))
        .arg("rbac")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn rbac_resolves_offline_as_on_a_cluster_and_names_a_bad_crd_file() {
    let scratch = Scratch::new("rbac-offline");
    let crd = kapsel_tests::workspace().join("examples/manifests/kopfexamples-crd.yaml");
    let crd = crd.display().to_string();
    let children = kapsel_tests::guest("children").display().to_string();
    let typed = kapsel_tests::guest("typed").display().to_string();
    let flags = [
        "-n",
        "team-a",
        "--operator-namespace",
        "ops",
        &children,
        &typed,
    ];

    // On a cluster that has the CRD (online, as before).
    let server = ApiServer::start(Config::default()).await.unwrap();
    kapsel_tests::create_kopfexamples_crd(
        &kapsel_host::testing::client_for(&server.url()).unwrap(),
    )
    .await;
    let kubeconfig = scratch.0.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig()).unwrap();
    let kubeconfig = kubeconfig.display().to_string();
    let online = kapsel_rbac(&flags, &[("KUBECONFIG", &kubeconfig)]).await;
    assert!(
        online.status.success(),
        "{}",
        String::from_utf8_lossy(&online.stderr)
    );

    // Offline, from the CRD file: the same manifests, without any cluster.
    let mut offline_flags = vec!["--crd", &crd];
    offline_flags.extend(flags);
    let nowhere = [("KUBECONFIG", "/nonexistent/kubeconfig")];
    let offline = kapsel_rbac(&offline_flags, &nowhere).await;
    assert!(
        offline.status.success(),
        "{}",
        String::from_utf8_lossy(&offline.stderr)
    );
    let text = String::from_utf8(offline.stdout).unwrap();
    assert_eq!(text, String::from_utf8(online.stdout).unwrap());
    assert!(
        text.contains("kind: Role\n") && text.contains("namespace: team-a"),
        "{text}"
    );
    assert!(!text.contains("Not resolved"), "{text}");

    // Offline without the CRD: its selector is named, not guessed.
    let mut without = vec!["--offline"];
    without.extend(flags);
    let output = kapsel_rbac(&without, &nowhere).await;
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("#   kopfexamples"), "{text}");

    // Bad CRD files are input errors (exit 2), naming the file.
    let object = kapsel_tests::workspace().join("examples/manifests/kopfexample-obj.yaml");
    let object = object.display().to_string();
    for (file, expected) in [
        (
            "/nonexistent/crds.yaml",
            "cannot read the CRD file /nonexistent/crds.yaml",
        ),
        (object.as_str(), "holds no CustomResourceDefinition"),
    ] {
        let output = kapsel_rbac(&["--crd", file, &children], &nowhere).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(expected) && stderr.contains(file),
            "{stderr}"
        );
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rbac_takes_the_admission_flags_the_operator_runs_with() {
    let crd = kapsel_tests::workspace().join("examples/manifests/kopfexamples-crd.yaml");
    let guest = kapsel_tests::deploy_guest("admission");
    let (crd, guest) = (crd.display().to_string(), guest.display().to_string());
    let args = [
        "--crd",
        &crd,
        "--operator-namespace",
        "ops",
        "--admission-managed",
        "kex.example.com",
        "--admission-secret",
        "certs/webhook-tls",
        &guest,
    ];
    let output = kapsel_rbac(&args, &[]).await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let rule = |kind: &str, resource: &str, name: Option<&str>| {
        documents
            .iter()
            .filter(|d| d["kind"] == kind)
            .flat_map(|d| d["rules"].as_array().unwrap().iter())
            .find(|r| r["resources"][0] == resource && r["resourceNames"][0].as_str() == name)
            .map(|r| strings_of(&r["verbs"]))
    };
    let patched = rule(
        "ClusterRole",
        "validatingwebhookconfigurations",
        Some("kex.example.com"),
    );
    assert_eq!(patched, Some(vec!["patch".to_owned()]), "{text}");
    let kept = rule("Role", "secrets", Some("webhook-tls"));
    assert_eq!(
        kept,
        Some(vec!["get".to_owned(), "update".to_owned()]),
        "{text}"
    );
    let role = documents.iter().find(|d| d["kind"] == "Role").unwrap();
    assert_eq!(role["metadata"]["namespace"], "certs", "{text}");
    // A Secret's reference is NAMESPACE/NAME, as for kapsel run.
    let wrong = kapsel_rbac(&["--offline", "--admission-secret", "tls", &guest], &[]).await;
    assert_eq!(wrong.status.code(), Some(2));
    let error = String::from_utf8_lossy(&wrong.stderr);
    assert!(error.contains("\"tls\" is not NAMESPACE/NAME"), "{error}");
}
