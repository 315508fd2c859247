//! kubectl on built-in kinds: run, client- and server-side apply, create from files, patches, explain, get all.

use crate::support::*;

const DEPLOYMENT_V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.26
        ports:
        - containerPort: 80
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
      - name: sidecar
        image: busybox
        command: [sleep, "3600"]
"#;

const DEPLOYMENT_V2: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        ports:
        - containerPort: 80
        env:
        - {name: A, value: "1"}
        - {name: C, value: "3"}
      - name: sidecar
        image: busybox
        command: [sleep, "3600"]
"#;

/// Built-ins: kubectl run, apply (create, then a strategic-merge update),
/// server-side apply, create, RBAC, get all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_builtins() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "builtins");

    // kubectl run creates a pod.
    let out = k.ok(&["run", "nginx", "--image=nginx"]).await;
    assert!(out.contains("pod/nginx created"), "{out}");
    let out = k
        .ok(&[
            "get",
            "pod",
            "nginx",
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(out, "nginx");
    let out = k.ok(&["get", "po"]).await;
    assert!(out.contains("nginx"), "{out}");

    // Client-side apply of a Deployment, then an update: kubectl computes a
    // three-way strategic merge patch from the OpenAPI v3 schemas.
    let out = k.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT_V1).await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    // Someone else's change, which the next apply must keep.
    k.ok(&["annotate", "deployment", "web", "owner=someone-else"])
        .await;
    let out = k.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT_V2).await;
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let d = k.json(&["get", "deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 3, "{d}");
    assert_eq!(d["metadata"]["annotations"]["owner"], "someone-else", "{d}");
    assert!(
        d["metadata"]["labels"].get("tier").is_none(),
        "removed label stays removed: {d}"
    );
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 2, "{d}");
    let app = containers
        .iter()
        .find(|c| c["name"] == "app")
        .expect("app container");
    assert_eq!(app["image"], "nginx:1.27");
    assert_eq!(app["ports"][0]["containerPort"], 80, "{app}");
    let env: Vec<&str> = app["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(env, ["A", "C"], "{app}");
    let sidecar = containers
        .iter()
        .find(|c| c["name"] == "sidecar")
        .expect("sidecar");
    assert_eq!(sidecar["command"], serde_json::json!(["sleep", "3600"]));
    let out = k.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT_V2).await;
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");

    // The reference operator deployment and its RBAC apply as they are.
    let rbac = std::fs::read_to_string(kopf_file("deployment-rbac.yaml"))
        .expect("read rbac")
        .replace("{{NAMESPACE}}", "default");
    let out = k.ok_stdin(&["apply", "-f", "-"], &rbac).await;
    assert!(
        out.contains("serviceaccount/kopfexample-account created"),
        "{out}"
    );
    assert!(
        out.contains("clusterrole.rbac.authorization.k8s.io/kopfexample-role-cluster created"),
        "{out}"
    );
    let out = k
        .ok(&["apply", "-f", &kopf_file("deployment-depl.yaml")])
        .await;
    assert!(
        out.contains("deployment.apps/kopfexample-operator created"),
        "{out}"
    );

    // ConfigMap: apply, apply again with a key removed and one added.
    let cm1 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n  b: \"2\"\n";
    let cm2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n  c: \"3\"\n";
    let out = k.ok_stdin(&["apply", "-f", "-"], cm1).await;
    assert!(out.contains("configmap/settings created"), "{out}");
    let out = k.ok_stdin(&["apply", "-f", "-"], cm2).await;
    assert!(out.contains("configmap/settings configured"), "{out}");
    let cm = k.json(&["get", "cm", "settings"]).await;
    assert_eq!(cm["data"], serde_json::json!({"a": "1", "c": "3"}), "{cm}");

    // Server-side apply.
    let ssa = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  x: \"1\"\n";
    let out = k
        .ok_stdin(&["apply", "--server-side", "-f", "-"], ssa)
        .await;
    assert!(out.contains("configmap/ssa serverside-applied"), "{out}");
    let out = k
        .ok_stdin(
            &["apply", "--server-side", "-f", "-"],
            &ssa.replace("x: \"1\"", "x: \"2\""),
        )
        .await;
    assert!(out.contains("configmap/ssa serverside-applied"), "{out}");
    let out = k
        .ok(&["get", "cm", "ssa", "-o", "jsonpath={.data.x}"])
        .await;
    assert_eq!(out, "2");

    // kubectl create, from a file and from flags.
    let secret =
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  user: admin\n";
    let out = k.ok_stdin(&["create", "-f", "-"], secret).await;
    assert!(out.contains("secret/creds created"), "{out}");
    let out = k
        .ok_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n",
        )
        .await;
    assert!(out.contains("namespace/other created"), "{out}");
    // The generator subcommands (`kubectl create configmap|namespace ...`)
    // send protobuf request bodies through kubectl's typed client.
    let out = k
        .ok(&["create", "configmap", "literal", "--from-literal=k=v"])
        .await;
    assert!(out.contains("configmap/literal created"), "{out}");
    let out = k
        .ok(&["get", "cm", "literal", "-o", "jsonpath={.data.k}"])
        .await;
    assert_eq!(out, "v");
    let out = k.ok(&["create", "namespace", "another"]).await;
    assert!(out.contains("namespace/another created"), "{out}");
    let out = k
        .ok(&[
            "create",
            "secret",
            "generic",
            "generated",
            "--from-literal=a=b",
        ])
        .await;
    assert!(out.contains("secret/generated created"), "{out}");
    let out = k
        .ok(&["get", "secret", "generated", "-o", "jsonpath={.data.a}"])
        .await;
    assert_eq!(out, "Yg==");
    let out = k.ok(&["create", "serviceaccount", "robot"]).await;
    assert!(out.contains("serviceaccount/robot created"), "{out}");
    // A strategic merge patch by hand (kubectl patch's default type).
    let out = k
        .ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}}}"#])
        .await;
    assert!(out.contains("deployment.apps/web patched"), "{out}");
    let d = k.json(&["get", "deployment", "web"]).await;
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(
        containers.len(),
        2,
        "strategic merge keeps the other container: {d}"
    );
    assert_eq!(containers[0]["image"], "nginx:1.28", "{d}");

    // explain of a built-in, down to a nested field.
    let out = k
        .ok(&["explain", "deployments.spec.template.spec.containers"])
        .await;
    assert!(out.contains("env"), "{out}");

    // get all: the "all" category across pods, deployments, ...
    let out = k.ok(&["get", "all"]).await;
    assert!(out.contains("pod/nginx"), "{out}");
    assert!(out.contains("deployment.apps/web"), "{out}");

    server.shutdown().await.expect("shutdown");
}
