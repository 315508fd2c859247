//! The cluster of one run: `kapsel dev-cluster` as a subprocess (so that its CPU and
//! memory are its own), the bench's client to it (user agent `kapsel-bench`, so its
//! requests are told from the operator's), the CRD and namespaces, and the server's
//! request counts (`GET /metrics`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http::{HeaderValue, header};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;

use crate::procs::{Launch, Proc};

/// The bench's user agent: its requests are counted under the client `kapsel-bench`.
pub(crate) const BENCH_CLIENT: &str = "kapsel-bench";

/// The CRD both operators serve.
const CRD: &str = include_str!("../../examples/manifests/kopfexamples-crd.yaml");

/// How many namespaces the objects are spread over.
pub(crate) const NAMESPACES: usize = 10;

/// `kopfexamples.kopf.dev/v1`.
pub(crate) fn kopfexamples() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample"),
        "kopfexamples",
    )
}

/// `pods/v1`.
pub(crate) fn pods() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
}

/// The name of the `i`th namespace.
pub(crate) fn namespace(i: usize) -> String {
    format!("bench-{}", i % NAMESPACES)
}

/// A running dev cluster.
pub(crate) struct Cluster {
    pub(crate) server: Proc,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) client: kube::Client,
}

impl Cluster {
    /// Starts `kapsel dev-cluster` on a free port, writing its kubeconfig into `dir`,
    /// and waits until it answers.
    pub(crate) async fn start(kapsel: &Path, dir: &Path) -> Result<Cluster, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let kubeconfig = dir.join("kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let launch = Launch {
            program: kapsel.to_owned(),
            args: vec![
                "dev-cluster".into(),
                "--port".into(),
                "0".into(),
                "--kubeconfig".into(),
                kubeconfig.display().to_string(),
            ],
            env: vec![],
            marks: vec![],
        };
        let mut server = Proc::spawn(
            "the API server (kapsel dev-cluster)",
            &launch,
            &dir.join("apiserver.log"),
        )
        .await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            server.check_alive()?;
            if let Ok(client) = client_for(&kubeconfig).await
                && client.apiserver_version().await.is_ok()
            {
                break client;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "timed out after 30 s waiting for the API server to serve; see {}",
                    server.log.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Ok(Cluster {
            server,
            kubeconfig,
            client,
        })
    }

    /// Creates the kopfexamples CRD and the namespaces, and waits until the resource is
    /// served.
    pub(crate) async fn prepare(&self) -> Result<(), String> {
        let crd: DynamicObject =
            serde_yaml::from_str(CRD).map_err(|e| format!("the CRD does not parse: {e}"))?;
        let crds = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        );
        Api::<DynamicObject>::all_with(self.client.clone(), &crds)
            .create(&PostParams::default(), &crd)
            .await
            .map_err(|e| format!("cannot create the CRD: {e}"))?;
        let namespaces = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("", "v1", "Namespace"),
            "namespaces",
        );
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &namespaces);
        for i in 0..NAMESPACES {
            let ns = DynamicObject::new(&namespace(i), &namespaces);
            api.create(&PostParams::default(), &ns)
                .await
                .map_err(|e| format!("cannot create the namespace {}: {e}", namespace(i)))?;
        }
        let kex = Api::<DynamicObject>::all_with(self.client.clone(), &kopfexamples());
        let deadline = Instant::now() + Duration::from_secs(30);
        while kex.list(&Default::default()).await.is_err() {
            if Instant::now() > deadline {
                return Err("timed out after 30 s waiting for kopfexamples to be served".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// The server's request counts now.
    pub(crate) async fn counts(&self) -> Result<Counts, String> {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| format!("cannot read the API server's /metrics: {e}"))?;
        Ok(Counts::parse(&text))
    }

    /// Stops the server.
    pub(crate) async fn stop(self) {
        self.server.stop().await;
    }
}

/// A kube client for a kubeconfig, with the bench's user agent.
pub(crate) async fn client_for(kubeconfig: &Path) -> Result<kube::Client, String> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let mut config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    config.headers.push((
        header::USER_AGENT,
        HeaderValue::from_static(concat!("kapsel-bench/", env!("CARGO_PKG_VERSION"))),
    ));
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// One line of the server's `apiserver_request_total`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct CountKey {
    pub(crate) client: String,
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) code: String,
}

impl CountKey {
    /// `patch kopfexamples/status`, `create events`, `get (discovery)`.
    pub(crate) fn what(&self) -> String {
        let resource = match (self.resource.as_str(), self.subresource.as_str()) {
            ("", _) => "(discovery)".to_owned(),
            (r, "") => r.to_owned(),
            (r, s) => format!("{r}/{s}"),
        };
        format!("{} {resource}", self.verb)
    }
}

