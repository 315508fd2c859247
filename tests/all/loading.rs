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

/// One handler called alone, as the operator calls it (the bench's invocation figures):
/// a fresh instance per call, what it hands back read; a handler the guest lacks and a
/// body that is no JSON are refused, saying which.
#[tokio::test]
async fn a_handler_is_called_alone_as_the_operator_calls_it() {
    use kapsel_host::{HandlerCall, HandlerReply, error_chain};
    let path = guest("bench_operator");
    let body = r#"{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{"name":"kex-1","namespace":"ns"}}"#;
    let call = HandlerCall::load(&path, "create_fn", body)
        .await
        .expect("loads");
    let created = HandlerReply {
        patch: Some(serde_json::json!({"status": {"phase": "Created"}})),
        result: serde_json::json!({"message": "created kex-1"}),
    };
    assert_eq!(call.call().await.expect("called"), created);
    assert_eq!(call.call().await.expect("called again"), created);

    let refusal = |result: Result<HandlerCall, kapsel_host::Error>| match result {
        Ok(_) => panic!("loaded"),
        Err(e) => error_chain(&e),
    };
    let missing = refusal(HandlerCall::load(&path, "nope", body).await);
    assert!(missing.contains("no handler \"nope\""), "{missing}");
    let broken = refusal(HandlerCall::load(&path, "create_fn", "{").await);
    assert!(broken.contains("the body is not JSON"), "{broken}");
}
