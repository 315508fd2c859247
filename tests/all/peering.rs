//! Peering (KOPF.md §8): an operator pauses while a live peer has a higher
//! priority, everyone pauses on equal priorities, `freeze`/`resume` pause and
//! resume, dead peers are removed, Kopf's own records are understood, and
//! `--peering` without its object stays paused. Paused means unhandled:
//! changes meanwhile reach no handler, and resuming relists.

use std::time::Duration;

use k8s_openapi::jiff;
use kapsel_host::testing::{Cluster, RunningOperator, ServerConfig};
use kapsel_host::{Freezer, Journal, Operator, Record};
use kapsel_tests::*;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

/// Short records, so that expiry shows within a test (keep-alives come every second).
const LIFETIME: Duration = Duration::from_secs(3);

/// The status of the `default` peering object: cluster-wide, or in a namespace.
async fn peers(client: &kube::Client, namespace: Option<&str>) -> Value {
    peers_of(client, "kopf.dev", namespace).await
}

/// As [`peers`], in the peering resource of an API group (`kopf.dev`, `zalando.org`).
async fn peers_of(client: &kube::Client, group: &str, namespace: Option<&str>) -> Value {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &namespaced_peerings_of(group)),
        None => Api::all_with(client.clone(), &cluster_peerings_of(group)),
    };
    let object = api.get("default").await.expect("the peering object");
    object.data.get("status").cloned().unwrap_or(json!({}))
}

/// Polls the peers until `check` holds.
async fn wait_for_peers(
    client: &kube::Client,
    namespace: Option<&str>,
    what: &str,
    check: impl Fn(&Value) -> bool,
) {
    wait_for_peers_of(client, "kopf.dev", namespace, what, check).await;
}

