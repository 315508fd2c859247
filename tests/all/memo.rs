//! Kopf's operator-wide memo (KOPF.md §1.13, issue 32 item 6): what the embedding
//! application and the startup handlers leave in it reaches every object's handlers.

use kapsel_tests::*;
use serde_json::json;

#[tokio::test]
async fn startup_handlers_and_the_embedder_fill_the_memo_every_object_starts_from() {
    let s = Scene::start("memo").await;
    let operator = kapsel_host::Operator::new([guest("memo")]).memo(json!({"embedded": true}));
    let _operator = s.cluster.start_operator(operator);
    let labels = json!({"kapsel.test/memo": "yes"});
    s.create(kopfexample("obj", &[], labels, json!({}), json!({})))
        .await;
    let done = s
        .tracker
        .wait_for("obj", "remember's result", |b| {
            !status(b, "remember").is_null()
        })
        .await;
    assert_eq!(
        status(&done, "remember"),
        &json!({"embedded": true, "greeting": "hello", "count": 1}),
        "both startup handlers' keys, though they ran at once, and the embedder's"
    );
    s.shutdown().await;
}
