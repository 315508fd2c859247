//! Support for the integration tests: the compiled guests, and small helpers
//! to drive the embedded cluster.

pub mod admission;
mod kopf;
mod tracker;
mod volume;

pub use kopf::*;
pub use tracker::{Seen, Tracker};
pub use volume::ConfigMapVolume;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use kapsel_host::Record;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

/// The repository's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The path of a compiled guest (`seed`, `indexes`, `minimal`, `lifecycle`, `kube_calls`,
/// `misbehaving`, `activities`, `probes`, `changes`, `timers`, ...: a guest crate's lib
/// name).
///
/// `make test` builds the guests first and says where (`KAPSEL_GUEST_DIR`); a plain
/// `cargo test` builds them here, once, with the script that knows them all
/// (`scripts/build-guests`).
///
/// # Panics
/// When the guests cannot be built: the tests cannot run without them.
pub fn guest(name: &str) -> PathBuf {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        if let Ok(dir) = std::env::var("KAPSEL_GUEST_DIR") {
            let dir = PathBuf::from(dir);
            if dir.join(format!("{name}.wasm")).exists() {
                return Ok(dir);
            }
        }
        build_guests()
    });
    match dir {
        Ok(dir) => dir.join(format!("{name}.wasm")),
        Err(error) => panic!("the test guests could not be built: {error}"),
    }
}

/// The path of an example guest (`minimal`, `typed`, ...) built as `make
/// deploy-manifests` builds it for `deploy/`: with the small `deploy` profile, so that it
/// fits in a ConfigMap. Built here, once.
///
/// # Panics
/// When the guests cannot be built.
pub fn deploy_guest(name: &str) -> PathBuf {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        build_guests_with(&[("GUEST_PROFILE", "deploy"), ("GUEST_FOLDERS", "examples")])
    });
    match dir {
        Ok(dir) => dir.join(format!("{name}.wasm")),
        Err(error) => panic!("the example guests could not be built: {error}"),
    }
}

fn build_guests() -> Result<PathBuf, String> {
    build_guests_with(&[])
}

