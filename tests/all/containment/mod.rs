//! Containment (SECURITY.md): a hostile guest (`tests/guests/hostile`) attacks the host
//! while a well-behaved one (`tests/guests/polite`) keeps working. Each test asserts the
//! bound that holds the attack, that the polite handler's latency stays within
//! [`LATENCY_FACTOR`] of its baseline measured in the same test (or [`LATENCY_FLOOR`],
//! whichever is larger: a loaded 2-core machine jitters by more than a few
//! milliseconds), that the host's RSS grows by less than a stated ceiling, and that the
//! operator stays healthy.
//!
//! The operator runs in this process, so `/proc/self/status` is its RSS (other tests
//! running beside these add to it: the ceilings leave room for that).
//!
//! Each test prints the figures it asserts on as one line per attack, starting with
//! `containment-figure` (see [`Figure`]): run with `--nocapture` and grep for it.

mod cpu;
mod events;
mod memory;
mod permissions;
mod traffic;

use std::time::{Duration, Instant};

use kapsel_host::testing::{Cluster, RunningOperator};
use kapsel_host::{Journal, Limits, Operator, Record};
use kapsel_tests::*;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

/// How much slower the polite handler may be under attack than at baseline.
pub(crate) const LATENCY_FACTOR: u32 = 25;
/// The latency the polite handler may always have under attack.
pub(crate) const LATENCY_FLOOR: Duration = Duration::from_millis(1500);

/// The limits of the tests: short deadlines and small caps, so that attacks end fast.
pub(crate) fn test_limits() -> Limits {
    let mut limits = Limits::default();
    limits.call_deadline = Duration::from_millis(1000);
    // The hostile daemon declares a minute: a daemon's budget is for its work, not its
    // sleeps, and it must outlive the tests.
    limits.max_call_deadline = Duration::from_secs(60);
    limits.call_memory_mib = 16;
    limits.max_call_memory_mib = 64;
    limits.call_slots = 8;
    limits.background_slots = 8;
    limits
}

/// The resident set of this process, in MiB.
pub(crate) fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib / 1024)
        .expect("a VmRSS line")
}

/// One HTTP/1.1 GET: the status code and the body; `None` while nothing listens.
async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    kapsel_tests::http("GET", &format!("http://127.0.0.1:{port}{path}")).await
}

/// Waits until a guest is refused at load; every refusal as `path: error`.
pub(crate) async fn refused_at_load(journal: &Journal, what: &str) -> Vec<String> {
    journal
        .wait_for(PATIENCE, |records| {
            records
                .iter()
                .any(|r| matches!(r, Record::GuestRejected { .. }))
        })
        .await
        .unwrap_or_else(|_| panic!("{what}"));
    journal
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::GuestRejected { path, error } => Some(format!("{path}: {error}")),
            _ => None,
        })
        .collect()
}

/// A cluster, and an operator of the given guests with liveness and metrics served.
pub(crate) struct Stage {
    pub(crate) cluster: Cluster,
    pub(crate) client: kube::Client,
    pub(crate) operator: RunningOperator,
    pub(crate) journal: Journal,
    port: u16,
}

impl Stage {
    /// Starts the operator of `guests` with `limits` (on `namespaces`, or all), and waits
    /// until it serves liveness.
    pub(crate) async fn start(guests: &[&str], limits: Limits, namespaces: &[&str]) -> Stage {
        let cluster = Cluster::start().await.expect("cluster");
        Stage::start_on(cluster, guests, limits, namespaces).await
    }

