//! The deploy tests' stage: an API server that enforces RBAC, kubectl as its admin, a
//! copy of `deploy/` with built guests where its kustomizations expect them, and a
//! "pod": the `kapsel` binary run as a Deployment's container says, its volumes laid
//! out as the kubelet lays them out, connected with its ServiceAccount's token.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use kapsel_apiserver::{ApiServer, Config};
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;

/// How long the operator and the cluster get to do something before a test gives up.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// A fresh scratch folder under the system temp dir, removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("kapsel-deploy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An embedded API server with RBAC on, its admin's kubeconfig, and a client as the admin.
pub(crate) struct Cluster {
    pub(crate) server: ApiServer,
    pub(crate) admin: kube::Client,
    kubeconfig: PathBuf,
    pub(crate) scratch: Scratch,
}

impl Cluster {
    pub(crate) async fn start(name: &str) -> Cluster {
        let scratch = Scratch::new(name);
        let server = ApiServer::start(Config::default().rbac(true))
            .await
            .expect("the API server starts");
        let kubeconfig = scratch.0.join("admin.kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig()).expect("kubeconfig");
        let admin = client_from(&kubeconfig).await;
        Cluster {
            server,
            admin,
            kubeconfig,
            scratch,
        }
    }

    /// Runs kubectl as the admin; its output, whatever the exit status.
    pub(crate) async fn kubectl(&self, args: &[&str]) -> Output {
        tokio::process::Command::new("kubectl")
            .arg(format!(
                "--cache-dir={}",
                self.scratch.0.join("kubectl-cache").display()
            ))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.scratch.0)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("kubectl runs (is it installed?)")
    }

    /// Runs kubectl as the admin and expects it to succeed; its standard output.
    pub(crate) async fn kubectl_ok(&self, args: &[&str]) -> String {
        let output = self.kubectl(args).await;
        assert!(
            output.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A kubeconfig file that acts as the ServiceAccount `namespace/name` (a token
    /// from the TokenRequest API, as a pod's projected token is).
    pub(crate) fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let token = self
            .server
            .service_account_token(namespace, name, Duration::from_secs(3600))
            .expect("a token for the ServiceAccount");
        let admin = self.server.kubeconfig();
        let text = admin.replace(&self.server.admin_token(), &token);
        assert_ne!(text, admin, "the admin's token is in its kubeconfig");
        let path = self
            .scratch
            .0
            .join(format!("{namespace}-{name}.kubeconfig"));
        std::fs::write(&path, text).expect("kubeconfig");
        path
    }

    /// The object, as the admin reads it.
    pub(crate) async fn get(
        &self,
        api_version: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let api = api(&self.admin, api_version, plural, namespace);
        let object = api.get_opt(name).await.expect("get");
        object.map(|o| serde_json::to_value(o).expect("json"))
    }

    /// Every object of a resource in a namespace (or all), as the admin lists them.
    pub(crate) async fn list(
        &self,
        api_version: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> Vec<Value> {
        let api = api(&self.admin, api_version, plural, namespace);
        let list = api.list(&Default::default()).await.expect("list");
        list.items
            .into_iter()
            .map(|o| serde_json::to_value(o).expect("json"))
            .collect()
    }
}

async fn client_from(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

fn api(
    client: &kube::Client,
    api_version: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        // Not used in the URLs of get and list.
        kind: String::new(),
        plural: plural.into(),
    };
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Polls `probe` until it answers, or fails the test after [`PATIENCE`] naming `what`.
pub(crate) async fn eventually<T, F>(what: &str, mut probe: impl FnMut() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "not so after {PATIENCE:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `deploy/` copied into `into`, with the built guests each of its kustomizations
/// names (`guests/NAME.wasm`) in that kustomization's `guests/` folder, as
/// `make deploy-manifests` puts them.
pub(crate) fn stage_deploy(into: &Path) -> PathBuf {
    let staged = into.join("deploy");
    copy_tree(&kapsel_tests::workspace().join("deploy"), &staged);
    for kustomization in kustomizations(&staged) {
        let dir = kustomization.parent().expect("a folder");
        let text = std::fs::read_to_string(&kustomization).expect("kustomization");
        for name in guest_files(&text) {
            std::fs::create_dir_all(dir.join("guests")).expect("guests folder");
            let guest = kapsel_tests::deploy_guest(name.trim_end_matches(".wasm"));
            std::fs::copy(&guest, dir.join("guests").join(&name)).expect("copy the guest");
        }
    }
    staged
}

/// The guests' file names a kustomization's configMapGenerator names (`guests/X.wasm`).
pub(crate) fn guest_files(kustomization: &str) -> Vec<String> {
    kustomization
        .split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | ',' | '"'))
        .filter_map(|word| word.strip_prefix("guests/"))
        .filter(|name| name.ends_with(".wasm"))
        .map(str::to_owned)
        .collect()
}

fn kustomizations(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(kustomizations(&path));
        } else if path.file_name().is_some_and(|n| n == "kustomization.yaml") {
            found.push(path);
        }
    }
    found
}

/// Copies a folder of manifests, without built guests (a checkout may hold some).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "guests") {
                copy_tree(&path, &target);
            }
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