/// The server's request counts at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Counts(pub(crate) BTreeMap<CountKey, u64>);

impl Counts {
    /// Parses the Prometheus text of `/metrics` (other metrics are ignored).
    pub(crate) fn parse(text: &str) -> Counts {
        let mut counts = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<u64>() else {
                continue;
            };
            let labels = parse_labels(labels);
            let label = |name: &str| labels.get(name).cloned().unwrap_or_default();
            let key = CountKey {
                client: label("client"),
                verb: label("verb"),
                group: label("group"),
                resource: label("resource"),
                subresource: label("subresource"),
                code: label("code"),
            };
            *counts.entry(key).or_insert(0) += value;
        }
        Counts(counts)
    }

    /// What happened between `earlier` and `self`.
    pub(crate) fn since(&self, earlier: &Counts) -> Counts {
        Counts(
            self.0
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v - earlier.0.get(k).copied().unwrap_or(0).min(*v),
                    )
                })
                .filter(|(_, v)| *v > 0)
                .collect(),
        )
    }

    /// The requests of everybody but the bench (the operator under test).
    pub(crate) fn operator(&self) -> Counts {
        Counts(
            self.0
                .iter()
                .filter(|(k, _)| k.client != BENCH_CLIENT)
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        )
    }

    /// All requests.
    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Requests by verb.
    pub(crate) fn by_verb(&self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        for (k, v) in &self.0 {
            *by.entry(k.verb.clone()).or_insert(0) += v;
        }
        by
    }

    /// Requests by verb and resource (`patch kopfexamples/status`).
    pub(crate) fn by_what(&self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        for (k, v) in &self.0 {
            *by.entry(k.what()).or_insert(0) += v;
        }
        by
    }

    /// Answers that were errors (code ≥ 400), by code and what.
    pub(crate) fn failures(&self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        for (k, v) in &self.0 {
            if k.code.parse::<u16>().is_ok_and(|c| c >= 400) {
                *by.entry(format!("{} {}", k.code, k.what())).or_insert(0) += v;
            }
        }
        by
    }

    /// Whether a client other than the bench has a watch open on `resource`.
    pub(crate) fn operator_watches(&self, resource: &str) -> bool {
        self.0.keys().any(|k| {
            k.client != BENCH_CLIENT
                && k.verb == "watch"
                && k.resource == resource
                && k.code == "200"
        })
    }

    /// The clients seen.
    pub(crate) fn clients(&self) -> Vec<String> {
        let mut clients: Vec<String> = self.0.keys().map(|k| k.client.clone()).collect();
        clients.dedup();
        clients
    }
}

/// `a="x",b="y\"z"` → {a: x, b: y"z}.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if name.is_empty() || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(name.trim_start_matches(',').trim().to_owned(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# HELP apiserver_request_total Requests.\n\
        # TYPE apiserver_request_total counter\n\
        apiserver_request_total{client=\"kopf\",verb=\"patch\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"\",code=\"200\"} 7\n\
        apiserver_request_total{client=\"kopf\",verb=\"watch\",group=\"\",resource=\"pods\",subresource=\"\",code=\"200\"} 1\n\
        apiserver_request_total{client=\"kopf\",verb=\"patch\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"status\",code=\"409\"} 2\n\
        apiserver_request_total{client=\"kapsel-bench\",verb=\"create\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"\",code=\"201\"} 10\n\
        apiserver_request_total{client=\"odd \\\"one\\\"\",verb=\"get\",group=\"\",resource=\"\",subresource=\"\",code=\"200\"} 3\n";

    #[test]
    fn metrics_parse_into_counts_by_client_verb_and_resource() {
        let counts = Counts::parse(METRICS);
        assert_eq!(counts.total(), 23);
        let operator = counts.operator();
        assert_eq!(operator.total(), 13);
        assert_eq!(operator.by_verb()["patch"], 9);
        assert_eq!(operator.by_what()["patch kopfexamples/status"], 2);
        assert_eq!(operator.by_what()["get (discovery)"], 3);
        assert_eq!(operator.failures()["409 patch kopfexamples/status"], 2);
        assert!(counts.operator_watches("pods"));
        assert!(!counts.operator_watches("kopfexamples"));
        assert!(counts.clients().contains(&"odd \"one\"".to_owned()));
    }

    #[test]
    fn counts_since_an_earlier_snapshot() {
        let later = Counts::parse(METRICS);
        let earlier = Counts::parse(
            "apiserver_request_total{client=\"kopf\",verb=\"patch\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"\",code=\"200\"} 5\n",
        );
        let delta = later.since(&earlier);
        assert_eq!(delta.operator().by_verb()["patch"], 4);
        assert_eq!(delta.total(), 18);
    }
}