/// `scripts/build-guests` with these environment variables; the folder of the guests.
fn build_guests_with(env: &[(&str, &str)]) -> Result<PathBuf, String> {
    let output = Command::new(workspace().join("scripts").join("build-guests"))
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("cannot run scripts/build-guests: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// Runs one case file of `tests/cases/<dir>/` with `kapsel test` (in-process, on a fresh
/// embedded cluster) against a guest, and asserts that it passed; the report (with what
/// the operator did) is in the failure message.
///
/// # Panics
/// When the case does not pass, or cannot run.
pub async fn case_passes(guest_name: &str, dir: &str, file: &str) {
    let path = workspace().join("tests").join("cases").join(dir).join(file);
    case_file_passes(guest_name, &path).await;
}

/// Runs the case file at `path` (see [`case_passes`]) and asserts that it passed.
///
/// # Panics
/// When the case does not pass, or cannot run.
pub async fn case_file_passes(guest_name: &str, path: &Path) {
    let mut out = Vec::new();
    let result = kapsel_host::testing::run_cases(&guest(guest_name), &[path.to_owned()], &mut out)
        .await
        .map_err(|e| e.to_string());
    let report = String::from_utf8_lossy(&out);
    assert_eq!(
        result,
        Ok(kapsel_host::testing::CaseSummary {
            passed: 1,
            failed: 0
        }),
        "{}:\n{report}",
        path.display()
    );
}

/// A manifest shipped with the examples (`examples/manifests/<name>`), as JSON.
///
/// # Panics
/// When the file is missing or not YAML.
pub fn manifest(name: &str) -> Value {
    let path = workspace().join("examples").join("manifests").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The kopfexamples resource (`kopf.dev/v1`).
pub fn kopfexamples() -> ApiResource {
    ApiResource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        api_version: "kopf.dev/v1".into(),
        kind: "KopfExample".into(),
        plural: "kopfexamples".into(),
    }
}

/// A core v1 resource.
pub fn core(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Creates the kopfexamples CRD.
///
/// # Panics
/// When the API server refuses it.
pub async fn create_kopfexamples_crd(client: &kube::Client) {
    create(client, &crds(), None, manifest("kopfexamples-crd.yaml")).await;
}

/// Creates an object from JSON.
///
/// # Panics
/// When the API server refuses it.
pub async fn create(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    body: Value,
) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(body).expect("a valid object");
    api(client, resource, namespace)
        .create(&PostParams::default(), &object)
        .await
        .expect("create")
}

/// Merge-patches an object.
///
/// # Panics
/// When the API server refuses it.
pub async fn patch(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    patch: Value,
) {
    api(client, resource, namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch");
}

/// Deletes an object.
///
/// # Panics
/// When the API server refuses it.
pub async fn delete(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) {
    api(client, resource, namespace)
        .delete(name, &Default::default())
        .await
        .expect("delete");
}

fn api(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// CustomResourceDefinitions (`apiextensions.k8s.io/v1`).
pub fn crds() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

/// Kopf's `ClusterKopfPeering` (`kopf.dev/v1`).
pub fn cluster_peerings() -> ApiResource {
    cluster_peerings_of("kopf.dev")
}

/// Kopf's `KopfPeering` (`kopf.dev/v1`).
pub fn namespaced_peerings() -> ApiResource {
    namespaced_peerings_of("kopf.dev")
}

/// `ClusterKopfPeering` of an API group: `kopf.dev`, or the legacy `zalando.org`.
pub fn cluster_peerings_of(group: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "ClusterKopfPeering".into(),
        plural: "clusterkopfpeerings".into(),
    }
}

/// `KopfPeering` of an API group: `kopf.dev`, or the legacy `zalando.org`.
pub fn namespaced_peerings_of(group: &str) -> ApiResource {
    ApiResource {
        kind: "KopfPeering".into(),
        plural: "kopfpeerings".into(),
        ..cluster_peerings_of(group)
    }
}

/// Applies `deploy/operator/peering-crds.yaml` (the two CRDs) and, with `objects`,
/// `deploy/operator/peering-default.yaml` (the `default` peering objects).
///
/// # Panics
/// When the manifests cannot be read or the API server refuses them.
pub async fn apply_peering_manifests(client: &kube::Client, objects: bool) {
    apply_peering_manifests_of(client, "kopf.dev", objects).await;
}

/// As [`apply_peering_manifests`], in an API group of one's choice: Kopf's legacy
/// `zalando.org` (the same CRDs and objects, in that group).
///
/// # Panics
/// When the manifests cannot be read or the API server refuses them.
pub async fn apply_peering_manifests_of(client: &kube::Client, group: &str, objects: bool) {
    let deploy = workspace().join("deploy").join("operator");
    let read = |file: &str| std::fs::read_to_string(deploy.join(file)).expect(file);
    let text = read("peering-crds.yaml") + "\n---\n" + &read("peering-default.yaml");
    let text = text.replace("kopf.dev", group);
    for doc in text.split("\n---") {
        let doc: Value = serde_yaml::from_str(doc).expect("YAML");
        match doc["kind"].as_str() {
            Some("CustomResourceDefinition") => create(client, &crds(), None, doc).await,
            Some("ClusterKopfPeering") if objects => {
                create(client, &cluster_peerings_of(group), None, doc).await
            }
            Some("KopfPeering") if objects => {
                create(client, &namespaced_peerings_of(group), Some("default"), doc).await
            }
            _ => continue,
        };
    }
}

/// A pod body.
pub fn pod(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}
    })
}

/// A configmap body with labels.
pub fn configmap(name: &str, labels: Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {}
    })
}

/// An operator of the `changes` guest, whose handlers use Kopf's sub-second delays and
/// backoffs (0.3 s, 0.5 s): these tests check Kopf's timing, so the host's floor on
/// retry delays (1 s by default, against retry storms) is lowered for them.
pub fn changes_operator() -> kapsel_host::Operator {
    kapsel_host::Operator::new([guest("changes")]).limits(changes_operator_limits())
}

/// The limits of [`changes_operator`]: retries after 10 ms.
#[must_use]
pub fn changes_operator_limits() -> kapsel_host::Limits {
    let mut limits = kapsel_host::Limits::default();
    limits.min_retry_delay = Duration::from_millis(10);
    limits
}

/// A port nothing listens on now, for an endpoint a test starts.
///
/// # Panics
/// When no port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One plain HTTP/1.1 request to `url` (`http://host:port/path`, as the operator's
/// liveness and metrics endpoints serve): the status code and the body. `None` while
/// nothing answers there.
pub async fn http(method: &str, url: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, path) = url.strip_prefix("http://")?.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let request = format!("{method} /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    tokio::time::timeout(PATIENCE * 2, stream.read_to_string(&mut response))
        .await
        .ok()?
        .ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Some((code, body))
}

/// How long tests wait for the operator to react.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Waits (up to 30 s: a reload may compile a guest in a debug build) until a record of
/// `journal` satisfies `check`, and returns it.
///
/// # Panics
/// When none does: with `what` and the journal's last records.
pub async fn wait_record(
    journal: &kapsel_host::Journal,
    what: &str,
    check: impl Fn(&Record) -> bool,
) -> Record {
    let mut found = None;
    let waited = journal
        .wait_for(Duration::from_secs(30), |records| {
            found = records.iter().find(|r| check(r)).cloned();
            found.is_some()
        })
        .await;
    match waited {
        Ok(()) => found.expect("the record the wait ended with"),
        Err(records) => {
            let tail = &records[records.len().saturating_sub(40)..];
            panic!("{what}: never happened; the last records:\n{tail:#?}")
        }
    }
}

