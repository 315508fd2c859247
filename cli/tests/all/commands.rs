//! `kapsel test` and `kapsel rbac`, the binary itself: `test` exits 1 when a case fails,
//! runs only the cases `--filter` names (2 when it names none) and writes `--junit`;
//! `rbac` prints the manifests the guests need, resolved on the cluster of `KUBECONFIG`.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::process::Output;

use crate::support::{DevCluster, guest, kapsel, repository, scratch};
use serde_json::Value;

/// `kapsel test` of the `misbehaving` guest against case files of `tests/cases/`.
fn kapsel_test(cases: &[&str], more: &[&str]) -> Output {
    let cases = cases
        .iter()
        .map(|case| repository().join("tests").join("cases").join(case));
    kapsel()
        .arg("test")
        .arg(guest("misbehaving"))
        .args(cases)
        .args(more)
        .output()
        .unwrap()
}

const PASSING: &str = "a one-minute retry delay passes instantly";
const FAILING: &str = "a wrong expectation fails with a diff";

#[test]
fn test_exits_1_when_a_case_fails_and_writes_junit() {
    let dir = scratch("test-junit");
    let junit = dir.join("report.xml");
    let output = kapsel_test(
        &["slow-retry.yaml", "broken-expectation.yaml"],
        &["--junit", &junit.to_string_lossy()],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("  PASS  {PASSING} (")), "{stdout}");
    assert!(stdout.contains(&format!("  FAIL  {FAILING} (")), "{stdout}");
    assert!(stderr.contains("1 of 2 case(s) failed"), "{stderr}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="misbehaving" tests="2" failures="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(&format!(
            r#"<testcase name="{PASSING}" classname="misbehaving""#
        )),
        "{xml}"
    );
    assert_eq!(xml.matches("<failure message=").count(), 1, "{xml}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn test_runs_only_the_cases_its_filter_names() {
    let dir = scratch("test-filter");
    let junit = dir.join("report.xml");
    let output = kapsel_test(
        &["slow-retry.yaml", "broken-expectation.yaml"],
        &[
            "--filter",
            "one-minute",
            "--junit",
            &junit.to_string_lossy(),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&format!("  PASS  {PASSING} (")), "{stdout}");
    assert!(!stdout.contains(FAILING), "{stdout}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"tests="1" failures="0""#), "{xml}");

    let output = kapsel_test(&["slow-retry.yaml"], &["--filter", "no such case"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a filter that selects nothing: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The rules of the ClusterRole for one resource of one API group.
fn verbs(documents: &[Value], group: &str, resource: &str) -> Vec<String> {
    documents[1]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["apiGroups"][0] == group && r["resources"][0] == resource)
        .map(|r| serde_json::from_value(r["verbs"].clone()).unwrap())
        .unwrap_or_default()
}

/// What a successful `kapsel rbac` printed: the text, and its YAML documents.
fn manifests(output: &std::process::Output) -> (String, Vec<Value>) {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents = serde_yaml::Deserializer::from_str(&stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    (stdout, documents)
}

/// `kapsel dev-cluster` serves sharded lists (a malformed selector is refused, kube's
/// 400); with `--no-sharded-list-and-watch` it serves as a cluster without the feature
/// gate, which ignores the parameter.
#[test]
fn dev_cluster_serves_sharded_lists_unless_told_not_to() {
    let path = "/api/v1/namespaces/default/configmaps?shardSelector=nonsense(";
    let dir = scratch("sharded");
    let (code, answer) = DevCluster::start(&dir).request("GET", path, &Value::Null);
    assert_eq!(code, 400, "{answer}");
    let dir = scratch("unsharded");
    let cluster = DevCluster::start_with(&dir, &["--no-sharded-list-and-watch"]);
    let (code, answer) = cluster.request("GET", path, &Value::Null);
    assert_eq!(code, 200, "{answer}");
}

/// `kapsel dev-cluster` runs the simulated node and kubelet (its node is there); with
/// `--no-kubelet` it has no node.
#[test]
fn dev_cluster_runs_a_kubelet_unless_told_not_to() {
    let path = "/api/v1/nodes/kapsel-node";
    let dir = scratch("kubelet");
    let (code, node) = DevCluster::start(&dir).request("GET", path, &Value::Null);
    assert_eq!(code, 200, "{node}");
    assert_eq!(node["status"]["conditions"][3]["type"], "Ready", "{node}");
    let dir = scratch("no-kubelet");
    let cluster = DevCluster::start_with(&dir, &["--no-kubelet"]);
    let (code, answer) = cluster.request("GET", path, &Value::Null);
    assert_eq!(code, 404, "{answer}");
}

#[test]
fn rbac_prints_the_manifests_for_the_cluster_of_the_kubeconfig() {
    let dir = scratch("rbac");
    let cluster = DevCluster::start(&dir);
    cluster.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &serde_yaml::from_str(
            &std::fs::read_to_string(repository().join("examples/manifests/kopfexamples-crd.yaml"))
                .unwrap(),
        )
        .unwrap(),
    );
    let output = kapsel()
        .args([
            "rbac",
            "-A",
            "--operator-namespace",
            "ops",
            "--service-account",
            "op",
        ])
        .arg(guest("kube_calls"))
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("HOME", &dir)
        .output()
        .unwrap();
    let (_, documents) = manifests(&output);
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    );
    assert_eq!(documents[0]["metadata"]["name"], "op");
    assert_eq!(documents[0]["metadata"]["namespace"], "ops");
    // Resolved on the dev cluster: the CRD's group, and the guest's `permit!`.
    assert_eq!(
        verbs(&documents, "kopf.dev", "kopfexamples"),
        ["list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&documents, "", "configmaps"),
        ["create", "delete", "get", "list", "patch"]
    );

    let output = kapsel()
        .args(["rbac", "/nonexistent/guest.wasm"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "a missing guest is an input error"
    );
    drop(cluster);
    std::fs::remove_dir_all(&dir).ok();
}

/// Every option can be given as a `KAPSEL_<COMMAND>_<OPTION>` variable (Kopf's
/// `KOPF_<COMMAND>_<OPTION>`): a flag as `yes`/`no`, a value as on the command line; the command
/// line wins over a variable; a variable's bad value is a usage error naming it.
#[test]
fn options_are_read_from_kapsel_variables() {
    let crd = repository().join("examples/manifests/kopfexamples-crd.yaml");
    let rbac = |variables: &[(&str, &str)], flags: &[&str]| {
        let mut command = kapsel();
        command.args(["rbac", "--crd"]).arg(&crd).args(flags);
        command.arg(guest("kube_calls"));
        for (name, value) in variables {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let output = rbac(
        &[
            ("KAPSEL_RBAC_SERVICE_ACCOUNT", "from-env"),
            ("KAPSEL_RBAC_OPERATOR_NAMESPACE", "ops"),
            ("KAPSEL_RBAC_NAMESPACE", "team-a"),
            ("KAPSEL_RBAC_STANDALONE", "yes"),
        ],
        &[],
    );
    let (stdout, documents) = manifests(&output);
    let named = |kind: &str| -> Vec<String> {
        documents
            .iter()
            .filter(|d| d["kind"] == kind)
            .map(|d| {
                format!(
                    "{}/{}",
                    d["metadata"]["namespace"].as_str().unwrap_or(""),
                    d["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(named("ServiceAccount"), ["ops/from-env"]);
    // The operator's own namespace too: Events about the operator go on its Pod.
    assert_eq!(named("Role"), ["ops/from-env", "team-a/from-env"]);
    // Standalone: no peering resources are granted.
    assert!(!stdout.contains("kopfpeerings"), "{stdout}");

    // The command line wins; a flag's variable set false leaves it unset.
    let output = rbac(
        &[
            ("KAPSEL_RBAC_SERVICE_ACCOUNT", "from-env"),
            ("KAPSEL_RBAC_STANDALONE", "false"),
        ],
        &["--service-account", "from-flag"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("name: from-flag") && !stdout.contains("from-env"),
        "{stdout}"
    );
    assert!(stdout.contains("kopfpeerings"), "peering granted: {stdout}");

    let output = rbac(&[("KAPSEL_RBAC_STANDALONE", "maybe")], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("maybe") && stderr.contains("standalone"),
        "{stderr}"
    );
}
