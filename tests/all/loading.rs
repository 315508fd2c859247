//! Loading guests: a bad .wasm beside a good one is rejected, naming the file; the good one runs.

use kapsel_host::{Operator, Record, testing::Cluster};
use kapsel_tests::*;

#[tokio::test]
async fn a_bad_guest_beside_a_good_one() {
    let dir = std::env::temp_dir().join(format!("kapsel-loading-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(guest("seed"), dir.join("seed.wasm")).unwrap();
    std::fs::write(dir.join("broken.wasm"), b"\0asm this is not a component").unwrap();

    let cluster = Cluster::start().await.unwrap();
    create(
        &cluster.client(),
        &core("Pod", "pods"),
        Some("default"),
        pod("p"),
    )
    .await;
    let operator = cluster.start_operator(Operator::new([&dir]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| !calls(r, "log_event").is_empty())
        .await
        .expect("the good guest runs");
    let rejected: Vec<(String, String)> = journal
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::GuestRejected { path, error } => Some((path, error)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(rejected[0].0.ends_with("broken.wasm"), "{rejected:?}");
    assert!(
        rejected[0].1.contains("broken.wasm"),
        "the message names the file: {rejected:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn no_loadable_guest_is_an_error() {
    let dir = std::env::temp_dir().join(format!("kapsel-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("empty.wasm"), b"").unwrap();
    let cluster = Cluster::start().await.unwrap();
    let operator = cluster.start_operator(Operator::new([&dir]));
    let error = operator.stop().await.expect_err("nothing to run");
    assert!(error.to_string().contains("empty.wasm"), "{error}");
    cluster.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