/// As [`wait_for_peers`], in the peering resource of an API group.
async fn wait_for_peers_of(
    client: &kube::Client,
    group: &str,
    namespace: Option<&str>,
    what: &str,
    check: impl Fn(&Value) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = peers_of(client, group, namespace).await;
        if check(&status) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: the peers are {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn has_peer(status: &Value, identity: &str) -> bool {
    status.get(identity).is_some_and(|r| !r.is_null())
}

fn seed(identity: &str) -> Operator {
    Operator::new([guest("seed")])
        .identity(identity)
        .peering_lifetime(LIFETIME)
}

/// The reasons of every pause so far.
fn pauses(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Paused { reason } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

fn resumes(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, Record::Resumed))
        .count()
}

fn handled(records: &[Record], object: &str) -> bool {
    calls(records, "log_event").iter().any(|(o, _)| o == object)
}

async fn wait_paused_for(journal: &Journal, what: &str) {
    journal
        .wait_for(PATIENCE, |r| pauses(r).iter().any(|p| p.contains(what)))
        .await
        .unwrap_or_else(|r| panic!("no pause for {what:?}: {:?}", pauses(&r)));
}

async fn wait_handled(journal: &Journal, object: &str) {
    journal
        .wait_for(PATIENCE, |r| handled(r, object))
        .await
        .unwrap_or_else(|r| panic!("{object} not handled: {:?}", calls(&r, "log_event")));
}

/// Creates a pod while `operator` is paused (it has not resumed once the pod exists).
/// Whether a handler saw it meanwhile shows after resuming ([`handled_after_resume`]).
async fn create_while_paused(client: &kube::Client, operator: &RunningOperator, name: &str) {
    create(client, &core("Pod", "pods"), Some("default"), pod(name)).await;
    let records = operator.journal().records();
    assert_eq!(resumes(&records), 0, "resumed too early");
    assert!(
        !handled(&records, &format!("default/{name}")),
        "a paused operator handled {name}: {:?}",
        calls(&records, "log_event")
    );
}

/// After resuming, the stream relists: the pod comes as a listed object (event type None),
/// and only so. Had a stream watched while the operator was paused, the pod would have
/// come as ADDED: so this also proves that nothing saw it during the pause.
async fn handled_after_resume(operator: &RunningOperator, name: &str) {
    let journal = operator.journal();
    let object = format!("default/{name}");
    wait_handled(journal, &object).await;
    operator.settle([]).await.expect("settled");
    let records = journal.records();
    assert_eq!(resumes(&records), 1, "{:?}", pauses(&records));
    let seen: Vec<_> = calls(&records, "log_event")
        .into_iter()
        .filter(|(o, _)| *o == object)
        .collect();
    assert_eq!(
        seen,
        [(object.clone(), None)],
        "{object} should come with the relisting only"
    );
}

/// Now as Kopf writes `lastseen`: naive UTC, Python's `isoformat()`.
fn kopf_time(ago: Duration) -> String {
    let ago = jiff::SignedDuration::try_from(ago).expect("a short duration");
    let time = jiff::Timestamp::now()
        .checked_sub(ago)
        .expect("a time after the epoch");
    format!(
        "{}.{:06}",
        time.strftime("%Y-%m-%dT%H:%M:%S"),
        time.subsec_microsecond()
    )
}

#[tokio::test]
async fn a_dev_operator_pauses_the_deployed_one_until_it_leaves() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, true).await;
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        pod("before"),
    )
    .await;
    let deployed = cluster.start_operator(seed("deployed"));
    wait_handled(deployed.journal(), "default/before").await;

    let dev = cluster.start_operator(seed("dev").dev());
    wait_paused_for(deployed.journal(), "dev").await;
    wait_for_peers(&client, None, "both records", |s| {
        s["dev"]["priority"] == 666 && s["deployed"]["priority"] == 0
    })
    .await;
    create_while_paused(&client, &deployed, "during").await;
    wait_handled(dev.journal(), "default/during").await;

    let dev_journal = dev.journal().clone();
    dev.stop().await.unwrap();
    assert!(
        pauses(&dev_journal.records()).is_empty(),
        "the dev operator never pauses"
    );
    handled_after_resume(&deployed, "during").await;
    wait_for_peers(&client, None, "the dev record is removed at exit", |s| {
        !has_peer(s, "dev") && has_peer(s, "deployed")
    })
    .await;

    deployed.stop().await.unwrap();
    wait_for_peers(&client, None, "no records after both left", |s| {
        s.as_object().is_some_and(serde_json::Map::is_empty)
    })
    .await;
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn equal_priorities_pause_everyone_until_one_leaves() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, true).await;
    let first = cluster.start_operator(seed("first").priority(7));
    let second = cluster.start_operator(seed("second").priority(7));
    wait_paused_for(first.journal(), "same priority: second").await;
    wait_paused_for(second.journal(), "same priority: first").await;
    create_while_paused(&client, &first, "contested").await;

    let second_journal = second.journal().clone();
    second.stop().await.unwrap();
    // Paused from its start to its end: it never had a stream to see the pod with.
    let records = second_journal.records();
    assert_eq!(resumes(&records), 0);
    assert!(!handled(&records, "default/contested"));
    handled_after_resume(&first, "contested").await;
    first.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn freeze_pauses_namespaced_operators_until_resume() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, true).await;
    let operator = cluster.start_operator(seed("op").namespaces(["default"]));
    wait_for_peers(&client, Some("default"), "the operator's record", |s| {
        has_peer(s, "op")
    })
    .await;
    let freezer = Freezer::new("default")
        .namespaces(["default"])
        .identity("admin@console")
        .client(client.clone());

    freezer
        .clone()
        .freeze(Duration::from_secs(600))
        .await
        .unwrap();
    wait_paused_for(operator.journal(), "admin@console").await;
    let record = &peers(&client, Some("default")).await["admin@console"];
    assert_eq!(record["priority"], 100, "{record}");
    assert_eq!(record["lifetime"], 600, "{record}");
    assert!(record["lastseen"].is_string(), "{record}");
    assert_eq!(
        record.as_object().map(serde_json::Map::len),
        Some(3),
        "{record}"
    );
    create_while_paused(&client, &operator, "frozen").await;

    freezer.resume().await.unwrap();
    handled_after_resume(&operator, "frozen").await;
    let status = peers(&client, Some("default")).await;
    assert!(!has_peer(&status, "admin@console"), "{status}");

    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn expired_peers_are_removed_and_block_nobody() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, true).await;
    // An operator that crashed an hour ago, without removing its record.
    patch(
        &client,
        &cluster_peerings(),
        None,
        "default",
        json!({"status": {"crashed": {
            "priority": 1000, "lifetime": 60, "lastseen": kopf_time(Duration::from_secs(3600))
        }}}),
    )
    .await;
    create(&client, &core("Pod", "pods"), Some("default"), pod("p")).await;
    // Kopf's lifetime: no keep-alive comes within the test, so only the
    // operator's own expiry timer can notice that the freeze ended.
    let operator = cluster.start_operator(seed("op").peering_lifetime(Duration::from_secs(60)));
    wait_handled(operator.journal(), "default/p").await;
    wait_for_peers(&client, None, "the dead record is removed", |s| {
        !has_peer(s, "crashed") && has_peer(s, "op")
    })
    .await;
    assert!(pauses(&operator.journal().records()).is_empty());

    // A freeze that nobody resumes: it expires, the operator resumes and removes it.
    Freezer::new("default")
        .identity("short")
        .client(client.clone())
        .freeze(Duration::from_secs(2))
        .await
        .unwrap();
    wait_paused_for(operator.journal(), "short").await;
    operator
        .journal()
        .wait_for(PATIENCE, |r| resumes(r) == 1)
        .await
        .expect("resumes when the freeze expires");
    wait_for_peers(&client, None, "the expired freeze is removed", |s| {
        !has_peer(s, "short")
    })
    .await;

    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn records_in_kopf_format_are_written_and_obeyed() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, true).await;
    let operator = cluster.start_operator(seed("kapsel-op").priority(5));
    wait_for_peers(&client, None, "the operator's record", |s| {
        has_peer(s, "kapsel-op")
    })
    .await;

    // What Kapsel writes is what Kopf writes.
    let ours = peers(&client, None).await["kapsel-op"].clone();
    assert_eq!(ours["priority"], 5, "{ours}");
    assert_eq!(ours["lifetime"], 3, "{ours}");
    let mut keys: Vec<&String> = ours.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["lastseen", "lifetime", "priority"], "{ours}");
    let lastseen = ours["lastseen"].as_str().unwrap();
    let shape_ok = matches!(lastseen.len(), 19 | 26)
        && lastseen.as_bytes()[10] == b'T'
        && lastseen[..4].parse::<u16>().is_ok()
        && !lastseen.contains(['Z', '+']);
    assert!(shape_ok, "Python's naive isoformat(), got {lastseen}");

    // What Kopf writes (a merge patch of its record) pauses Kapsel ...
    let kopf_id = "kopf-operator-7d9f8b6c5-x2xq4";
    patch(
        &client,
        &cluster_peerings(),
        None,
        "default",
        json!({"status": {kopf_id: {
            "priority": 10, "lifetime": 60, "lastseen": kopf_time(Duration::ZERO)
        }}}),
    )
    .await;
    wait_paused_for(operator.journal(), kopf_id).await;
    create_while_paused(&client, &operator, "while-kopf").await;
    // ... and Kopf leaving (its record set to null) resumes it.
    patch(
        &client,
        &cluster_peerings(),
        None,
        "default",
        json!({"status": {kopf_id: null}}),
    )
    .await;
    handled_after_resume(&operator, "while-kopf").await;

    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn mandatory_peering_stays_paused_until_the_object_exists() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, false).await;
    let operator = cluster.start_operator(seed("op").peering("default"));
    wait_paused_for(
        operator.journal(),
        "waiting for the peering object 'default'",
    )
    .await;
    create_while_paused(&client, &operator, "early").await;
    tokio::time::sleep(LIFETIME).await;
    assert_eq!(resumes(&operator.journal().records()), 0, "still paused");

    create(
        &client,
        &cluster_peerings(),
        None,
        json!({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": "default"}}),
    )
    .await;
    handled_after_resume(&operator, "early").await;
    wait_for_peers(&client, None, "the operator's record", |s| {
        has_peer(s, "op")
    })
    .await;

    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// The peer records of the `default` ClusterKopfPeering with this priority.
async fn records_of_priority(client: &kube::Client, priority: i64) -> Vec<String> {
    let status = peers(client, None).await;
    status
        .as_object()
        .map(|records| {
            records
                .iter()
                .filter(|(_, record)| record["priority"] == priority)
                .map(|(identity, _)| identity.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Kopf's `peering.stealth` only silences the keep-alives that went well: a stealth
/// operator still writes its record (its peers see it) and still pauses for a peer of
/// higher priority; it just logs no `Keep-alive ...: ok.` line, where one without it does.
#[tokio::test]
async fn a_stealth_operator_peers_as_any_other_without_logging_its_keepalives() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    apply_peering_manifests(&client, true).await;
    let seed = guest("seed");
    let seed = seed.to_string_lossy();
    let stealthy = kapsel_cli::Runner::start_on(
        client.clone(),
        [
            "run",
            "-A",
            "--priority",
            "5",
            "--setting",
            "peering.stealth=true",
            &seed,
        ],
    )
    .await
    .expect("started");
    wait_for_peers(&client, None, "the stealth operator's record", |s| {
        s.as_object()
            .is_some_and(|r| r.values().any(|r| r["priority"] == 5))
    })
    .await;
    let loud =
        kapsel_cli::Runner::start_on(client.clone(), ["run", "-A", "--priority", "6", &seed])
            .await
            .expect("started");
    wait_for_peers(&client, None, "the louder operator's record", |s| {
        s.as_object()
            .is_some_and(|r| r.values().any(|r| r["priority"] == 6))
    })
    .await;
    let louder = records_of_priority(&client, 6).await.remove(0);
    // It obeys: it pauses in favour of the peer of higher priority ...
    wait_paused_for(stealthy.journal(), &louder).await;
    // ... which knew of it from its record, written by the keep-alive it did not log.
    assert_eq!(records_of_priority(&client, 5).await.len(), 1);
    let quiet = stealthy.output();
    assert!(
        !quiet.contains("Keep-alive in 'default'"),
        "a stealth operator logs no keep-alive: {quiet}"
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !loud
        .output()
        .contains("Keep-alive in 'default' cluster-wide: ok.")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "an operator without stealth logs its keep-alives: {}",
            loud.output()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert_eq!(loud.stop().await.exit_code, 0);
    assert_eq!(stealthy.stop().await.exit_code, 0);
    cluster.shutdown().await.unwrap();
}

/// The identities of the records of priority `priority` in a peering object's status.
fn of_priority(status: &Value, priority: i64) -> Vec<String> {
    status
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, record)| record["priority"] == priority)
        .map(|(identity, _)| identity.clone())
        .collect()
}

/// A client of the admin of a cluster with RBAC on.
async fn admin_client(cluster: &Cluster) -> kube::Client {
    let kubeconfig = Kubeconfig::from_yaml(&cluster.server().kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kapsel_host::kube_client(config).expect("client")
}

/// A client acting as the ServiceAccount `default/<name>` of a cluster with RBAC on.
async fn service_account_client(cluster: &Cluster, name: &str) -> kube::Client {
    let server = cluster.server();
    let token = server
        .service_account_token("default", name, Duration::from_secs(3600))
        .expect("a token");
    let text = server.kubeconfig().replace(&server.admin_token(), &token);
    let kubeconfig = Kubeconfig::from_yaml(&text).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kapsel_host::kube_client(config).expect("client")
}

/// Creates what `kapsel rbac` wrote: the ServiceAccount, the ClusterRole, its binding.
async fn apply_rbac(admin: &kube::Client, manifests: &str) {
    for document in serde_yaml::Deserializer::from_str(manifests) {
        let document: Value = serde::Deserialize::deserialize(document).expect("YAML");
        let (group, plural) = match document["kind"].as_str() {
            Some("ServiceAccount") => ("", "serviceaccounts"),
            Some("ClusterRole") => ("rbac.authorization.k8s.io", "clusterroles"),
            Some("ClusterRoleBinding") => ("rbac.authorization.k8s.io", "clusterrolebindings"),
            other => panic!("kapsel rbac wrote an unexpected {other:?}"),
        };
        let api_version = document["apiVersion"].as_str().expect("apiVersion");
        let resource = ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: api_version.into(),
            kind: document["kind"].as_str().unwrap_or_default().into(),
            plural: plural.into(),
        };
        let namespace = document["metadata"]["namespace"]
            .as_str()
            .map(str::to_owned);
        create(admin, &resource, namespace.as_deref(), document).await;
    }
}

/// Kopf's legacy peering resources (`zalando.org/v1`), the only ones installed: the
/// operators find them by discovery and peer through them, with what `kapsel rbac`
/// grants and nothing more (so without a request to the absent `kopf.dev` group, and
/// without a refusal), and `freeze`/`resume` write there too.
#[tokio::test]
async fn operators_peer_through_the_legacy_group_when_only_it_is_installed() {
    let cluster = Cluster::start_with(ServerConfig::default().rbac(true))
        .await
        .unwrap();
    let admin = admin_client(&cluster).await;
    apply_peering_manifests_of(&admin, "zalando.org", true).await;
    let seed = guest("seed");
    let request = kapsel_host::RbacRequest::new([&seed]).service_account("op", "default");
    let manifests = kapsel_host::rbac(&request, admin.clone()).await.unwrap();
    apply_rbac(&admin, &manifests).await;
    let client = service_account_client(&cluster, "op").await;
    let seed = seed.to_string_lossy();

    let deployed = kapsel_cli::Runner::start_on(client.clone(), ["run", "-A", &seed])
        .await
        .expect("started");
    wait_for_peers_of(&admin, "zalando.org", None, "the deployed record", |s| {
        of_priority(s, 0).len() == 1
    })
    .await;
    let dev = kapsel_cli::Runner::start_on(client.clone(), ["run", "-A", "--dev", &seed])
        .await
        .expect("started");
    wait_for_peers_of(&admin, "zalando.org", None, "the dev record", |s| {
        of_priority(s, 666).len() == 1
    })
    .await;
    let status = peers_of(&admin, "zalando.org", None).await;
    let dev_identity = of_priority(&status, 666).remove(0);
    wait_paused_for(deployed.journal(), &dev_identity).await;
    assert!(pauses(&dev.journal().records()).is_empty(), "dev runs");
    assert_eq!(dev.stop().await.exit_code, 0);
    deployed
        .journal()
        .wait_for(PATIENCE, |r| resumes(r) == 1)
        .await
        .expect("resumes once the dev operator left");

    // `freeze` and `resume` find the legacy group as well.
    let freezer = Freezer::new("default")
        .identity("admin@console")
        .client(admin.clone());
    freezer
        .clone()
        .freeze(Duration::from_secs(600))
        .await
        .unwrap();
    let status = peers_of(&admin, "zalando.org", None).await;
    assert_eq!(status["admin@console"]["priority"], 100, "{status}");
    wait_paused_for(deployed.journal(), "admin@console").await;
    freezer.resume().await.unwrap();
    deployed
        .journal()
        .wait_for(PATIENCE, |r| resumes(r) == 2)
        .await
        .expect("resumes once the freeze is lifted");
    assert_eq!(deployed.stop().await.exit_code, 0);

    let counts = cluster.server().request_counts();
    let refused: Vec<_> = counts.iter().filter(|c| c.kind.code == 403).collect();
    assert!(refused.is_empty(), "{refused:?}");
    let absent: Vec<_> = counts
        .iter()
        .filter(|c| c.kind.group == "kopf.dev")
        .collect();
    assert!(
        absent.is_empty(),
        "no request to the absent group: {absent:?}"
    );
    cluster.shutdown().await.unwrap();
}

/// Peering follows discovery: with `--peering` and no peering resource at all, the
/// operator waits paused, says why, and peers once the (legacy) CRDs are deployed and
/// the object is created, without a restart.
#[tokio::test]
async fn peering_crds_deployed_while_running_are_peered_through() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let operator = cluster.start_operator(seed("op").peering("default"));
    wait_paused_for(operator.journal(), "no peering resource is served").await;
    create_while_paused(&client, &operator, "early").await;

    apply_peering_manifests_of(&client, "zalando.org", false).await;
    create(
        &client,
        &cluster_peerings_of("zalando.org"),
        None,
        json!({"apiVersion": "zalando.org/v1", "kind": "ClusterKopfPeering", "metadata": {"name": "default"}}),
    )
    .await;
    handled_after_resume(&operator, "early").await;
    wait_for_peers_of(&client, "zalando.org", None, "the operator's record", |s| {
        has_peer(s, "op")
    })
    .await;

    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// An operator whose grants lack the peering resource (`kapsel rbac --standalone`'s) is
/// refused reading it: it says so once, however often its watch retries, and runs
/// without peering.
#[tokio::test]
async fn a_forbidden_peering_resource_is_warned_about_once_and_peering_is_off() {
    let cluster = Cluster::start_with(ServerConfig::default().rbac(true))
        .await
        .unwrap();
    let admin = admin_client(&cluster).await;
    apply_peering_manifests(&admin, true).await;
    let seed = guest("seed");
    let request = kapsel_host::RbacRequest::new([&seed])
        .service_account("op", "default")
        .standalone();
    apply_rbac(
        &admin,
        &kapsel_host::rbac(&request, admin.clone()).await.unwrap(),
    )
    .await;
    let client = service_account_client(&cluster, "op").await;
    let operator = kapsel_cli::Runner::start_on(client, ["run", "-A", &seed.to_string_lossy()])
        .await
        .expect("started");
    create(&admin, &core("Pod", "pods"), Some("default"), pod("p")).await;
    wait_handled(operator.journal(), "default/p").await;
    // The watch of the peering object is refused, retried, refused again.
    let refused_watches = || {
        cluster
            .server()
            .request_counts()
            .iter()
            .filter(|c| c.kind.resource == "clusterkopfpeerings" && c.kind.code == 403)
            .filter(|c| c.kind.verb == "list" || c.kind.verb == "watch")
            .map(|c| c.count)
            .sum::<u64>()
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while refused_watches() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watch is retried: {:?}",
            cluster.server().request_counts()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = operator.output();
    let warned = output
        .lines()
        .filter(|l| l.contains("clusterkopfpeerings.kopf.dev is forbidden"))
        .count();
    assert_eq!(warned, 1, "said once: {output}");
    assert!(pauses(&operator.journal().records()).is_empty());
    assert_eq!(operator.stop().await.exit_code, 0);
    cluster.shutdown().await.unwrap();
}
