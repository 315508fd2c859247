//! Login handlers (Kopf's `on.login`, KOPF.md §1.12; issue 32 item 3): the `login` guest's
//! handler is the operator's only way in (the client the test harness gives it is an
//! anonymous one, which RBAC refuses); when the API server refuses its token (401), the
//! operator logs in again and goes on without a restart; a failing login handler is
//! retried, and one that fails for good stops the operator. A hot reload that changes the
//! login handlers logs in anew at once; one that brings the first is refused. A client
//! certificate a login handler returns authenticates the operator over TLS.

use k8s_openapi::api::core::v1::ServiceAccount;
use kapsel_host::Record;
use kapsel_host::testing::{Cluster, ServerConfig};
use kapsel_tests::*;
use kube::Api;
use kube::api::{ApiResource, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

/// How the login handler's attempts ended, in order.
fn logins(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFinished {
                handler, outcome, ..
            } if handler == "login" => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

/// A cluster with RBAC on, a client of its admin (from its kubeconfig), and its server's
/// `https://` URL and CA (base64 PEM, as the kubeconfig carries it).
async fn rbac_cluster() -> (Cluster, kube::Client, String, String) {
    let cluster = Cluster::start_with(ServerConfig::default().rbac(true))
        .await
        .expect("cluster");
    let kubeconfig = Kubeconfig::from_yaml(&cluster.server().kubeconfig()).expect("kubeconfig");
    let named = kubeconfig.clusters[0].cluster.clone().expect("a cluster");
    let (server, ca) = (
        named.server.expect("server"),
        named.certificate_authority_data.expect("CA"),
    );
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    let admin = kapsel_host::kube_client(config).expect("admin client");
    (cluster, admin, server, ca)
}

/// ServiceAccounts `names` in `namespace`, each bound to cluster-admin.
async fn operator_accounts(admin: &kube::Client, namespace: &str, names: &[&str]) {
    let subjects: Vec<Value> = names
        .iter()
        .map(|name| json!({"kind": "ServiceAccount", "name": name, "namespace": namespace}))
        .collect();
    for name in names {
        let account =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
        create(
            admin,
            &core("ServiceAccount", "serviceaccounts"),
            Some(namespace),
            account,
        )
        .await;
    }
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "login-operators"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": subjects,
    });
    let bindings = ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRoleBinding".into(),
        plural: "clusterrolebindings".into(),
    };
    create(admin, &bindings, None, binding).await;
}

/// An RBAC cluster with the kopfexamples CRD and the namespace `ns`, whose operator
/// accounts `first` and `second` may handle them; a tracker of `ns`; and the `login`
/// guest's memo: the server, its CA and a token of each account, in that order (what a
/// token service would issue, one after another).
async fn two_tokens(ns: &str) -> (Cluster, kube::Client, Tracker, Value) {
    let (cluster, admin, server, ca) = rbac_cluster().await;
    create(&admin, &crds(), None, manifest("kopfexamples-crd.yaml")).await;
    create_namespace(&admin, ns).await;
    operator_accounts(&admin, ns, &["first", "second"]).await;
    let token = |name: &str| {
        cluster
            .server()
            .service_account_token(ns, name, std::time::Duration::from_secs(3600))
            .expect("token")
    };
    let tracker = Tracker::start(&admin, ns).await;
    let memo = json!({"server": server, "ca": ca, "tokens": [token("first"), token("second")]});
    (cluster, admin, tracker, memo)
}

fn handled(body: &Value) -> bool {
    !status(body, "create_fn").is_null()
}

#[tokio::test]
async fn a_revoked_token_is_replaced_by_a_new_login_without_a_restart() {
    let ns = "login";
    let (cluster, admin, tracker, memo) = two_tokens(ns).await;
    let operator = cluster.start_operator(
        kapsel_host::Operator::new([guest("login")])
            .standalone()
            .memo(memo),
    );
    let labels = json!({"kapsel.test/login": "yes"});
    let kex = |name: &str| kopfexample(name, &[], labels.clone(), json!({}), json!({}));
    create(&admin, &kopfexamples(), Some(ns), kex("before")).await;
    tracker
        .wait_for("before", "handled with the first token", handled)
        .await;
    assert_eq!(logins(&operator.journal().records()), ["success"]);

    // Revoked as kube revokes a ServiceAccount's tokens: the account is gone. Watches
    // started before go on; the next requests are refused.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    accounts
        .delete("first", &DeleteParams::default())
        .await
        .expect("deleted");
    cluster.server().faults().drop_watches();
    create(&admin, &kopfexamples(), Some(ns), kex("after")).await;
    let after = tracker
        .wait_for("after", "handled with the second token", handled)
        .await;
    assert_eq!(status(&after, "create_fn"), &json!({"handled": "after"}));
    let records = operator.journal().records();
    assert_eq!(
        logins(&records),
        ["success", "success"],
        "logged in again, once"
    );
    assert_eq!(
        guest_logs(&records, "login"),
        ["logging in with token #1", "logging in with token #2"]
    );
    let refused: u64 = cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.code == 401)
        .map(|c| c.count)
        .sum();
    assert!(refused >= 1, "the API server refused the first token");
    assert!(!operator.is_finished(), "no restart");
    operator.stop().await.expect("stopped cleanly");
    cluster.shutdown().await.expect("cluster stops");
}