/// The host run as one container of a Deployment: its args with the volumes' paths
/// mapped into a scratch folder, its environment, its ServiceAccount's token.
pub(crate) struct Pod {
    child: tokio::process::Child,
    log: PathBuf,
    /// `http://127.0.0.1:PORT`: where the `--liveness` endpoint listens.
    pub(crate) endpoint: String,
    /// The liveness probe's path.
    pub(crate) probe_path: String,
    /// The pod's name (POD_ID comes from it).
    pub(crate) name: String,
    /// `127.0.0.1:PORT`: where `--admission-listen` listens, if the container serves it.
    pub(crate) admission: Option<String>,
    /// Where each volume is laid out, by name.
    volumes: Vec<(String, PathBuf)>,
}

impl Pod {
    /// Starts the Deployment `namespace/name`'s (only) container as its pod would run.
    pub(crate) async fn start(cluster: &Cluster, namespace: &str, name: &str) -> Pod {
        let deployment = cluster
            .get("apps/v1", "deployments", Some(namespace), name)
            .await
            .expect("the Deployment exists");
        let spec = &deployment["spec"]["template"]["spec"];
        let container = &spec["containers"][0];
        let pod_name = format!("{name}-5d8f7c9b4-x2x7q");
        let dir = cluster.scratch.0.join(&pod_name);
        std::fs::create_dir_all(&dir).expect("pod dir");

        // Volumes, as the kubelet makes them.
        let mut mounts = Vec::new();
        let mut volumes = Vec::new();
        for mount in strings(&container["volumeMounts"], "name")
            .into_iter()
            .zip(strings(&container["volumeMounts"], "mountPath"))
        {
            let (volume_name, mount_path) = mount;
            let volume = spec["volumes"]
                .as_array()
                .and_then(|v| v.iter().find(|v| v["name"] == volume_name.as_str()))
                .unwrap_or_else(|| panic!("no volume {volume_name}"));
            let folder = dir.join(&volume_name);
            if volume.get("emptyDir").is_some() {
                std::fs::create_dir_all(&folder).expect("emptyDir");
            } else {
                project(cluster, namespace, volume, &folder).await;
            }
            volumes.push((volume_name, folder.clone()));
            mounts.push((mount_path, folder));
        }

        // The liveness endpoint: on the probe's port, moved to a free loopback port.
        let probe = &container["livenessProbe"]["httpGet"];
        let probe_port = match &probe["port"] {
            Value::String(named) => container["ports"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["name"] == named.as_str()))
                .and_then(|p| p["containerPort"].as_u64())
                .unwrap_or_else(|| panic!("no port named {named}")),
            number => number.as_u64().expect("a port"),
        };
        let port = free_port();
        let mut args: Vec<String> = Vec::new();
        let container_args = strings_of(&container["args"]);
        let mut liveness_mapped = false;
        let mut admission = None;
        let mut iter = container_args.iter().peekable();
        while let Some(arg) = iter.next() {
            if arg == "--admission-listen" {
                // On a container port, moved to a free loopback port.
                let listen = iter.next().expect("an address after --admission-listen");
                let exposed = container["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["containerPort"].as_u64());
                assert!(
                    exposed
                        .map(|p| format!("0.0.0.0:{p}"))
                        .any(|a| &a == listen),
                    "--admission-listen {listen} listens on a container port"
                );
                let mapped = format!("127.0.0.1:{}", free_port());
                args.push(arg.clone());
                args.push(mapped.clone());
                admission = Some(mapped);
                continue;
            }
            if arg == "--liveness" {
                let url = iter.next().expect("a URL after --liveness");
                let (host_port, path) = url
                    .strip_prefix("http://")
                    .and_then(|rest| rest.split_once('/'))
                    .expect("an http URL with a path");
                assert_eq!(
                    host_port,
                    format!("0.0.0.0:{probe_port}"),
                    "--liveness listens where the probe asks"
                );
                assert_eq!(
                    format!("/{path}"),
                    probe["path"].as_str().unwrap_or_default()
                );
                args.push(arg.clone());
                args.push(format!("http://127.0.0.1:{port}/{path}"));
                liveness_mapped = true;
                continue;
            }
            args.push(map_path(arg, &mounts));
        }
        assert!(
            liveness_mapped,
            "the container serves --liveness: {container_args:?}"
        );
        let kubeconfig = cluster.service_account_kubeconfig(
            namespace,
            spec["serviceAccountName"]
                .as_str()
                .expect("a ServiceAccount"),
        );
        args.push("--kubeconfig".into());
        args.push(kubeconfig.display().to_string());

        let log = dir.join("log");
        let file = std::fs::File::create(&log).expect("log");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kapsel"));
        command
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .kill_on_drop(true);
        for env in container["env"].as_array().into_iter().flatten() {
            let name = env["name"].as_str().expect("a name");
            let value = match (&env["value"], &env["valueFrom"]["fieldRef"]["fieldPath"]) {
                (Value::String(value), _) => value.clone(),
                (_, Value::String(field)) if field == "metadata.name" => pod_name.clone(),
                (_, Value::String(field)) if field == "metadata.namespace" => namespace.into(),
                other => panic!("an env source this test does not provide: {other:?}"),
            };
            command.env(name, value);
        }
        let child = command.spawn().expect("kapsel starts");
        Pod {
            child,
            log,
            endpoint: format!("http://127.0.0.1:{port}"),
            probe_path: probe["path"].as_str().unwrap_or_default().to_owned(),
            name: pod_name,
            admission,
            volumes,
        }
    }

