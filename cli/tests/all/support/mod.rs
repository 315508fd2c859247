//! What the tests of the `kapsel` binary share: the binary, scratch folders, the
//! compiled test guests, and a `kapsel dev-cluster` to run commands against.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

/// How long the tests wait for the operator to get somewhere.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) fn kapsel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kapsel"))
}

pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kapsel-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A compiled test guest (`activities`, `misbehaving`, ...: its lib name): from `make
/// test`'s `KAPSEL_GUEST_DIR`, or built here by `scripts/build-guests`.
pub(crate) fn guest(name: &str) -> PathBuf {
    if let Ok(dir) = std::env::var("KAPSEL_GUEST_DIR") {
        let path = Path::new(&dir).join(format!("{name}.wasm"));
        if path.exists() {
            return path;
        }
    }
    let output = Command::new(repository().join("scripts").join("build-guests"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the guests could not be built: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join(format!("{name}.wasm"))
}

/// A `kapsel dev-cluster` in the background (serving `dir/kubeconfig`), stopped when
/// dropped.
pub(crate) struct DevCluster {
    child: Child,
    addr: String,
    /// Its kubeconfig.
    pub(crate) kubeconfig: PathBuf,
}

impl DevCluster {
    pub(crate) fn start(dir: &Path) -> DevCluster {
        DevCluster::start_with(dir, &[])
    }

    /// A dev cluster started with more options.
    pub(crate) fn start_with(dir: &Path, options: &[&str]) -> DevCluster {
        let kubeconfig = dir.join("kubeconfig");
        let child = kapsel()
            .args(["dev-cluster", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(options)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = wait_until("the dev cluster's kubeconfig", || {
            let text = std::fs::read_to_string(&kubeconfig).ok()?;
            let url = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("server: "))?;
            Some(url.trim_start_matches("http://").to_owned())
        });
        DevCluster {
            child,
            addr,
            kubeconfig,
        }
    }

    /// One HTTP/1.1 request with a JSON body; the status code and the body as JSON.
    pub(crate) fn request(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let (code, response) = http(&self.addr, method, path, &body, None);
        let body = response
            .split_once("\r\n\r\n")
            .and_then(|(_, body)| serde_json::from_str(body).ok())
            .unwrap_or(Value::Null);
        (code, body)
    }

    /// Runs a `kapsel` command on this cluster (its kubeconfig, no `POD_ID`).
    pub(crate) fn kapsel(&self, args: &[&str]) -> Output {
        kapsel()
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("POD_ID")
            .output()
            .unwrap()
    }

    pub(crate) fn create(&self, path: &str, body: &Value) {
        let (code, answer) = self.request("POST", path, body);
        assert_eq!(code, 201, "{path}: {answer}");
    }

    /// The peering CRDs and the cluster-wide `default` peering object
    /// (`deploy/operator/`), so that `kapsel run -A` writes its peer record there.
    pub(crate) fn with_peering(&self) {
        let deploy = repository().join("deploy/operator");
        let read = |file: &str| std::fs::read_to_string(deploy.join(file)).unwrap();
        let text = read("peering-crds.yaml") + "\n---\n" + &read("peering-default.yaml");
        for doc in text.split("\n---") {
            let doc: Value = serde_yaml::from_str(doc).unwrap();
            match doc["kind"].as_str() {
                Some("CustomResourceDefinition") => self.create(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    &doc,
                ),
                Some("ClusterKopfPeering") => {
                    self.create("/apis/kopf.dev/v1/clusterkopfpeerings", &doc);
                }
                _ => {}
            }
        }
    }

    /// The peer records of the `default` ClusterKopfPeering.
    pub(crate) fn peers(&self) -> Value {
        let (code, object) = self.request(
            "GET",
            "/apis/kopf.dev/v1/clusterkopfpeerings/default",
            &Value::Null,
        );
        assert_eq!(code, 200, "{object}");
        object["status"].clone()
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request to `addr` (with a bearer `token`, if any); the status code and
/// the whole response, headers included.
pub(crate) fn http(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, response)
}

/// Polls `found` every 50 ms until it answers, for [`PATIENCE`].
pub(crate) fn wait_until<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn manifest(name: &str) -> Value {
    let path = repository().join("examples/manifests").join(name);
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub(crate) fn kopfexamples(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        api_version: "kopf.dev/v1".into(),
        kind: "KopfExample".into(),
        plural: "kopfexamples".into(),
    };
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// Serves the kopfexamples of `examples/manifests`.
pub(crate) async fn create_crd(client: &kube::Client) {
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    );
    let crd = serde_json::from_value(manifest("kopfexamples-crd.yaml")).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
}

/// `kapsel run` of a guest on the cluster the kubeconfig names.
pub(crate) fn start_operator(kubeconfig: &Path, guest: &Path) -> Child {
    start_operator_with(kubeconfig, guest, &[])
}

/// `kapsel run` of a guest on the cluster the kubeconfig names, with more flags.
pub(crate) fn start_operator_with(kubeconfig: &Path, guest: &Path, flags: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kapsel"))
        .args(["run", "-A", "--standalone", "--kubeconfig"])
        .arg(kubeconfig)
        .args(flags)
        .arg(guest)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}
