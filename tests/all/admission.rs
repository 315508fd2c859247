//! Admission webhooks through the real path: the operator serves its guests' admission
//! handlers (tests/guests/admission) over HTTPS and manages the webhook configurations;
//! the dev cluster calls them on writes, as kube-apiserver does. Each write here is a
//! client's, through kube-rs, and what the client sees is what is checked.

use std::time::{Duration, Instant};

use kapsel_host::testing::{Cluster, RunningOperator};
use kapsel_host::{AdmissionServer, Freezer, Operator, Record};
use kapsel_tests::admission::*;
use kapsel_tests::*;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

/// The name of the managed configurations (and the suffix of their webhooks' names).
const MANAGED: &str = "kex.admission.test";

/// The webhooks' names in the managed configuration once they are `wanted` (by name),
/// waiting for the operator to write them.
async fn webhooks_become(client: &kube::Client, mutating: bool, wanted: &[&str]) -> Value {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webhook_configurations(mutating));
    let deadline = Instant::now() + PATIENCE * 3;
    loop {
        if let Ok(Some(found)) = api.get_opt(MANAGED).await {
            let found = serde_json::to_value(found).expect("JSON");
            let names: Vec<&str> = found["webhooks"]
                .as_array()
                .map(|hooks| hooks.iter().filter_map(|h| h["name"].as_str()).collect())
                .unwrap_or_default();
            if names == wanted {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "webhooks {names:?}, not {wanted:?}"
            );
        } else {
            assert!(Instant::now() < deadline, "no {MANAGED} configuration");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const VALIDATING: [&str; 8] = [
    "refuse-forbidden.kex.admission.test",
    "warn-long.kex.admission.test",
    "keep-immutable.kex.admission.test",
    "fragile.kex.admission.test",
    "fragile-ignored.kex.admission.test",
    "refuse-when.kex.admission.test",
    "dry-runs.kex.admission.test",
    "no-rm-exec.kex.admission.test",
];
const MUTATING: [&str; 2] = [
    "mark-seen.kex.admission.test",
    "on-delete.kex.admission.test",
];

/// A cluster with the kopfexamples CRD and the admission guest's operator serving its
/// webhooks, configured.
async fn admitting() -> (Cluster, RunningOperator) {
    let cluster = Cluster::start().await.expect("a cluster");
    create_kopfexamples_crd(&cluster.client()).await;
    let server = AdmissionServer::new("127.0.0.1:0".parse().expect("an address")).managed(MANAGED);
    let operator =
        cluster.start_operator(Operator::new([guest("admission_hooks")]).admission(server));
    webhooks_become(&cluster.client(), false, &VALIDATING).await;
    webhooks_become(&cluster.client(), true, &MUTATING).await;
    (cluster, operator)
}

#[tokio::test]
async fn a_create_is_refused_with_the_handlers_message_and_code() {
    let (cluster, operator) = admitting().await;
    let refused = try_create(
        &cluster.client(),
        kex("bad", json!({}), json!({"field": "forbidden"})),
    )
    .await
    .expect_err("refused");
    assert_eq!(refused.code, 422, "{refused:?}");
    assert_eq!(
        refused.message,
        "admission webhook \"refuse-forbidden.kex.admission.test\" denied the request: \
         field must not be forbidden"
    );
    let api = kopfexamples_api(&cluster.client());
    assert!(
        api.get_opt("bad").await.unwrap().is_none(),
        "nothing stored"
    );
    // Recorded (and counted in the metrics) as every handler call is, of kind `validate`.
    let finished = wait_record(operator.journal(), "refuse_forbidden finished", |r| {
        matches!(r, Record::HandlerFinished { handler, kind, .. }
            if handler == "refuse_forbidden" && kind == "validate")
    })
    .await;
    let Record::HandlerFinished {
        outcome,
        message,
        object,
        ..
    } = finished
    else {
        unreachable!()
    };
    assert_eq!(outcome, "failure");
    assert_eq!(
        message,
        "Webhook 'refuse_forbidden' failed permanently: field must not be forbidden"
    );
    assert_eq!(object.as_deref(), Some("default/bad"));
}

#[tokio::test]
async fn a_when_filter_sees_the_admission_request() {
    let (cluster, _operator) = admitting().await;
    let client = cluster.client();
    let refused = try_create(&client, kex("when", json!({}), json!({"field": "when"})))
        .await
        .expect_err("a creation by someone");
    assert_eq!(refused.code, 409, "{refused:?}");
    assert!(
        refused.message.ends_with("the when filter saw the request"),
        "{refused:?}"
    );
    // An update is no creation: the filter says no.
    try_create(&client, kex("later", json!({}), json!({"field": "x"})))
        .await
        .expect("allowed");
    let api = kopfexamples_api(&client);
    let patch = kube::api::Patch::Merge(json!({"spec": {"field": "when"}}));
    api.patch("later", &kube::api::PatchParams::default(), &patch)
        .await
        .expect("not a creation");
}

#[tokio::test]
async fn a_create_is_mutated_by_the_mutating_handler() {
    let (cluster, _operator) = admitting().await;
    let created = try_create(
        &cluster.client(),
        kex("good", json!({}), json!({"field": "x"})),
    )
    .await
    .expect("allowed");
    assert_eq!(
        created["metadata"]["labels"]["admission.kapsel.dev/seen"], "yes",
        "{created}"
    );
}

#[tokio::test]
async fn an_update_is_validated_against_the_old_object() {
    let (cluster, _operator) = admitting().await;
    let client = cluster.client();
    try_create(&client, kex("kept", json!({}), json!({"immutable": "a"})))
        .await
        .expect("allowed");
    let api = kopfexamples_api(&client);
    let change = |value: &str| {
        kube::api::Patch::Merge(json!({"spec": {"immutable": value, "other": value}}))
    };
    let refused = api
        .patch("kept", &kube::api::PatchParams::default(), &change("b"))
        .await
        .expect_err("refused");
    let kube::Error::Api(status) = refused else {
        panic!("{refused}")
    };
    assert_eq!(status.code, 403);
    assert!(
        status.message.ends_with("spec.immutable cannot change"),
        "{status:?}"
    );
    api.patch("kept", &kube::api::PatchParams::default(), &change("a"))
        .await
        .expect("the same value passes");
}

#[tokio::test]
async fn a_trapping_or_overrunning_handler_refuses_under_fail_and_is_ignored_under_ignore() {
    let (cluster, operator) = admitting().await;
    let client = cluster.client();
    for field in ["trap", "spin"] {
        let refused = try_create(&client, kex(field, json!({}), json!({"field": field})))
            .await
            .expect_err("failurePolicy Fail");
        assert_eq!(refused.code, 500, "{refused:?}");
        assert!(
            refused.message.starts_with(
                "admission webhook \"fragile.kex.admission.test\" denied the request: \
                 admission handler \"fragile\" failed"
            ),
            "{refused:?}"
        );
        let fault = if field == "trap" { "trap" } else { "timeout" };
        wait_record(operator.journal(), "the sandbox's fault", |r| {
            matches!(r, Record::HandlerFinished { handler, fault: Some(f), object: Some(o), .. }
                if handler == "fragile" && f == fault && o == &format!("default/{field}"))
        })
        .await;
        let ignored = kex(
            &format!("{field}-ignored"),
            json!({"admission.kapsel.dev/failures": "ignore"}),
            json!({"field": field}),
        );
        try_create(&client, ignored).await.expect("ignore_failures");
    }
}

#[tokio::test]
async fn warnings_reach_the_client_and_dry_runs_are_admitted_without_storing() {
    let (cluster, _operator) = admitting().await;
    let client = cluster.client();
    let long = kex(
        "long",
        json!({}),
        json!({"field": "more than ten characters"}),
    );
    let (code, warnings, _) = create_raw(&client, &long, false).await;
    assert_eq!(code, 201);
    assert_eq!(warnings, ["spec.field is long"]);

    // A dry run reaches the handlers (their webhooks have no side effects, or none on a
    // dry run), says so to the one that asks, and stores nothing.
    let dry = kex("dry", json!({}), json!({"field": "y"}));
    let (code, warnings, body) = create_raw(&client, &dry, true).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(warnings, ["dry run seen"]);
    assert_eq!(
        body["metadata"]["labels"]["admission.kapsel.dev/seen"], "yes",
        "mutated too"
    );
    assert!(
        kopfexamples_api(&client)
            .get_opt("dry")
            .await
            .unwrap()
            .is_none()
    );
    let forbidden = kex("dry-bad", json!({}), json!({"field": "forbidden"}));
    let (code, _, body) = create_raw(&client, &forbidden, true).await;
    assert_eq!(code, 422, "a dry run is refused as a write: {body}");
}

#[tokio::test]
async fn the_configurations_follow_a_reload_that_adds_admission_handlers() {
    let cluster = Cluster::start().await.unwrap();
    create_kopfexamples_crd(&cluster.client()).await;
    let mut volume = ConfigMapVolume::new("admission-reload");
    let bytes = |name: &str| std::fs::read(guest(name)).expect("a built guest");
    volume.publish(&[("app.wasm", &bytes("minimal"))]);
    let server = AdmissionServer::new("127.0.0.1:0".parse().unwrap()).managed(MANAGED);
    let _operator = cluster.start_operator(
        Operator::new([volume.dir()])
            .admission(server)
            .reload_interval(Duration::from_millis(100)),
    );
    // Managed from the start, with no webhook while no guest has admission handlers.
    webhooks_become(&cluster.client(), false, &[]).await;
    let client = cluster.client();
    try_create(
        &client,
        kex("before", json!({}), json!({"field": "forbidden"})),
    )
    .await
    .expect("nothing refuses yet");

    volume.publish(&[("app.wasm", &bytes("admission_hooks"))]);
    let configured = webhooks_become(&client, false, &VALIDATING).await;
    let hook = &configured["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["sideEffects"], "None");
    assert_eq!(
        hook["rules"],
        json!([{"apiGroups": ["kopf.dev"], "apiVersions": ["v1"], "resources": ["kopfexamples"],
                "operations": ["*"], "scope": "*"}])
    );
    assert!(
        hook["clientConfig"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/app/refuse_forbidden")
    );
    assert!(hook["clientConfig"]["caBundle"].is_string());
    webhooks_become(&client, true, &MUTATING).await;
    try_create(
        &client,
        kex("after", json!({}), json!({"field": "forbidden"})),
    )
    .await
    .expect_err("refused once reloaded");
}

/// Writes `contents` to `path` as one rename, as a mounted Secret changes at once.
fn replace_file(path: &std::path::Path, contents: &str) {
    let fresh = path.with_extension("new");
    std::fs::write(&fresh, contents).expect("written");
    std::fs::rename(&fresh, path).expect("renamed");
}

#[tokio::test]
async fn a_certificate_given_as_files_is_served_and_rotated_while_running() {
    let dir = std::env::temp_dir().join(format!("kapsel-admission-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (leaf, private, ca) = signed_certificate();
    let chain = leaf + &ca;
    std::fs::write(&cert, &chain).unwrap();
    std::fs::write(&key, &private).unwrap();

    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    create_kopfexamples_crd(&client).await;
    let server = AdmissionServer::new("127.0.0.1:0".parse().unwrap())
        .certificate(&cert, &key)
        .managed(MANAGED);
    let _operator =
        cluster.start_operator(Operator::new([guest("admission_hooks")]).admission(server));
    let ca_bundle = |configured: &Value| {
        let encoded = configured["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
            .unwrap_or_default()
    };
    let configured = webhooks_become(&client, false, &VALIDATING).await;
    assert_eq!(ca_bundle(&configured), ca.replace("\r\n", "\n").as_bytes());
    let forbidden = |name: &str| kex(name, json!({}), json!({"field": "forbidden"}));
    let refused = try_create(&client, forbidden("first"))
        .await
        .expect_err("refused");
    assert_eq!(
        refused.code, 422,
        "the dev cluster trusts the files' CA: {refused:?}"
    );

    // Rotated (key first, then the chain, as two renames): the server serves the new
    // certificate, and the configurations carry the new CA.
    let (leaf, private, ca) = signed_certificate();
    let chain = leaf + &ca;
    replace_file(&key, &private);
    replace_file(&cert, &chain);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webhook_configurations(false));
    let deadline = Instant::now() + PATIENCE * 3;
    loop {
        let configured = serde_json::to_value(api.get(MANAGED).await.unwrap()).unwrap();
        if ca_bundle(&configured) == ca.replace("\r\n", "\n").as_bytes() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the configuration kept the old CA"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = try_create(&client, forbidden("second"))
        .await
        .expect_err("refused");
    assert_eq!(
        refused.code, 422,
        "the dev cluster reaches the server with the new CA: {refused:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn replicas_share_a_generated_certificate_through_its_secret() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    create_kopfexamples_crd(&client).await;
    let replica = |port: u16| {
        let listen = format!("127.0.0.1:{port}").parse().unwrap();
        let server = AdmissionServer::new(listen)
            .managed(MANAGED)
            .secret("default", "kex-admission-tls");
        cluster.start_operator(Operator::new([guest("admission_hooks")]).admission(server))
    };
    let url_of = |configured: &Value| {
        configured["webhooks"][0]["clientConfig"]["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let (first_port, second_port) = (free_port(), free_port());
    let _first = replica(first_port);
    let configured = webhooks_become(&client, false, &VALIDATING).await;
    assert!(url_of(&configured).contains(&format!(":{first_port}/")));
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &core("Secret", "secrets"));
    let secret = serde_json::to_value(secrets.get("kex-admission-tls").await.unwrap()).unwrap();
    let ca = secret["data"]["ca.crt"].as_str().unwrap().to_owned();
    assert_eq!(
        configured["webhooks"][0]["clientConfig"]["caBundle"], ca,
        "the Secret's CA"
    );

    // A second replica serves with the same CA: when it points the configurations at
    // itself, their CA bundle stays, and the dev cluster trusts it.
    let _second = replica(second_port);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webhook_configurations(false));
    let deadline = Instant::now() + PATIENCE * 3;
    let configured = loop {
        let configured = serde_json::to_value(api.get(MANAGED).await.unwrap()).unwrap();
        if url_of(&configured).contains(&format!(":{second_port}/")) {
            break configured;
        }
        assert!(Instant::now() < deadline, "the second replica never wrote");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        configured["webhooks"][0]["clientConfig"]["caBundle"], ca,
        "one CA"
    );
    let refused = try_create(
        &client,
        kex("shared", json!({}), json!({"field": "forbidden"})),
    )
    .await
    .expect_err("refused");
    assert_eq!(refused.code, 422, "{refused:?}");
}

#[tokio::test]
async fn peering_never_pauses_admission() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    create_kopfexamples_crd(&client).await;
    apply_peering_manifests(&client, true).await;
    let server = AdmissionServer::new("127.0.0.1:0".parse().unwrap()).managed(MANAGED);
    let operator = cluster.start_operator(
        Operator::new([guest("admission_hooks")])
            .namespaces(["default"])
            .peering("default")
            .admission(server),
    );
    webhooks_become(&client, false, &VALIDATING).await;
    // Running (it paused until it saw its peering object), then frozen.
    wait_record(operator.journal(), "running after peering", |r| {
        matches!(r, Record::Resumed)
    })
    .await;
    Freezer::new("default")
        .namespaces(["default"])
        .identity("admin@console")
        .client(client.clone())
        .freeze(Duration::from_secs(600))
        .await
        .unwrap();
    wait_record(
        operator.journal(),
        "paused by the freeze",
        |r| matches!(r, Record::Paused { reason } if reason.contains("admin@console")),
    )
    .await;
    let refused = try_create(
        &client,
        kex("frozen", json!({}), json!({"field": "forbidden"})),
    )
    .await
    .expect_err("admitted while paused");
    assert_eq!(refused.code, 422, "{refused:?}");
}

#[tokio::test]
async fn a_crd_created_later_reaches_the_webhooks_rules() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let server = AdmissionServer::new("127.0.0.1:0".parse().unwrap()).managed(MANAGED);
    let _operator =
        cluster.start_operator(Operator::new([guest("admission_hooks")]).admission(server));
    let configured = webhooks_become(&client, false, &VALIDATING).await;
    assert_eq!(
        configured["webhooks"][0]["rules"],
        json!([]),
        "no kopfexamples yet"
    );

    create_kopfexamples_crd(&client).await;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &webhook_configurations(false));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let configured = serde_json::to_value(api.get(MANAGED).await.unwrap()).unwrap();
        if configured["webhooks"][0]["rules"][0]["resources"] == json!(["kopfexamples"]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rules never named kopfexamples"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = try_create(
        &client,
        kex("late", json!({}), json!({"field": "forbidden"})),
    )
    .await
    .expect_err("refused");
    assert_eq!(refused.code, 422, "{refused:?}");
}

#[tokio::test]
async fn a_connection_is_admitted_by_a_connect_handler() {
    let (cluster, _operator) = admitting().await;
    let exec = |command: &str| {
        let uri =
            format!("/api/v1/namespaces/default/pods/absent/exec?command={command}&stdout=true");
        http::Request::post(uri)
            .body(Vec::new())
            .expect("a request")
    };
    let status = |e: kube::Error| match e {
        kube::Error::Api(status) => *status,
        other => panic!("not an API error: {other:?}"),
    };
    // The handler's refusal, before the (absent) pod is looked for.
    let refused = status(
        cluster
            .client()
            .request_text(exec("rm"))
            .await
            .expect_err("refused"),
    );
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "admission webhook \"no-rm-exec.kex.admission.test\" denied the request: no rm through exec"
    );
    // Allowed by the handler: then the pod is looked for.
    let allowed = status(
        cluster
            .client()
            .request_text(exec("ls"))
            .await
            .expect_err("no such pod"),
    );
    assert_eq!(allowed.code, 404, "{allowed:?}");
}
