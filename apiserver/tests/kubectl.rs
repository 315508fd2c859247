//! Drives the real `kubectl` against the embedded API server: plain
//! `kubectl apply` (kubectl's default validation, no `--validate=false`),
//! CRDs and their objects, short names, patches, the status subresource,
//! deletion with finalizers, watches, `kubectl run`, client-side and
//! server-side apply updates, `explain`, `api-resources` and `get all`.
//!
//! kubectl's typed `create` generators, which send protobuf bodies, are
//! covered one by one.
//!
//! kubectl must be installed (`/usr/bin/kubectl` or on `PATH`): without it
//! these tests fail, saying so, rather than pass without running. Every
//! kubectl call runs with a timeout, so a misbehaving server fails the test
//! instead of hanging it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use kapsel_apiserver::{ApiServer, Config};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

/// How long any single kubectl call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Kopf's reference manifests (copied from `shared/reference/kopf/`, so the
/// test needs nothing outside the repository).
fn kopf_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/data"))
}

/// The kubectl binary; a missing kubectl fails the test (a skip would pass
/// silently, since libtest hides the output of passing tests).
fn find_kubectl() -> PathBuf {
    let fixed = Path::new("/usr/bin/kubectl");
    if fixed.exists() {
        return fixed.to_path_buf();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "kubectl is not installed: these tests drive the real kubectl. Install kubectl \
                 1.32 or newer (`apt-get install kubectl` where the Kubernetes or Cloud SDK \
                 apt repository is set up) at /usr/bin/kubectl or on PATH"
            )
        })
}

/// A kubectl bound to one embedded server, with its own kubeconfig and
/// discovery/OpenAPI cache directory (removed on drop).
struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn new(bin: PathBuf, server: &ApiServer, name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kapsel-kubectl-{name}-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig()).expect("write kubeconfig");
        Self {
            bin,
            dir,
            kubeconfig,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .arg(format!("--cache-dir={}", self.dir.join("cache").display()))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl to completion (with a timeout), feeding `stdin` if given.
    async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.command(args);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        match timeout(CALL_TIMEOUT, child.wait_with_output()).await {
            Ok(out) => out.expect("kubectl output"),
            Err(_) => panic!("kubectl {args:?} did not finish within {CALL_TIMEOUT:?}"),
        }
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None).await
    }

    /// Runs kubectl, asserts success, returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        check(args, &out)
    }

    /// Like `ok`, with a manifest on stdin (`-f -`).
    async fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        let out = self.run_with(args, Some(input)).await;
        check(args, &out)
    }

    /// `kubectl get ... -o json`, parsed.
    async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.ok(&all).await;
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: bad JSON ({e}): {text}"))
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("spawn kubectl")
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn check(args: &[&str], out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    // kubectl prints this when our OpenAPI schemas could not drive its
    // strategic-merge-patch computation (it then falls back to Go types).
    assert!(
        !stderr.contains("error calculating patch from openapi"),
        "kubectl {args:?} could not use the OpenAPI schemas: {stderr}"
    );
    stdout
}

async fn start() -> (ApiServer, PathBuf) {
    let bin = find_kubectl();
    let server = ApiServer::start(Config::default().port(0))
        .await
        .expect("start the embedded API server");
    (server, bin)
}

fn kopf_file(name: &str) -> String {
    let path = kopf_dir().join(name);
    path.to_str().expect("utf-8 path").to_owned()
}