    /// The folder of the volume `name`, as the container sees it at its mount path.
    pub(crate) fn volume(&self, name: &str) -> &Path {
        self.volumes
            .iter()
            .find(|(volume, _)| volume == name)
            .map(|(_, folder)| folder.as_path())
            .unwrap_or_else(|| panic!("no volume {name}"))
    }

    /// What the host logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the host logs a line containing `needle`; the line.
    pub(crate) async fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let log = self.log();
            if let Some(line) = log.lines().find(|l| l.contains(needle)) {
                return line.to_owned();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the host exited ({status}) before logging {needle:?}:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} logged after {PATIENCE:?}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the host as the kubelet does (SIGTERM) and waits for it to exit.
    pub(crate) async fn stop(mut self) -> String {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the host stops on SIGTERM")
            .expect("wait");
        let log = self.log();
        assert!(status.success(), "the host exited with {status}:\n{log}");
        log
    }
}

/// A ConfigMap (or projected ConfigMaps) volume as the kubelet writes it: the keys'
/// files in a hidden timestamped folder, `..data` linking to it, and a link per key.
async fn project(cluster: &Cluster, namespace: &str, volume: &Value, folder: &Path) {
    let names: Vec<String> = match (&volume["configMap"]["name"], &volume["projected"]) {
        (Value::String(name), _) => vec![name.clone()],
        (_, Value::Object(projected)) => projected["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .map(|s| {
                s["configMap"]["name"]
                    .as_str()
                    .expect("a ConfigMap")
                    .to_owned()
            })
            .collect(),
        _ => panic!("a volume this test does not lay out: {volume}"),
    };
    let data = folder.join("..2026_12_01_17_00_00.123456789");
    std::fs::create_dir_all(&data).expect("data folder");
    for name in names {
        let configmap = cluster
            .get("v1", "configmaps", Some(namespace), &name)
            .await
            .unwrap_or_else(|| panic!("the ConfigMap {name} exists"));
        for (key, encoded) in configmap["binaryData"].as_object().into_iter().flatten() {
            let bytes = base64_decode(encoded.as_str().expect("base64"));
            std::fs::write(data.join(key), bytes).expect("write key");
            std::os::unix::fs::symlink(format!("..data/{key}"), folder.join(key)).expect("link");
        }
    }
    std::os::unix::fs::symlink(data.file_name().expect("name"), folder.join("..data"))
        .expect("..data");
}

