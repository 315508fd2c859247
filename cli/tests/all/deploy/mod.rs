//! Deploying, on an API server that enforces RBAC: `kubectl apply --server-side -k` of
//! `deploy/` (the example operator) and of `deploy/overlays/example/` is accepted and
//! makes the objects listed; the host run as the Deployment's container says (its args,
//! its env, its ConfigMaps laid out as the kubelet does, its ServiceAccount's token)
//! handles every example's objects with the RBAC `kapsel rbac` wrote, without a 403;
//! without one of its rules, the first call that rule covered fails with a 403 naming
//! the permission. The generated files are fresh, and `kapsel rbac` resolves offline as
//! it does on a cluster. `deploy/admission/` serves admission webhooks behind its Service
//! (`admission`).
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

mod admission;
mod rbac;
mod support;

use serde_json::{Value, json};
use support::*;

/// The examples the example operator runs, by guest name.
const EXAMPLES: [&str; 6] = [
    "minimal",
    "lifecycle",
    "seed",
    "indexes",
    "children",
    "typed",
];

#[tokio::test(flavor = "multi_thread")]
async fn the_example_operator_runs_with_the_rbac_it_was_given_and_no_more() {
    let cluster = Cluster::start("examples").await;
    let staged = stage_deploy(&cluster.scratch.0);
    let applied = cluster
        .kubectl_ok(&[
            "apply",
            "--server-side",
            "-k",
            &staged.display().to_string(),
        ])
        .await;

    // The objects, as listed.
    assert!(
        cluster
            .get("v1", "namespaces", None, "kapsel")
            .await
            .is_some()
    );
    // The peering object `default`, applied once its CRD exists (README, Deploying).
    let peering_default = kapsel_tests::workspace().join("deploy/operator/peering-default.yaml");
    cluster
        .kubectl_ok(&["apply", "-f", &peering_default.display().to_string()])
        .await;
    for crd in ["clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"] {
        let found = cluster
            .get(
                "apiextensions.k8s.io/v1",
                "customresourcedefinitions",
                None,
                crd,
            )
            .await;
        assert!(found.is_some(), "{crd}: {applied}");
    }
    let peering = "clusterkopfpeerings";
    assert!(
        cluster
            .get("kopf.dev/v1", peering, None, "default")
            .await
            .is_some()
    );
    let account = cluster
        .get("v1", "serviceaccounts", Some("kapsel"), "kapsel")
        .await;
    assert!(account.is_some(), "{applied}");
    let rbac = "rbac.authorization.k8s.io/v1";
    assert!(
        cluster
            .get(rbac, "clusterroles", None, "kapsel")
            .await
            .is_some()
    );
    let binding = cluster
        .get(rbac, "clusterrolebindings", None, "kapsel")
        .await
        .unwrap();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kapsel", "namespace": "kapsel"}])
    );
    assert_eq!(binding["roleRef"]["name"], "kapsel");
    for name in EXAMPLES {
        let configmap = cluster
            .get("v1", "configmaps", Some("kapsel"), &format!("guest-{name}"))
            .await
            .unwrap_or_else(|| panic!("guest-{name}: {applied}"));
        let data = configmap["binaryData"].as_object().unwrap();
        let keys: Vec<&String> = data.keys().collect();
        assert_eq!(keys, [&format!("{name}.wasm")]);
        let stored = base64_decode(data[&format!("{name}.wasm")].as_str().unwrap());
        assert!(
            stored == std::fs::read(kapsel_tests::deploy_guest(name)).unwrap(),
            "{name}.wasm is stored as built"
        );
    }
    let deployment = cluster
        .get("apps/v1", "deployments", Some("kapsel"), "kapsel")
        .await
        .unwrap();
    check_deployment(&deployment, &EXAMPLES.map(|n| format!("guest-{n}")));

    // The example operator, as its pod runs it.
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
    let (code, body) = http_get(&format!("{}{}", pod.endpoint, pod.probe_path)).await;
    assert_eq!(code, 200, "{body}");
    let (code, metrics) = http_get(&format!("{}/metrics", pod.endpoint)).await;
    assert_eq!(code, 200);
    assert!(metrics.contains("kapsel_"), "{metrics}");

    let object = kapsel_tests::workspace().join("examples/manifests/kopfexample-obj.yaml");
    cluster
        .kubectl_ok(&[
            "apply",
            "-n",
            "default",
            "-f",
            &object.display().to_string(),
        ])
        .await;
    let kex = "kopf-example-1";
    let status = |path: &'static str| {
        let cluster = &cluster;
        async move {
            let object = cluster
                .get("kopf.dev/v1", "kopfexamples", Some("default"), kex)
                .await?;
            let value = object.pointer(path)?.clone();
            (!value.is_null()).then_some(value)
        }
    };
    // minimal
    let hello = eventually("minimal's create_fn", || {
        status("/status/create_fn/message")
    })
    .await;
    assert_eq!(hello, "hello world");
    // lifecycle: a result, retries, an Event, and the finalizer its delete handler needs.
    eventually("lifecycle's created", || status("/status/created/message")).await;
    let attempts = eventually("lifecycle's flaky", || status("/status/flaky/attempts")).await;
    assert_eq!(attempts, 3);
    eventually("lifecycle's Greeting Event", || async {
        let events = cluster.list("v1", "events", Some("default")).await;
        events.into_iter().find(|e| e["reason"] == "Greeting")
    })
    .await;
    // children: a Pod, a Deployment and a Service, created by the guest's own calls.
    eventually("children's pod", || status("/status/child_pod/children/0")).await;
    eventually("children's web", || status("/status/web/service")).await;
    for plural in ["deployments", "services"] {
        let version = if plural == "deployments" {
            "apps/v1"
        } else {
            "v1"
        };
        assert!(
            cluster
                .get(version, plural, Some("default"), kex)
                .await
                .is_some(),
            "children's {plural}"
        );
    }
    // typed: a Service for a Deployment that asks for one.
    apply_yaml(&cluster, "exposed", EXPOSED).await;
    eventually("typed's Service", || {
        cluster.get("v1", "services", Some("default"), "exposed")
    })
    .await;
    // seed and indexes: what their event handlers log.
    pod.wait_for_log(&format!("event ADDED for KopfExample default/{kex}"))
        .await;
    pod.wait_for_log("event ADDED for Pod default/").await;
    pod.wait_for_log("pods in default: [").await;
    // lifecycle again: an update, then the deletion its finalizer held.
    cluster
        .kubectl_ok(&[
            "patch",
            "kex",
            kex,
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec": {"field": "changed"}}"#,
        ])
        .await;
    eventually("lifecycle's updated", || status("/status/updated/changes")).await;
    cluster
        .kubectl_ok(&["delete", "kex", kex, "-n", "default", "--wait=false"])
        .await;
    eventually("the finalizer released", || async {
        let gone = cluster
            .get("kopf.dev/v1", "kopfexamples", Some("default"), kex)
            .await
            .is_none();
        gone.then_some(())
    })
    .await;
    // Peering: the pod's record, under its name, in ClusterKopfPeering `default`.
    eventually("the peer record", || async {
        let peering = cluster.get("kopf.dev/v1", peering, None, "default").await?;
        peering["status"].get(&pod.name).cloned()
    })
    .await;
    let log = pod.log();
    assert!(!mentions_a_refusal(&log), "{log}");

    // Without one rule (status patches of kopfexamples), the first call it covered
    // fails, and the log names the permission that is missing.
    let mut role = cluster
        .get(rbac, "clusterroles", None, "kapsel")
        .await
        .unwrap();
    let rules = role["rules"].as_array_mut().unwrap();
    let before = rules.len();
    rules.retain(|r| r["resources"][0] != "kopfexamples/status");
    assert_eq!(rules.len(), before - 1, "the rule was there");
    let file = cluster.scratch.0.join("role.json");
    std::fs::write(&file, role.to_string()).unwrap();
    cluster
        .kubectl_ok(&["replace", "-f", &file.display().to_string()])
        .await;
    apply_yaml(&cluster, "second", SECOND).await;
    let line = pod
        .wait_for_log(r#"cannot patch resource "kopfexamples/status" in API group "kopf.dev""#)
        .await;
    assert!(
        line.contains("kopf-example-2") && line.contains("403"),
        "{line}"
    );
    pod.stop().await;

    // Uninstalled as the README says: kubectl deletes the namespace, then what is in it,
    // which a real cluster's namespace controller leaves in place for a while.
    cluster
        .kubectl_ok(&["delete", "-k", &staged.display().to_string()])
        .await;
    assert!(
        cluster
            .get("v1", "namespaces", None, "kapsel")
            .await
            .is_none()
    );
}