/// Retries `kubectl args` until it succeeds (for a CRD to become served).
async fn eventually_ok(k: &Kubectl, args: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let out = k.run(args).await;
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        if tokio::time::Instant::now() > deadline {
            return check(args, &out);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reads lines of a running kubectl until one contains `needle`.
async fn read_until(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    needle: &str,
) -> String {
    let read = async {
        let mut seen = Vec::new();
        loop {
            match lines.next_line().await.expect("read kubectl output") {
                Some(line) if line.contains(needle) => return line,
                Some(line) => seen.push(line),
                None => panic!("kubectl output ended before {needle:?}; saw: {seen:?}"),
            }
        }
    };
    timeout(CALL_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| panic!("no line with {needle:?} within {CALL_TIMEOUT:?}"))
}

/// The kopfexamples CRD and its object, driven like a user would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_custom_resources() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "crd");

    // Plain apply: kubectl validates (by asking the server to, per OpenAPI v3).
    let out = k
        .ok(&["apply", "-f", &kopf_file("kopfexamples-crd.yaml")])
        .await;
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/kopfexamples.kopf.dev created"),
        "{out}"
    );
    eventually_ok(&k, &["get", "kopfexamples"]).await;

    let out = k
        .ok(&["apply", "-f", &kopf_file("kopfexample-obj.yaml")])
        .await;
    assert!(
        out.contains("kopfexample.kopf.dev/kopf-example-1 created"),
        "{out}"
    );

    // Get by short name, and as JSON.
    let out = k.ok(&["get", "kex"]).await;
    assert!(out.contains("kopf-example-1"), "{out}");
    let list = k.json(&["get", "kopfexamples"]).await;
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["spec"]["duration"], "1m");
    assert_eq!(items[0]["metadata"]["labels"]["somelabel"], "somevalue");
    assert_eq!(items[0]["metadata"]["namespace"], "default");

    // Re-applying the unchanged object is a no-op; a changed one is a merge patch.
    let out = k
        .ok(&["apply", "-f", &kopf_file("kopfexample-obj.yaml")])
        .await;
    assert!(out.contains("kopf-example-1 unchanged"), "{out}");
    let changed = std::fs::read_to_string(kopf_file("kopfexample-obj.yaml"))
        .expect("read obj")
        .replace("duration: 1m", "duration: 2m");
    let out = k.ok_stdin(&["apply", "-f", "-"], &changed).await;
    assert!(out.contains("kopf-example-1 configured"), "{out}");
    let obj = k.json(&["get", "kex", "kopf-example-1"]).await;
    assert_eq!(obj["spec"]["duration"], "2m");
    assert_eq!(obj["spec"]["items"], serde_json::json!(["item1", "item2"]));

    // Merge patch of the main resource.
    let out = k
        .ok(&[
            "patch",
            "kex",
            "kopf-example-1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"field":"patched"}}"#,
        ])
        .await;
    assert!(
        out.contains("kopfexample.kopf.dev/kopf-example-1 patched"),
        "{out}"
    );
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.spec.field}",
        ])
        .await;
    assert_eq!(out, "patched");

    // The status subresource (the CRD declares it).
    let out = k
        .ok(&[
            "patch",
            "kex",
            "kopf-example-1",
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"create_fn":{"message":"hello","children":["a"]}}}"#,
        ])
        .await;
    assert!(out.contains("patched"), "{out}");
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.status.create_fn.message}",
        ])
        .await;
    assert_eq!(out, "hello");
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "--subresource=status",
            "-o",
            "jsonpath={.status.create_fn.message}",
        ])
        .await;
    assert_eq!(out, "hello");
    // With the subresource, the main resource ignores status changes.
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"create_fn":{"message":"ignored"}}}"#,
    ])
    .await;
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.status.create_fn.message}",
        ])
        .await;
    assert_eq!(out, "hello");

    // explain renders the CRD's schema from OpenAPI v3.
    let out = k.ok(&["explain", "kopfexamples"]).await;
    assert!(out.contains("KopfExample"), "{out}");
    assert!(out.contains("kopf.dev"), "{out}");
    assert!(out.contains("spec"), "{out}");
    assert!(out.contains("metadata"), "{out}");

    // A changed CRD schema shows up at once: the /openapi/v3 index hash
    // changes, so kubectl does not reuse its cached document.
    let described = std::fs::read_to_string(kopf_file("kopfexamples-crd.yaml"))
        .expect("read crd")
        .replacen(
            "            spec:\n              type: object\n",
            "            spec:\n              type: object\n              properties:\n                duration: {type: string, description: For how long the pod should sleep.}\n",
            1,
        );
    assert!(
        described.contains("duration: {type: string"),
        "the CRD file changed shape"
    );
    let out = k.ok_stdin(&["apply", "-f", "-"], &described).await;
    assert!(out.contains("kopfexamples.kopf.dev configured"), "{out}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let out = k.ok(&["explain", "kopfexamples.spec"]).await;
        if out.contains("For how long the pod should sleep.") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "explain never showed the new schema: {out}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Unknown fields: kubectl asks the server to validate (fieldValidation=Strict);
    // kube-apiserver answers 400 "strict decoding error: unknown field".
    let typo =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndata: {}\ndatta: {a: b}\n";
    let out = k.run_with(&["apply", "-f", "-"], Some(typo)).await;
    assert!(
        !out.status.success(),
        "an unknown field must be rejected: {out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown field \"datta\""),
        "{out:?}"
    );

    // api-resources lists the CRD's resource with its short names.
    let out = k.ok(&["api-resources"]).await;
    let line = out
        .lines()
        .find(|l| l.starts_with("kopfexamples "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("kex") && line.contains("kopf.dev/v1") && line.contains("KopfExample"),
        "{line}"
    );
    assert!(out.lines().any(|l| l.starts_with("deployments ")), "{out}");

    // Deletion waits for the finalizers: kubectl delete blocks until another
    // client removes the last one.
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["kapsel.test/hold"]}}"#,
    ])
    .await;
    let mut delete = k.spawn(&["delete", "kex", "kopf-example-1", "--timeout=25s"]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        delete.try_wait().expect("try_wait").is_none(),
        "kubectl delete returned while a finalizer holds the object"
    );
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!out.is_empty(), "deletionTimestamp is set");
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let out = timeout(CALL_TIMEOUT, delete.wait_with_output())
        .await
        .expect("kubectl delete returns once the finalizer is gone")
        .expect("kubectl delete output");
    let stdout = check(&["delete"], &out);
    assert!(
        stdout.contains("kopfexample.kopf.dev \"kopf-example-1\" deleted"),
        "{stdout}"
    );
    let gone = k.run(&["get", "kex", "kopf-example-1"]).await;
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "{gone:?}"
    );

    // get -w streams the changes.
    let mut watch = k.spawn(&["get", "kex", "-w", "-o", "name"]);
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    tokio::time::sleep(Duration::from_millis(500)).await;
    k.ok(&["apply", "-f", &kopf_file("kopfexample-obj.yaml")])
        .await;
    read_until(&mut lines, "kopfexample.kopf.dev/kopf-example-1").await;
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"field":"watched"}}"#,
    ])
    .await;
    read_until(&mut lines, "kopfexample.kopf.dev/kopf-example-1").await;
    watch.kill().await.expect("kill kubectl get -w");

    server.shutdown().await.expect("shutdown");
}

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