/// Guest log lines (messages) of one guest, in order.
pub fn guest_logs(records: &[Record], guest: &str) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::GuestLog {
                guest: g, message, ..
            } if g == guest => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Calls of one handler: (object, event type).
pub fn calls(records: &[Record], handler: &str) -> Vec<(String, Option<String>)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerCalled {
                handler: h,
                object,
                event_type,
                ..
            } if h == handler => Some((object.clone(), event_type.clone())),
            _ => None,
        })
        .collect()
}

/// Asserts how often each handler was called for `object` (`namespace/name`).
///
/// # Panics
/// When a count differs, naming the handler.
pub fn assert_calls(records: &[Record], object: &str, expected: &[(&str, usize)]) {
    for (handler, n) in expected {
        assert_eq!(
            calls_for(records, handler, object),
            *n,
            "calls of {handler} for {object}"
        );
    }
}

/// Calls of one handler for one object (`namespace/name`).
pub fn calls_for(records: &[Record], handler: &str, object: &str) -> usize {
    calls(records, handler)
        .iter()
        .filter(|(o, _)| o == object)
        .count()
}

/// Creates a namespace.
///
/// # Panics
/// When the API server refuses it.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    create(
        client,
        &core("Namespace", "namespaces"),
        None,
        serde_json::json!({"metadata": {"name": name}}),
    )
    .await;
}

/// Merge-patches an object's `/status` subresource.
///
/// # Panics
/// When the API server refuses it.
pub async fn patch_status(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    patch: Value,
) {
    api(client, resource, namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch status");
}

/// A kopfexample opting into the `changes` guest's handler groups (`kapsel.test/<group>`
/// labels), with more labels, annotations and a spec.
pub fn kopfexample(
    name: &str,
    groups: &[&str],
    labels: Value,
    annotations: Value,
    spec: Value,
) -> Value {
    let mut all_labels = serde_json::Map::new();
    for group in groups {
        all_labels.insert(format!("kapsel.test/{group}"), Value::from("yes"));
    }
    if let Value::Object(more) = labels {
        all_labels.extend(more);
    }
    let mut metadata = serde_json::json!({"name": name, "labels": all_labels});
    if annotations.as_object().is_some_and(|a| !a.is_empty()) {
        metadata["annotations"] = annotations;
    }
    serde_json::json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": metadata,
        "spec": spec,
    })
}

/// A fresh cluster with the kopfexamples CRD, one namespace, and a [`Tracker`] on it:
/// the stage of a change-handling test.
pub struct Scene {
    /// The cluster (one per test).
    pub cluster: kapsel_host::testing::Cluster,
    /// A client of it.
    pub client: kube::Client,
    /// The namespace the test's objects live in.
    pub namespace: String,
    /// Every version of those objects.
    pub tracker: Tracker,
}

impl Scene {
    /// Starts a cluster with the CRD and the namespace.
    ///
    /// # Panics
    /// When the cluster cannot start.
    pub async fn start(namespace: &str) -> Scene {
        Scene::start_with(namespace, kapsel_host::testing::ServerConfig::default()).await
    }

    /// Starts a cluster served as `config` says, with the CRD and the namespace.
    ///
    /// # Panics
    /// When the cluster cannot start.
    pub async fn start_with(namespace: &str, config: kapsel_host::testing::ServerConfig) -> Scene {
        Scene::start_with_crd(namespace, config, manifest("kopfexamples-crd.yaml")).await
    }

    /// Starts a cluster served as `config` says, with `crd` (a kopfexamples CRD of
    /// another shape) and the namespace.
    ///
    /// # Panics
    /// When the cluster cannot start or refuses the CRD.
    pub async fn start_with_crd(
        namespace: &str,
        config: kapsel_host::testing::ServerConfig,
        crd: Value,
    ) -> Scene {
        let cluster = kapsel_host::testing::Cluster::start_with(config)
            .await
            .expect("cluster");
        let client = cluster.client();
        create(&client, &crds(), None, crd).await;
        create_namespace(&client, namespace).await;
        let tracker = Tracker::start(&client, namespace).await;
        Scene {
            cluster,
            client,
            namespace: namespace.to_owned(),
            tracker,
        }
    }

    /// Starts an operator with the `changes` guest.
    pub fn operator(&self) -> kapsel_host::testing::RunningOperator {
        self.cluster.start_operator(changes_operator())
    }

