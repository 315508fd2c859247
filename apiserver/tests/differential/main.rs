//! The dev cluster measured against a real kube-apiserver: every check's requests sent to
//! both, their answers normalised and compared; each difference must be listed, with its
//! reason, in known-differences.toml, and each listed one must still differ.
//!
//! Not part of `make test`: `make test-real` builds and starts a real kube-apiserver on
//! etcd (scripts/real-apiserver) and runs this with KAPSEL_REAL_KUBECONFIG set.
//! KAPSEL_DIFF_CHECKS=name,name runs only those checks; every run writes both transcripts
//! of each check under the target folder (the path is printed).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test by panicking"
)]

mod checks;
mod compare;
mod fixtures;
mod known;
mod normalise;
mod run;
mod server;

use compare::Difference;
use run::{Run, request};
use serde_json::{Value, json};
use server::Server;
use std::collections::BTreeSet;

/// What became of the checks, for the summary.
#[derive(Default)]
struct Tally {
    checks: usize,
    same: usize,
    known: usize,
    new: Vec<String>,
    stale: Vec<String>,
}

#[tokio::test]
#[ignore = "needs a real kube-apiserver: `make test-real` runs it"]
async fn the_dev_cluster_answers_as_kube_apiserver_does() {
    let path = std::env::var("KAPSEL_REAL_KUBECONFIG").expect(
        "KAPSEL_REAL_KUBECONFIG must name the kubeconfig of a real kube-apiserver \
         (`make test-real` starts one with scripts/real-apiserver)",
    );
    let yaml = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let real = Server::from_kubeconfig(&yaml).await;
    let dev_server = kapsel_apiserver::ApiServer::start(kapsel_apiserver::Config::default())
        .await
        .expect("the dev cluster starts");
    let dev = Server::from_kubeconfig(&dev_server.kubeconfig()).await;
    let known = known::load();
    let only: Option<BTreeSet<String>> = std::env::var("KAPSEL_DIFF_CHECKS")
        .ok()
        .map(|names| names.split(',').map(str::to_string).collect());
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential");
    std::fs::create_dir_all(&out).expect("the transcripts' folder");
    let token = token();
    let mut tally = Tally::default();
    for check in checks::ALL {
        if only.as_ref().is_some_and(|o| !o.contains(check.name)) {
            continue;
        }
        let real_steps = transcript(check, &real, &token).await;
        let dev_steps = transcript(check, &dev, &token).await;
        for (side, steps) in [("real", &real_steps), ("dev", &dev_steps)] {
            let file = out.join(format!("{}.{side}.json", check.name));
            let text = serde_json::to_string_pretty(steps).expect("JSON");
            std::fs::write(&file, text).expect("a transcript");
        }
        let differences = compare::transcripts(&real_steps, &dev_steps);
        judge(check.name, &differences, &known, &mut tally);
    }
    for check in known.keys() {
        if !checks::ALL.iter().any(|c| c.name == check) {
            tally
                .stale
                .push(format!("{check}: listed, but there is no such check"));
        }
    }
    println!(
        "differential: {} checks run, {} the same, {} known differences, {} new differences, {} listed but no longer different (transcripts: {})",
        tally.checks,
        tally.same,
        tally.known,
        tally.new.len(),
        tally.stale.len(),
        out.display()
    );
    let failures: Vec<&String> = tally.new.iter().chain(&tally.stale).collect();
    assert!(
        failures.is_empty(),
        "the dev cluster differs from kube-apiserver where known-differences.toml does not say so, or no longer differs where it says so:\n{}",
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A run's token: names of this run (CRD groups, namespaces) on a real server that may
/// have served earlier runs.
fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_nanos();
    format!("r{:x}", nanos % 0xff_ffff_ffff)
}

/// One check on one server, in a namespace of its own.
async fn transcript(check: &checks::Check, server: &Server, token: &str) -> Vec<Value> {
    let ns = format!("{}-{token}", check.name);
    let mut run = Run::new(server.clone(), ns.clone(), token.to_string());
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    let made = run
        .quietly(&request(
            "POST",
            "/api/v1/namespaces",
            Some("application/json"),
            Some(&namespace),
        ))
        .await;
    assert_eq!(made.status, 201, "setup: namespace {ns}: {}", made.body);
    (check.run)(&mut run).await;
    run.into_steps()
}

/// Sorts one check's differences into known and new, and the listed ones it no longer
/// has into stale; prints each.
fn judge(check: &str, differences: &[Difference], known: &known::Known, tally: &mut Tally) {
    tally.checks += 1;
    let listed = known.get(check).cloned().unwrap_or_default();
    let found: BTreeSet<&str> = differences.iter().map(|d| d.at.as_str()).collect();
    if differences.is_empty() && listed.is_empty() {
        tally.same += 1;
        println!("same   {check}");
    }
    for difference in differences {
        if listed.contains(&difference.at) {
            tally.known += 1;
            println!("known  {check} | {}", difference.at);
        } else {
            let line = format!(
                "{check} | {}\n    real: {}\n    dev:  {}",
                difference.at,
                shown(difference.real.as_ref()),
                shown(difference.dev.as_ref())
            );
            println!("NEW    {line}");
            tally.new.push(line);
        }
    }
    for at in listed.iter().filter(|at| !found.contains(at.as_str())) {
        let line = format!("{check} | {at}: listed, but both servers answer the same now");
        println!("STALE  {line}");
        tally.stale.push(line);
    }
}

/// A value as printed in a difference: compact JSON, cut at 400 characters.
fn shown(value: Option<&Value>) -> String {
    let text = value.map_or_else(|| "(nothing)".to_string(), Value::to_string);
    if text.len() > 400 {
        let cut = text.char_indices().nth(400).map_or(text.len(), |(i, _)| i);
        format!("{}…", &text[..cut])
    } else {
        text
    }
}
