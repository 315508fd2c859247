//! Request counts: `ApiServer::request_counts` and `GET /metrics` by client, verb,
//! resource and code.

use super::*;
use serde_json::json;

#[tokio::test]
async fn requests_are_counted_by_client_verb_resource_and_code() {
    let (server, _client) = start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let agent = [("User-Agent", "bench/1.0 (test)")];
    let body = json!({"metadata": {"name": "a"}}).to_string();
    for code in [201, 409] {
        let r = raw_with(
            &server,
            "POST",
            cms,
            Some("application/json"),
            &agent,
            body.as_bytes(),
        )
        .await;
        assert_eq!(r.code, code, "{}", r.body);
    }
    let r = raw_with(
        &server,
        "GET",
        &format!("{cms}?watch=1&timeoutSeconds=1"),
        None,
        &agent,
        b"",
    )
    .await;
    assert_eq!(r.code, 200);
    let counted = |verb: &str, code: u16| {
        server
            .request_counts()
            .iter()
            .filter(|c| {
                c.kind.client == "bench"
                    && c.kind.verb == verb
                    && c.kind.resource == "configmaps"
                    && c.kind.code == code
            })
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!((counted("create", 201), counted("create", 409)), (1, 1));
    assert_eq!(counted("watch", 200), 1);

    let metrics = get(&server, "/metrics").await;
    assert_eq!(metrics.code, 200);
    assert!(
        metrics.body.contains(
            "apiserver_request_total{client=\"bench\",verb=\"create\",group=\"\",\
             resource=\"configmaps\",subresource=\"\",code=\"409\"} 1"
        ),
        "{}",
        metrics.body
    );
    // Reading the counts is not counted.
    assert!(
        !server.request_counts().iter().any(|c| c.kind.verb == "get"
            && c.kind.resource.is_empty()
            && c.kind.client.is_empty())
    );
}
