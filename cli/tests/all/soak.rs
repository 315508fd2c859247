//! A bounded soak (issue 16.5): rounds of creations, updates and deletions of many
//! objects through a `kapsel run` process, its resident memory sampled after every round
//! once the round has settled. Every object is handled, every deletion completes, no
//! object keeps state in the operator after its deletion, and memory does not grow from
//! round to round. `KAPSEL_SOAK_ROUNDS` and `KAPSEL_SOAK_OBJECTS` make it longer: with 20
//! rounds of 500 (10,000 objects, 30,000 writes in 174 s; debug build) the RSS after each
//! round stayed between 108.6 and 113.5 MiB, with no trend.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::time::Duration;

use crate::support::{PATIENCE, create_crd, guest, kopfexamples, start_operator_with};
use kapsel_host::testing::Cluster;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The resident set of a process, in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// One sample of the operator's own gauge from its metrics endpoint.
async fn gauge(url: &str, name: &str) -> Option<i64> {
    let (_, text) = kapsel_tests::http("GET", url).await?;
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .reduce(|a, b| a + b)
        .or(Some(0))
}

/// Waits until `done` holds for the list of kopfexamples, or panics saying `what`.
async fn until_all(
    api: &Api<DynamicObject>,
    what: &str,
    done: impl Fn(&[Value]) -> Result<(), String>,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE * 2;
    loop {
        let items: Vec<Value> = api
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect();
        let why = match done(&items) {
            Ok(()) => return,
            Err(why) => why,
        };
        assert!(tokio::time::Instant::now() < deadline, "{what}: {why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_of_churn_leave_nothing_behind_and_memory_flat() {
    let rounds = setting("KAPSEL_SOAK_ROUNDS", 6);
    let objects = setting("KAPSEL_SOAK_OBJECTS", 150);
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let dir = std::env::temp_dir().join(format!("kapsel-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server().kubeconfig()).unwrap();
    create_crd(&client).await;
    let port = kapsel_tests::free_port();
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let mut operator =
        start_operator_with(&kubeconfig, &guest("durable"), &["--metrics", &metrics]);
    let pid = operator.id();
    let api = kopfexamples(&client);
    let mut samples = Vec::new();
    for round in 0..rounds {
        for i in 0..objects {
            let object = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": format!("r{round}-{i}")}, "spec": {"field": "v0"}});
            let object = serde_json::from_value(object).unwrap();
            api.create(&PostParams::default(), &object).await.unwrap();
        }
        for i in 0..objects {
            let patch = json!({"spec": {"field": "v1"}});
            api.patch(
                &format!("r{round}-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
        until_all(
            &api,
            &format!("round {round}: every object handled"),
            |items| {
                // The update may land before the creation is handled: then the creation
                // handles v1 and there is no update to handle.
                let unhandled = |o: &&Value| {
                    let handled = if o["status"]["updated"].is_null() {
                        &o["status"]["created"]["field"]
                    } else {
                        &o["status"]["updated"]["field"]
                    };
                    handled != "v1"
                        || o["metadata"]["annotations"].as_object().is_some_and(|a| {
                            a.keys().any(|k| {
                                k.starts_with("kopf.zalando.org/")
                                    && !k.ends_with("/last-handled-configuration")
                            })
                        })
                };
                let pending = items.iter().filter(unhandled).count();
                let example = items.iter().find(unhandled).cloned().unwrap_or_default();
                if items.len() == objects && pending == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "{pending} of {} not handled, for example {example:#}",
                        items.len()
                    ))
                }
            },
        )
        .await;
        api.delete_collection(&Default::default(), &Default::default())
            .await
            .unwrap();
        until_all(
            &api,
            &format!("round {round}: every deletion completed"),
            |items| {
                if items.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{} objects left", items.len()))
                }
            },
        )
        .await;
        // The operator forgets an object when it sees it gone: wait for that, not a while.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let remembered = gauge(&metrics, "kapsel_objects_remembered").await;
            if remembered == Some(0) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: the operator still keeps state of {remembered:?} deleted objects"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        samples.push(rss_kib(pid));
    }
    operator.kill().unwrap();
    operator.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    cluster.shutdown().await.unwrap();

    let mib: Vec<String> = samples
        .iter()
        .map(|k| format!("{:.1}", *k as f64 / 1024.0))
        .collect();
    println!(
        "soak: {rounds} rounds of {objects} objects (created, updated, deleted); RSS after each round, MiB: {}",
        mib.join(" ")
    );
    // The first rounds warm up (allocator arenas, compiled code paged in); after them
    // memory must not grow with the work done: the last round within 10 % (and 4 MiB of
    // allocator slack) of the second.
    if let [_, second, .., last] = samples[..] {
        assert!(
            last <= second + second / 10 + 4096,
            "memory grows with the work done: RSS after each round (MiB): {}",
            mib.join(" ")
        );
    }
}