    /// Starts an operator with the `changes` guest on handler time: retry delays and
    /// backoffs pass only when the test advances it.
    pub fn operator_on_handler_time(&self) -> kapsel_host::testing::RunningOperator {
        self.cluster
            .start_operator_on_handler_time(changes_operator())
    }

    /// `namespace/name`, as the journal names objects.
    pub fn object(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    /// Creates a kopfexample in the namespace.
    pub async fn create(&self, body: Value) {
        create(&self.client, &kopfexamples(), Some(&self.namespace), body).await;
    }

    /// Merge-patches a kopfexample.
    pub async fn patch(&self, name: &str, body: Value) {
        patch(
            &self.client,
            &kopfexamples(),
            Some(&self.namespace),
            name,
            body,
        )
        .await;
    }

    /// Merge-patches a kopfexample's status.
    pub async fn patch_status(&self, name: &str, body: Value) {
        patch_status(
            &self.client,
            &kopfexamples(),
            Some(&self.namespace),
            name,
            body,
        )
        .await;
    }

    /// Deletes a kopfexample.
    pub async fn delete(&self, name: &str) {
        delete(&self.client, &kopfexamples(), Some(&self.namespace), name).await;
    }

    /// The Kubernetes Events about an object.
    ///
    /// # Panics
    /// When events cannot be listed.
    pub async fn events_about(&self, name: &str) -> Vec<Value> {
        let events: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &core("Event", "events"),
        );
        events
            .list(&Default::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .map(|e| serde_json::to_value(e).expect("json"))
            .filter(|e| e["involvedObject"]["name"] == name)
            .collect()
    }

    /// The Warning Events about an object with `reason`, once there is one (Events are
    /// posted in the background), or none after [`PATIENCE`].
    pub async fn warnings_about(&self, name: &str, reason: &str) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let found: Vec<Value> = self
                .events_about(name)
                .await
                .into_iter()
                .filter(|e| e["type"] == "Warning" && e["reason"] == reason)
                .collect();
            if !found.is_empty() || tokio::time::Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Waits until `operator` has processed the latest version the tracker saw of each
    /// of these objects and has nothing left to do: what has not happened by then does
    /// not happen until the next event (or until handler time brings a retry or a timer).
    /// The proof that something does NOT happen, without a wall-clock window.
    ///
    /// # Panics
    /// When the operator does not settle (see [`RunningOperator::settle`]).
    ///
    /// [`RunningOperator::settle`]: kapsel_host::testing::RunningOperator::settle
    pub async fn settled(&self, operator: &kapsel_host::testing::RunningOperator, names: &[&str]) {
        let latest: Vec<Value> = names
            .iter()
            .filter_map(|name| self.tracker.latest(name).map(|seen| seen.body))
            .collect();
        if let Err(error) = operator.settle(&latest).await {
            let dumps: Vec<String> = names
                .iter()
                .map(|n| format!("{n}:\n{}", self.tracker.dump(n)))
                .collect();
            panic!("{error}; versions seen:\n{}", dumps.join("\n"));
        }
    }

    /// Waits until the API server has answered every fault injected into it.
    ///
    /// # Panics
    /// When one is still unanswered after [`PATIENCE`].
    pub async fn faults_served(&self) {
        let faults = self.cluster.server().faults();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while faults.unserved() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the fault was never served"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Creates kopfexample `name` in `group` (spec `field: value`) with the next patch of
    /// a kopfexample answered `fault`, and waits until that answer went out. For a group
    /// without a finalizer, that patch is the creation cycle's merge-patch.
    ///
    /// # Panics
    /// As [`Scene::create`] and [`Scene::faults_served`].
    pub async fn create_with_a_failing_patch(
        &self,
        name: &str,
        group: &str,
        fault: kapsel_host::testing::Fault,
    ) {
        self.cluster.server().faults().fail_next(
            1,
            kapsel_host::testing::RequestMatcher::any()
                .verb("patch")
                .plural("kopfexamples"),
            fault,
        );
        self.create(kopfexample(
            name,
            &[group],
            serde_json::json!({}),
            serde_json::json!({}),
            serde_json::json!({"field": "value"}),
        ))
        .await;
        self.faults_served().await;
    }

    /// Stops the cluster.
    ///
    /// # Panics
    /// When it does not stop cleanly.
    pub async fn shutdown(self) {
        drop(self.tracker);
        self.cluster.shutdown().await.expect("shutdown");
    }
}

/// How each call of a handler for an object ended (`success`, `retry`, `failure`,
/// `ignored`), with the sandbox fault if any, in order.
pub fn outcomes(records: &[Record], handler: &str, object: &str) -> Vec<(String, Option<String>)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFinished {
                handler: h,
                object: Some(o),
                outcome,
                fault,
                ..
            } if h == handler && o == object => Some((outcome.clone(), fault.clone())),
            _ => None,
        })
        .collect()
}
