//! Kopf 1.45 itself as the webhook server: Kopf's own admission example
//! (tests/fixtures/kopf/admission.py, from nolar/kopf's examples/17-admission) run by
//! `kopf run` against the embedded API server, with a certificate the test makes given as
//! files and `settings.admission.managed`, so that Kopf writes the webhook configurations
//! and the API server calls Kopf's HTTPS server on each write, as kube-apiserver does.
//! What kube-rs sees is checked: the example's refusals, its mutation, its warnings.
//!
//! Needs Python with Kopf 1.45 in a virtual environment: `$KAPSEL_KOPF_VENV` (a test
//! failure when it has no Kopf), else `$CARGO_TARGET_DIR/kopf-venv` (the one
//! scripts/record-kopf-fixtures makes); without either the test says so and passes, as
//! `make test` needs no Python.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use kapsel_host::testing::Cluster;
use kapsel_tests::admission::*;
use kapsel_tests::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

/// The name of the configurations Kopf manages (the example's).
const MANAGED: &str = "auto.kopf.dev";
const VALIDATING: [&str; 4] = [
    "authhook.auto.kopf.dev",
    "validate1.auto.kopf.dev",
    "validate2.spec.field.auto.kopf.dev",
    "validate-subresources.auto.kopf.dev",
];
const MUTATING: [&str; 1] = ["mutate1.auto.kopf.dev"];

/// `kopf` in the virtual environment to use, or None (with the reason printed).
fn kopf() -> Option<PathBuf> {
    if let Some(venv) = std::env::var_os("KAPSEL_KOPF_VENV") {
        let kopf = Path::new(&venv).join("bin").join("kopf");
        assert!(kopf.exists(), "KAPSEL_KOPF_VENV has no {}", kopf.display());
        return Some(kopf);
    }
    let venv = std::env::var_os("CARGO_TARGET_DIR").map(|d| Path::new(&d).join("kopf-venv"));
    match venv.map(|v| v.join("bin").join("kopf")) {
        Some(kopf) if kopf.exists() => Some(kopf),
        _ => {
            eprintln!(
                "skipped: no Kopf (set KAPSEL_KOPF_VENV to a virtual environment with kopf==1.45.*)"
            );
            None
        }
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it, written as PEM files into
/// `dir`: (cafile, certfile, pkeyfile).
fn certificate_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (cert, key, ca) = signed_certificate();
    let files = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&files.0, ca).expect("a file of the test");
    std::fs::write(&files.1, cert).expect("a file of the test");
    std::fs::write(&files.2, key).expect("a file of the test");
    files
}