    /// As [`Stage::start`], on a cluster prepared already.
    pub(crate) async fn start_on(
        cluster: Cluster,
        guests: &[&str],
        limits: Limits,
        namespaces: &[&str],
    ) -> Stage {
        let client = cluster.client();
        let port = free_port();
        let mut operator = Operator::new(guests.iter().map(|name| guest(name)))
            .limits(limits)
            .liveness(format!("http://127.0.0.1:{port}/healthz"));
        if !namespaces.is_empty() {
            operator = operator.namespaces(namespaces.iter().copied());
        }
        let operator = cluster.start_operator(operator);
        let journal = operator.journal().clone();
        let stage = Stage {
            cluster,
            client,
            operator,
            journal,
            port,
        };
        // Compiling the guests takes seconds on a loaded machine.
        let deadline = Instant::now() + PATIENCE * 3;
        while http_get(stage.port, "/healthz").await.is_none() {
            assert!(Instant::now() < deadline, "liveness is never served");
            assert!(!stage.operator.is_finished(), "the operator stopped");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stage
    }

    /// `/healthz`: its status code and body, and how long it took to answer.
    pub(crate) async fn health(&self) -> (u16, String, Duration) {
        let started = Instant::now();
        let (code, body) = http_get(self.port, "/healthz")
            .await
            .expect("liveness answers");
        (code, body, started.elapsed())
    }

    /// Asserts that liveness answers 200.
    pub(crate) async fn assert_healthy(&self) {
        let (code, body, _) = self.health().await;
        assert_eq!(code, 200, "liveness: {body}");
        assert!(!self.operator.is_finished(), "the operator stopped");
    }

    /// The metrics, as served.
    pub(crate) async fn metrics(&self) -> String {
        http_get(self.port, "/metrics").await.expect("metrics").1
    }

    /// Creates a ConfigMap in `default` with these labels.
    pub(crate) async fn configmap(&self, name: &str, labels: Value) {
        create(
            &self.client,
            &core("ConfigMap", "configmaps"),
            Some("default"),
            configmap(name, labels),
        )
        .await;
    }

    /// Creates a ConfigMap that the hostile guest attacks with `attack`.
    pub(crate) async fn attack(&self, name: &str, attack: &str) {
        self.configmap(name, json!({"kapsel.test/hostile": attack}))
            .await;
    }

    /// How long the polite handler takes to handle a new ConfigMap, from its creation to
    /// the end of the call.
    pub(crate) async fn polite_latency(&self, name: &str) -> Duration {
        let started = Instant::now();
        self.configmap(name, json!({"kapsel.test/polite": "yes"}))
            .await;
        let object = format!("default/{name}");
        self.journal
            .wait_for(PATIENCE * 6, |records| {
                outcomes(records, "polite", &object)
                    .iter()
                    .any(|(outcome, _)| outcome == "success")
            })
            .await
            .unwrap_or_else(|_| panic!("the polite handler never handled {object}"));
        started.elapsed()
    }

    /// The polite handler's baseline latency: the median of five.
    pub(crate) async fn baseline(&self) -> Duration {
        let mut samples = Vec::new();
        for i in 0..5 {
            samples.push(self.polite_latency(&format!("baseline-{i}")).await);
        }
        samples.sort();
        samples[2]
    }

    /// Asserts the polite handler is still about as fast as at `baseline`; returns the
    /// latency measured.
    pub(crate) async fn assert_polite(&self, name: &str, baseline: Duration) -> Duration {
        let latency = self.polite_latency(name).await;
        let allowed = (baseline * LATENCY_FACTOR).max(LATENCY_FLOOR);
        assert!(
            latency <= allowed,
            "the polite handler took {latency:?} under attack (baseline {baseline:?}, \
             allowed {allowed:?})"
        );
        latency
    }

    /// Waits until a call of `handler` about `default/<name>` failed, and returns the
    /// logged failure.
    pub(crate) async fn failure_of(&self, handler: &str, name: &str) -> String {
        let object = format!("default/{name}");
        let found = |records: &[Record]| {
            records.iter().find_map(|record| match record {
                Record::HandlerFailed {
                    handler: h,
                    object: o,
                    error,
                    ..
                } if h == handler && *o == object => Some(error.clone()),
                _ => None,
            })
        };
        self.journal
            .wait_for(PATIENCE * 3, |records| found(records).is_some())
            .await
            .unwrap_or_else(|_| panic!("{handler} never failed for {object}"));
        found(&self.journal.records()).unwrap_or_default()
    }

    /// Stops the operator (it must stop cleanly) and the cluster.
    pub(crate) async fn stop(self) {
        self.operator.stop().await.expect("a clean stop");
        self.cluster.shutdown().await.expect("shutdown");
    }
}

/// One line of measured figures, printed to stderr as
/// `containment-figure attack=<attack> <key>=<value> ...`: the numbers a test asserts
/// on, for the notes that report them (values never contain spaces).
pub(crate) struct Figure {
    line: String,
}

impl Figure {
    pub(crate) fn new(attack: &str) -> Figure {
        Figure {
            line: format!("containment-figure attack={attack}"),
        }
    }

    /// Adds `key=value`.
    pub(crate) fn with(mut self, key: &str, value: impl std::fmt::Display) -> Figure {
        let value = value.to_string().replace(' ', "_");
        self.line.push_str(&format!(" {key}={value}"));
        self
    }

    /// Adds a duration in milliseconds, as `<key>_ms`.
    pub(crate) fn ms(self, key: &str, duration: Duration) -> Figure {
        self.with(&format!("{key}_ms"), duration.as_millis())
    }

    /// Adds the polite handler's latencies: at baseline, under attack (the slowest of
    /// `under`), their ratio and what was allowed.
    pub(crate) fn polite(self, baseline: Duration, under: &[Duration]) -> Figure {
        let slowest = under.iter().max().copied().unwrap_or_default();
        let factor = slowest.as_secs_f64() / baseline.as_secs_f64().max(1e-6);
        self.ms("polite_baseline", baseline)
            .ms("polite_under_attack", slowest)
            .with("factor", format!("{factor:.1}"))
            .ms(
                "polite_allowed",
                (baseline * LATENCY_FACTOR).max(LATENCY_FLOOR),
            )
    }

    pub(crate) fn print(self) {
        eprintln!("{}", self.line);
    }
}

/// Asserts that no Event with one of `reasons` exists, in any namespace, for a while:
/// Events go out in the background, so one let through may show up only after the
/// call that posted it ended.
pub(crate) async fn assert_no_events(client: &kube::Client, reasons: &[&str]) {
    let events = Api::<k8s_openapi::api::core::v1::Event>::all(client.clone());
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let found: Vec<String> = events
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref().is_some_and(|r| reasons.contains(&r)))
            .map(|e| format!("{:?}: {:?}", e.reason, e.involved_object))
            .collect();
        assert!(
            found.is_empty(),
            "{} Events went out: {found:?}",
            found.len()
        );
        if Instant::now() >= until {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The value of one sample (`name{labels}`) in a metrics text, if present.
pub(crate) fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}