#[tokio::test]
async fn a_failing_login_handler_is_retried_before_anything_else_runs() {
    let s = Scene::start("login-retried").await;
    // RBAC is off: any token is taken, and the anonymous client given would do as well;
    // the operator still logs in with its handler first.
    let memo = json!({"server": s.cluster.server().url(), "tokens": ["any"], "failures": 2});
    let operator = s.cluster.start_operator(
        kapsel_host::Operator::new([guest("login")])
            .standalone()
            .memo(memo),
    );
    let labels = json!({"kapsel.test/login": "yes"});
    s.create(kopfexample("obj", &[], labels, json!({}), json!({})))
        .await;
    s.tracker.wait_for("obj", "handled", handled).await;
    let records = operator.journal().records();
    assert_eq!(logins(&records), ["retry", "retry", "success"]);
    let kinds: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerCalled { handler, kind, .. } if handler == "login" => {
                Some(kind.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds, ["login"; 3],
        "recorded as what it is, not as the startup handler it is on the wire"
    );
    let first_call = records
        .iter()
        .position(|r| matches!(r, Record::HandlerCalled { handler, .. } if handler == "create_fn"));
    let logged_in = records.iter().position(
        |r| matches!(r, Record::HandlerFinished { handler, outcome, .. } if handler == "login" && outcome == "success"),
    );
    assert!(logged_in < first_call, "logged in before handling objects");
    operator.stop().await.expect("stopped cleanly");
    s.shutdown().await;
}

#[tokio::test]
async fn a_login_handler_failing_for_good_stops_the_operator() {
    let cluster = Cluster::start().await.expect("cluster");
    let operator = kapsel_host::Operator::new([guest("login")])
        .memo(json!({"refuse": true}))
        .client(cluster.client());
    let ran = tokio::time::timeout(PATIENCE, operator.run(std::future::pending())).await;
    let error = ran
        .expect("stopped on its own")
        .expect_err("no login, no operator");
    let message = kapsel_host::error_chain(&error);
    assert!(
        message.contains("cannot log in") && message.contains("no credentials for this operator"),
        "{message}"
    );
    cluster.shutdown().await.expect("cluster stops");
}

/// Rescans this often in the reload tests.
const RESCAN: std::time::Duration = std::time::Duration::from_millis(100);

/// The `login` guest's bytes; with `version`, as another build of it (a custom section
/// that changes its digest, not its code), which a reload takes as a new version.
fn login_guest(version: Option<&str>) -> Vec<u8> {
    let mut bytes = std::fs::read(guest("login")).expect("the built login guest");
    if let Some(version) = version {
        let name = b"kapsel-test-version";
        let size = 1 + name.len() + version.len();
        let size = u8::try_from(size).expect("a short section");
        bytes.extend([0, size, u8::try_from(name.len()).expect("short")]);
        bytes.extend(name);
        bytes.extend(version.as_bytes());
    }
    bytes
}

/// A reload that changes the login handlers logs in anew with the new version, at once:
/// its credentials replace the old version's, so revoking the old token afterwards costs
/// no refused request at all (the operator no longer uses it).
#[tokio::test]
async fn a_reloaded_login_handler_logs_in_anew_at_once() {
    let ns = "relogin";
    let (cluster, admin, tracker, memo) = two_tokens(ns).await;
    let mut volume = ConfigMapVolume::new("relogin");
    volume.publish(&[("login.wasm", &login_guest(None))]);
    let operator = cluster.start_operator(
        kapsel_host::Operator::new([volume.dir()])
            .reload_interval(RESCAN)
            .standalone()
            .memo(memo),
    );
    let journal = operator.journal().clone();
    let labels = json!({"kapsel.test/login": "yes"});
    let kex = |name: &str| kopfexample(name, &[], labels.clone(), json!({}), json!({}));
    create(&admin, &kopfexamples(), Some(ns), kex("before")).await;
    tracker
        .wait_for("before", "handled with the first token", handled)
        .await;

    volume.publish(&[("login.wasm", &login_guest(Some("2")))]);
    wait_record(&journal, "the login guest is replaced", |r| {
        matches!(r, Record::GuestReloaded { guest, change, .. } if guest == "login" && change == "replaced")
    })
    .await;
    assert_eq!(
        guest_logs(&journal.records(), "login"),
        ["logging in with token #1", "logging in with token #2"],
        "the new version logged in before it served"
    );

    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    accounts
        .delete("first", &DeleteParams::default())
        .await
        .expect("deleted");
    cluster.server().faults().drop_watches();
    create(&admin, &kopfexamples(), Some(ns), kex("after")).await;
    tracker
        .wait_for("after", "handled with the second token", handled)
        .await;
    let refused: u64 = cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.code == 401)
        .map(|c| c.count)
        .sum();
    assert_eq!(refused, 0, "the revoked token was no longer used");
    assert_eq!(logins(&journal.records()), ["success", "success"]);
    operator.stop().await.expect("stopped cleanly");
    cluster.shutdown().await.expect("cluster stops");
}