/// Kopf running the example, with its log; killed on drop, its files removed.
struct Kopf {
    _child: tokio::process::Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Drop for Kopf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Kopf {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for Kopf to write the managed configuration of this kind with `wanted`.
    async fn configured(&self, client: &kube::Client, mutating: bool, wanted: &[&str]) {
        let api: Api<DynamicObject> =
            Api::all_with(client.clone(), &webhook_configurations(mutating));
        // Python's start-up and Kopf's imports take a few seconds on a busy machine.
        let deadline = Instant::now() + PATIENCE * 6;
        loop {
            if let Ok(Some(found)) = api.get_opt(MANAGED).await {
                let found = serde_json::to_value(found).expect("JSON of a known shape");
                let names: Vec<&str> = found["webhooks"]
                    .as_array()
                    .map(|hooks| hooks.iter().filter_map(|h| h["name"].as_str()).collect())
                    .unwrap_or_default();
                if names == wanted {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "Kopf did not configure {wanted:?}; its log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A cluster with the kopfexamples CRD and Kopf serving the example's webhooks, once
/// both configurations are written; None without Kopf.
async fn kopf_admitting() -> Option<(Cluster, Kopf)> {
    let kopf = kopf()?;
    let cluster = Cluster::start().await.expect("a cluster");
    create_kopfexamples_crd(&cluster.client()).await;
    let dir = std::env::temp_dir().join(format!(
        "kapsel-kopf-admission-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("a file of the test");
    let (cafile, certfile, pkeyfile) = certificate_files(&dir);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server().kubeconfig()).expect("a file of the test");
    let log = dir.join("kopf.log");
    let operator = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/kopf/admission.py");
    let child = tokio::process::Command::new(kopf)
        .args(["run", "--standalone", "-A", "--verbose"])
        .arg(operator)
        .env("KUBECONFIG", &kubeconfig)
        .env("KOPF_ADMISSION_PORT", free_port().to_string())
        .env("KOPF_ADMISSION_CAFILE", &cafile)
        .env("KOPF_ADMISSION_CERTFILE", &certfile)
        .env("KOPF_ADMISSION_PKEYFILE", &pkeyfile)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("a file of the test"))
        .stderr(
            std::fs::File::options()
                .append(true)
                .open(&log)
                .expect("a file of the test"),
        )
        .kill_on_drop(true)
        .spawn()
        .expect("kopf starts");
    let kopf = Kopf {
        _child: child,
        dir,
        log,
    };
    kopf.configured(&cluster.client(), false, &VALIDATING).await;
    kopf.configured(&cluster.client(), true, &MUTATING).await;
    Some((cluster, kopf))
}

#[tokio::test]
async fn kopfs_refusals_reach_the_client_with_their_messages_and_codes() {
    let Some((cluster, kopf)) = kopf_admitting().await else {
        return;
    };
    let client = cluster.client();
    let refused = try_create(&client, kex("wrong", json!({}), json!({"field": "wrong"})))
        .await
        .expect_err("validate1 refuses");
    assert_eq!(
        refused.message,
        "admission webhook \"validate1.auto.kopf.dev\" denied the request: \
         Meh! I don't like it. Change the field.",
        "{}",
        kopf.log()
    );
    // Kopf's AdmissionError without a code: 500.
    assert_eq!(refused.code, 500);
    let refused = try_create(
        &client,
        kex("lazy", json!({}), json!({"field": "not-allowed"})),
    )
    .await
    .expect_err("validate2 refuses");
    assert_eq!(
        refused.message,
        "admission webhook \"validate2.spec.field.auto.kopf.dev\" denied the request: \
         I'm too lazy anyway. Go away!"
    );
    assert_eq!(refused.code, 555);
    let api = kopfexamples_api(&client);
    for name in ["wrong", "lazy"] {
        assert!(api.get_opt(name).await.unwrap().is_none(), "{name} stored");
    }
    // validate1 lets a dry run pass (Kopf's `dryrun` kwarg), and nothing is stored.
    let (code, _, _) = create_raw(
        &client,
        &kex("wrong", json!({}), json!({"field": "wrong"})),
        true,
    )
    .await;
    assert_eq!(code, 201);
    assert!(
        api.get_opt("wrong").await.unwrap().is_none(),
        "dry run stored"
    );
}

#[tokio::test]
async fn kopf_mutates_by_labels_warns_and_checks_the_status_subresource() {
    let Some((cluster, kopf)) = kopf_admitting().await else {
        return;
    };
    let client = cluster.client();
    let labelled = kex(
        "labelled",
        json!({"somelabel": "somevalue"}),
        json!({"field": "x"}),
    );
    let created = try_create(&client, labelled).await.expect("allowed");
    assert_eq!(
        created["spec"]["injected"],
        123,
        "{created}\n{}",
        kopf.log()
    );
    let plain = try_create(&client, kex("plain", json!({}), json!({"field": "x"})))
        .await
        .expect("allowed");
    assert_eq!(plain["spec"], json!({"field": "x"}), "the objectSelector");
    // authhook's and validate_subresources' warnings, as Kopf words them; the API server
    // names itself as kube-apiserver does.
    let (code, warnings, _) = create_raw(
        &client,
        &kex("warned", json!({}), json!({"field": "x"})),
        false,
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert_eq!(
        warnings[0], "Accessing as user-agent: kube-apiserver-admission",
        "{warnings:?}"
    );
    assert_eq!(
        warnings[1..],
        [
            "SSL peer is not identified.",
            "Also update status.field to match spec.field: 'x' != None",
        ]
    );
    // The status subresource: validate_subresources (`subresource='*'`) refuses a status
    // unlike the spec, and admits an equal one.
    let api = kopfexamples_api(&client);
    let status = |field: &str| Patch::Merge(json!({"status": {"field": field}}));
    let refused = api
        .patch_status("plain", &PatchParams::default(), &status("y"))
        .await
        .expect_err("refused");
    let kube::Error::Api(refused) = refused else {
        panic!("{refused}")
    };
    assert_eq!(
        refused.message,
        "admission webhook \"validate-subresources.auto.kopf.dev\" denied the request: \
         status.field MUST be equal to spec.field!"
    );
    let patched = api
        .patch_status("plain", &PatchParams::default(), &status("x"))
        .await
        .expect("admitted");
    assert_eq!(patched.data["status"]["field"], "x");
}