/// A Deployment that asks `typed` for a Service.
const EXPOSED: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: exposed
  namespace: default
  labels: {example.com/expose: "yes"}
spec:
  selector: {matchLabels: {app: exposed}}
  template:
    metadata: {labels: {app: exposed}}
    spec:
      containers:
        - {name: web, image: nginx, ports: [{containerPort: 80}]}
"#;

/// Another kopfexample.
const SECOND: &str = r#"
apiVersion: kopf.dev/v1
kind: KopfExample
metadata: {name: kopf-example-2, namespace: default}
spec: {field: value}
"#;

/// `kubectl apply` of a manifest, as the admin.
async fn apply_yaml(cluster: &Cluster, name: &str, manifest: &str) {
    let file = cluster.scratch.0.join(format!("{name}.yaml"));
    std::fs::write(&file, manifest).unwrap();
    cluster
        .kubectl_ok(&["apply", "-f", &file.display().to_string()])
        .await;
}

/// The Deployment is what issue 13 asks of it, and consistent with itself.
fn check_deployment(deployment: &Value, guest_configmaps: &[String]) {
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["strategy"]["type"], "Recreate");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "kapsel");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    for kind in ["requests", "limits"] {
        for what in ["cpu", "memory"] {
            assert!(
                container["resources"][kind][what].is_string(),
                "resources.{kind}.{what}"
            );
        }
    }
    assert_eq!(container["env"][0]["name"], "POD_ID");
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    let args = strings_of(&container["args"]);
    assert_eq!(args.first().map(String::as_str), Some("run"));
    let liveness = args.iter().position(|a| a == "--liveness").unwrap();
    assert_eq!(args[liveness + 1], "http://0.0.0.0:8080/healthz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    // The guests: every ConfigMap in one folder, the folder the host is given.
    let volumes = pod["volumes"].as_array().unwrap();
    let guests = volumes.iter().find(|v| v["name"] == "guests").unwrap();
    let sources: Vec<String> = guests["projected"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["configMap"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sources, guest_configmaps);
    let mounts = &container["volumeMounts"];
    let mount = |name: &str| {
        mounts
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no mount of {name}"))
            .clone()
    };
    assert_eq!(
        args.last(),
        mount("guests")["mountPath"]
            .as_str()
            .map(str::to_owned)
            .as_ref()
    );
    // The compiled-guest cache: a writable emptyDir (the root filesystem is read-only).
    assert!(
        volumes
            .iter()
            .any(|v| v["name"] == "cache" && v["emptyDir"].is_object())
    );
    assert!(mount("cache")["readOnly"] != true);
    let cache_dir = args.iter().position(|a| a == "--cache-dir").unwrap();
    assert_eq!(
        Some(&args[cache_dir + 1]),
        mount("cache")["mountPath"]
            .as_str()
            .map(str::to_owned)
            .as_ref()
    );
}