/// Standard base64, as the API serves `binaryData`.
pub(crate) fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64")
}

/// `arg` with a volume's mount path replaced by where that volume is here.
fn map_path(arg: &str, mounts: &[(String, PathBuf)]) -> String {
    for (mount_path, folder) in mounts {
        if let Some(rest) = arg.strip_prefix(mount_path.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{}{rest}", folder.display());
        }
    }
    arg.to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A list's string items.
pub(crate) fn strings_of(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The string field `field` of each item of a list.
pub(crate) fn strings(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v[field].as_str().map(str::to_owned))
        .collect()
}

/// GET over plain HTTP; the status code and the body.
pub(crate) async fn http_get(url: &str) -> (u16, String) {
    kapsel_tests::http("GET", url).await.expect("an answer")
}

/// Whether a log line says a request was refused, past each line's timestamp
/// (`[2026-12-01 23:26:58,403]` has a 403 of its own). A refusal is kube's wording
/// (`... is forbidden: User ...`, reason `Forbidden`), which every 403 of the API server
/// carries, or a 403 given as a status or code. Any other 403 is a number like another:
/// a port (`127.0.0.1:40379`), a duration (`compiled ... in 403 ms`).
pub(crate) fn mentions_a_refusal(log: &str) -> bool {
    log.lines()
        .map(|line| line.split_once("] ").map_or(line, |(_, text)| text))
        .any(|text| {
            let text = text.to_lowercase();
            text.contains("forbidden") || a_status_403(&text)
        })
}

/// `status 403`, `status=403`, `code: 403`, `HTTP 403`, `(403)`.
fn a_status_403(text: &str) -> bool {
    text.match_indices("403").any(|(at, _)| {
        let before = text[..at].trim_end_matches([' ', '=', ':']);
        let after = &text[at + 3..];
        !after.starts_with(|c: char| c.is_ascii_digit())
            && (before.ends_with("status")
                || before.ends_with("code")
                || before.ends_with("http")
                || (before.ends_with('(') && after.starts_with(')')))
    })
}

#[test]
fn a_refusal_is_kubes_wording_or_a_403_status_and_not_any_403() {
    assert!(mentions_a_refusal("[t] GET /api failed: 403 Forbidden"));
    assert!(mentions_a_refusal("[t] status=403"));
    assert!(mentions_a_refusal("[t] pods is forbidden: no"));
    assert!(!mentions_a_refusal("[2026-12-01 23:26:58,403] ok"));
    assert!(mentions_a_refusal("[t] request failed (403)"));
    assert!(mentions_a_refusal("[t] HTTP 403 from the server"));
    assert!(!mentions_a_refusal(
        "[t] Serving on http://127.0.0.1:40379."
    ));
    assert!(!mentions_a_refusal(
        "[t] Loaded guest 'children', compiled by a helper process in 403 ms."
    ));
    assert!(!mentions_a_refusal("[t] status 4031"));
}
