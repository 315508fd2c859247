//! Kubernetes calls from handlers (the WIT host's `get`, `list`, `create`, `patch`,
//! `delete`): a guest manages a child ConfigMap of its object within the permissions it
//! declared, and a call outside them is refused with 403 Forbidden.

use kapsel_cli::Runner;
use kapsel_host::testing::{Fault, RequestMatcher};
use kapsel_host::{Operator, Record};
use kapsel_tests::*;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

/// What the host answers a guest that gets a Secret without declaring it: the
/// declaration to add, ready to paste.
const SECRETS_REFUSED: &str = "guest 'kube_calls' did not declare permission to get \
    secrets.core; declare it with kapsel::permit!(\"v1\", \"secrets\", verbs = [\"get\"])";

fn kopfexample_of_size(name: &str, size: i64) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": name},
        "spec": {"size": size},
    })
}

#[tokio::test]
async fn handlers_manage_a_child_within_their_permissions() {
    let s = Scene::start("guest-api").await;
    let operator = s
        .cluster
        .start_operator(Operator::new([guest("kube_calls")]));
    let configmaps = |namespace: &str| -> Api<DynamicObject> {
        Api::namespaced_with(
            s.client.clone(),
            namespace,
            &core("ConfigMap", "configmaps"),
        )
    };

    s.create(kopfexample_of_size("parent", 3)).await;
    let done = s
        .tracker
        .wait_for("parent", "both creation handlers done", |b| {
            !status(b, "make_child").is_null() && !status(b, "peek_secret").is_null()
        })
        .await;
    assert_eq!(
        status(&done, "make_child"),
        &json!({"child": "parent-child", "size": "3", "listed": 1}),
        "{}",
        s.tracker.dump("parent")
    );
    assert_eq!(
        status(&done, "peek_secret"),
        &json!({"code": 403, "reason": "Forbidden", "message": SECRETS_REFUSED})
    );

    // The startup handler (it ran before any object was handled), about no object,
    // made its call in `default`.
    let started = configmaps("default")
        .get_opt("kube-calls-started")
        .await
        .expect("get");
    assert!(started.is_some(), "the startup handler's ConfigMap exists");

    // Created where the handled object lives, then patched by the handler.
    let child = configmaps(&s.namespace)
        .get("parent-child")
        .await
        .expect("the child exists");
    let child = serde_json::to_value(child).expect("json");
    assert_eq!(child["data"], json!({"size": "3", "patched": "yes"}));
    assert_eq!(child["metadata"]["labels"]["kapsel.dev/parent"], "parent");
    let elsewhere = configmaps("default")
        .get_opt("parent-child")
        .await
        .expect("get");
    assert!(elsewhere.is_none(), "not in the default namespace");

    // The delete handler removes the child before the object goes.
    s.delete("parent").await;
    s.tracker.wait_gone("parent").await;
    let child = configmaps(&s.namespace)
        .get_opt("parent-child")
        .await
        .expect("get");
    assert!(child.is_none(), "the child is deleted: {child:?}");

    let records = operator.journal().records();
    let object = s.object("parent");
    assert_eq!(
        outcomes(&records, "make_child", &object),
        [("success".to_owned(), None)]
    );
    assert_eq!(
        outcomes(&records, "remove_child", &object),
        [("success".to_owned(), None)]
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// The operator's log says which handler was refused, and which `permit!` it lacks.
#[tokio::test]
async fn a_refused_call_is_logged_with_the_permit_to_add() {
    let guest_path = guest("kube_calls");
    let runner = Runner::start(["run", "-A", "--standalone", &guest_path.to_string_lossy()])
        .await
        .expect("started");
    let client = runner.client();
    create_kopfexamples_crd(&client).await;
    create(
        &client,
        &kopfexamples(),
        Some("default"),
        kopfexample_of_size("curious", 1),
    )
    .await;
    runner
        .journal()
        .wait_for(PATIENCE, |records| {
            records.iter().any(|r| {
                matches!(r, Record::HandlerFinished { handler, .. } if handler == "peek_secret")
            })
        })
        .await
        .expect("peek_secret ran");
    let result = runner.stop().await;
    let warning = format!(
        "Handler 'peek_secret' of guest 'kube_calls' was refused a Kubernetes call: \
         {SECRETS_REFUSED}"
    );
    assert!(
        result.output.lines().any(|line| line.contains(&warning)
            && line.contains("WARN")
            && line.contains("default/curious")),
        "no warning about default/curious with {warning:?}:\n{}",
        result.output
    );
}

/// How many requests of `verb` on `resource` the server answered with `code`.
fn answered(
    server: &kapsel_host::testing::ApiServer,
    verb: &str,
    resource: &str,
    code: u16,
) -> u64 {
    server
        .request_counts()
        .iter()
        .filter(|c| c.kind.verb == verb && c.kind.resource == resource && c.kind.code == code)
        .map(|c| c.count)
        .sum()
}

/// A guest's own call is answered as the server answered it, once: a 503 reaches the
/// handler (which fails, to be retried by its own backoff, 60 s later), and the server
/// saw exactly one request for it — no retry hidden in the host's HTTP client (kube's
/// `server_retry` layer used to send it again after 5 ms, and the handler never knew).
#[tokio::test]
async fn a_guest_call_answered_503_reaches_the_guest_without_a_hidden_retry() {
    let s = Scene::start("guest-api-503").await;
    let operator = s
        .cluster
        .start_operator(Operator::new([guest("kube_calls")]));
    // The startup handler's ConfigMap first: its creation is not the one to fail.
    let started: Api<DynamicObject> = Api::namespaced_with(
        s.client.clone(),
        "default",
        &core("ConfigMap", "configmaps"),
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while started
        .get_opt("kube-calls-started")
        .await
        .expect("get")
        .is_none()
    {
        assert!(tokio::time::Instant::now() < deadline, "startup never ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let server = s.cluster.server();
    let before = (
        answered(server, "create", "configmaps", 503),
        answered(server, "create", "configmaps", 201),
    );
    server.faults().fail_next(
        1,
        RequestMatcher::any().verb("create").plural("configmaps"),
        Fault::ServiceUnavailable,
    );

    s.create(kopfexample_of_size("parent", 3)).await;
    let failed = s
        .tracker
        .wait_for("parent", "make_child's failure recorded", |b| {
            record(b, "make_child").is_some_and(|r| r["retries"] == 1)
        })
        .await;
    let message = record(&failed, "make_child").expect("a record")["message"].clone();
    assert!(
        message.as_str().is_some_and(|m| m.contains("503")),
        "the guest saw the 503: {message}"
    );
    let after = (
        answered(server, "create", "configmaps", 503),
        answered(server, "create", "configmaps", 201),
    );
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 0),
        "one request, answered 503, and no second one"
    );
    assert_eq!(server.faults().unserved(), 0);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