/// An operator started without login handlers uses the client it was given, which a
/// reload cannot replace: a guest that brings the first login handlers is refused, with
/// why, and the guests before it go on serving.
#[tokio::test]
async fn a_reload_bringing_the_first_login_handlers_is_refused() {
    let s = Scene::start("login-added").await;
    let mut volume = ConfigMapVolume::new("login-added");
    let timers = std::fs::read(guest("timers")).expect("the built timers guest");
    volume.publish(&[("timers.wasm", &timers)]);
    let operator = s.cluster.start_operator(
        kapsel_host::Operator::new([volume.dir()])
            .reload_interval(RESCAN)
            .standalone()
            .memo(json!({"server": s.cluster.server().url(), "tokens": ["any"]})),
    );
    let journal = operator.journal().clone();
    wait_record(
        &journal,
        "the timers guest is loaded",
        |r| matches!(r, Record::GuestLoaded { guest, .. } if guest == "timers"),
    )
    .await;
    volume.publish(&[("timers.wasm", &timers), ("login.wasm", &login_guest(None))]);
    let refused = wait_record(
        &journal,
        "the login guest is refused",
        |r| matches!(r, Record::GuestRefused { guest, .. } if guest == "login"),
    )
    .await;
    let Record::GuestRefused { error, .. } = refused else {
        unreachable!("matched above")
    };
    assert!(
        error.contains("started without any") && error.contains("restart"),
        "{error}"
    );
    assert!(logins(&journal.records()).is_empty(), "it never logged in");
    assert!(!operator.is_finished());
    operator.stop().await.expect("stopped cleanly");
    s.shutdown().await;
}

/// A login handler that returns a client certificate and its key (Kopf's
/// `certificate_data`/`private_key_data`): the operator authenticates with it over TLS,
/// the API server's x509 authenticator naming its user (RBAC refuses the anonymous
/// client the harness gives, and no token is sent).
#[tokio::test]
async fn a_client_certificate_from_a_login_handler_authenticates_the_operator() {
    let (cluster, admin, server, ca) = rbac_cluster().await;
    let ns = "by-certificate";
    create(&admin, &crds(), None, manifest("kopfexamples-crd.yaml")).await;
    create_namespace(&admin, ns).await;
    let (certificate, key) = cluster
        .server()
        .client_certificate("operator-by-certificate", &["system:masters"])
        .expect("a client certificate");
    let tracker = Tracker::start(&admin, ns).await;
    let memo = json!({"server": server, "ca": ca, "certificate": certificate, "key": key});
    let operator = cluster.start_operator(
        kapsel_host::Operator::new([guest("login")])
            .standalone()
            .memo(memo),
    );
    let labels = json!({"kapsel.test/login": "yes"});
    create(
        &admin,
        &kopfexamples(),
        Some(ns),
        kopfexample("certified", &[], labels, json!({}), json!({})),
    )
    .await;
    tracker
        .wait_for("certified", "handled with the certificate", handled)
        .await;
    let records = operator.journal().records();
    assert_eq!(logins(&records), ["success"]);
    assert_eq!(
        guest_logs(&records, "login"),
        ["logging in with a client certificate"]
    );
    let refused: u64 = cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.code == 401 || c.kind.code == 403)
        .map(|c| c.count)
        .sum();
    assert_eq!(refused, 0, "every request was the certificate's user");
    operator.stop().await.expect("stopped cleanly");
    cluster.shutdown().await.expect("cluster stops");
}
