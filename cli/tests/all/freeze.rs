//! `kapsel freeze` and `kapsel resume`, as the real binary runs them against
//! `kapsel dev-cluster`: the peer record Kopf's `kopf freeze` writes, then its
//! removal; a missing peering object fails with exit code 1.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use crate::support::{DevCluster, scratch};

#[test]
fn freeze_writes_a_kopf_peer_record_and_resume_removes_it() {
    let cluster = DevCluster::start(&scratch("freeze"));
    cluster.with_peering();

    let frozen = cluster.kapsel(&[
        "freeze",
        "-A",
        "-P",
        "default",
        "-t",
        "300",
        "-i",
        "admin",
        "-m",
        "maintenance",
    ]);
    assert!(frozen.status.success(), "{frozen:?}");
    let status = cluster.peers();
    let record = &status["admin"];
    assert_eq!(record["priority"], 100, "Kopf's default: {status}");
    assert_eq!(record["lifetime"], 300, "{status}");
    assert!(record["lastseen"].is_string(), "{status}");

    let dev = cluster.kapsel(&[
        "freeze",
        "-A",
        "--peering",
        "default",
        "--lifetime",
        "60",
        "--dev",
    ]);
    assert!(dev.status.success(), "{dev:?}");
    let status = cluster.peers();
    let status = status.as_object().unwrap();
    let manual = status
        .iter()
        .find(|(id, _)| *id != "admin")
        .map(|(id, record)| (id.clone(), record["priority"].clone()));
    let (identity, priority) = manual.unwrap();
    assert!(
        identity.contains('@') && !identity.contains('/'),
        "a manual identity is user@host: {identity}"
    );
    assert_eq!(priority, 666);

    let resumed = cluster.kapsel(&["resume", "-A", "-P", "default", "-i", "admin"]);
    assert!(resumed.status.success(), "{resumed:?}");
    let status = cluster.peers();
    assert!(status.get("admin").is_none(), "{status}");
    assert!(status.get(&identity).is_some(), "{status}");

    let missing = cluster.kapsel(&["freeze", "-A", "-P", "nowhere", "-t", "60"]);
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    let stdout = String::from_utf8_lossy(&missing.stdout);
    assert!(
        stderr.contains("'nowhere'") || stdout.contains("'nowhere'"),
        "{stderr}{stdout}"
    );

    let usage = cluster.kapsel(&["freeze", "-A", "-P", "default"]);
    assert_eq!(usage.status.code(), Some(2), "--lifetime is required");
}
