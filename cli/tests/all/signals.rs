//! `kapsel run` stopped by a signal, the binary itself on a `kapsel dev-cluster` (its
//! guest compiled by a helper process, `kapsel compile-guest`): on
//! SIGTERM or SIGINT the handler call in flight finishes (its patch lands), the cleanup
//! handlers run, the operator's peer record is removed, and it exits 0; a second signal
//! exits at once (130), without waiting for any of it.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]
#![allow(
    clippy::zombie_processes,
    reason = "every child is killed or waited for before the test ends"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use crate::support::{DevCluster, guest, kapsel, scratch, wait_until};
use serde_json::{Value, json};

/// `kapsel run -A` of the `activities` guest on the dev cluster, its log in a file.
struct Operator {
    child: Child,
    log: PathBuf,
}

impl Operator {
    fn start(cluster: &DevCluster, dir: &Path) -> Operator {
        let log = dir.join("operator.log");
        let child = kapsel()
            .args(["run", "-A", "--kubeconfig"])
            .arg(&cluster.kubeconfig)
            .arg(guest("activities"))
            .env("POD_ID", "signalled")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Operator { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_for_line(&mut self, text: &str) {
        let log = self.log.clone();
        wait_until(&format!("the log line {text:?}"), || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|l| l.contains(text))
        });
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the operator exited: {}",
            self.log()
        );
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn wait_for_exit(&mut self) -> ExitStatus {
        let child = &mut self.child;
        wait_until("the operator's exit", || child.try_wait().unwrap())
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A ConfigMap that `linger` spends `seconds` of wall-clock time on.
fn lingering(name: &str, seconds: f64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"kapsel.test/linger": "yes"}},
        "data": {"seconds": seconds.to_string()},
    })
}

fn graceful_stop_on(signal: &str) {
    let dir = scratch(&format!("signal-{signal}"));
    let cluster = DevCluster::start(&dir);
    cluster.with_peering();
    let mut operator = Operator::start(&cluster, &dir);
    wait_until("the operator's peer record", || {
        cluster.peers().get("signalled").map(|_| ())
    });

    cluster.create(
        "/api/v1/namespaces/default/configmaps",
        &lingering("in-flight", 1.0),
    );
    operator.wait_for_line("lingering in in-flight");
    operator.signal(signal);
    let status = operator.wait_for_exit();
    let log = operator.log();
    assert_eq!(status.code(), Some(0), "{log}");

    // The call in flight finished, and its patch was sent.
    let (code, configmap) = cluster.request(
        "GET",
        "/api/v1/namespaces/default/configmaps/in-flight",
        &Value::Null,
    );
    assert_eq!(code, 200, "{configmap}");
    assert_eq!(
        configmap["metadata"]["annotations"]["kapsel.test/lingered"], "yes",
        "{log}"
    );
    assert!(log.contains("tidied up"), "cleanup handlers ran: {log}");
    // `kapsel run` compiles its guests in a helper process (its own `compile-guest`), so
    // that the compiler never stays in the operator's memory.
    assert!(
        log.contains("Loaded guest 'activities'") && log.contains("compiled by a helper process"),
        "{log}"
    );
    assert!(!log.contains("in a separate process"), "no fallback: {log}");
    assert!(
        cluster.peers().get("signalled").is_none_or(Value::is_null),
        "the peer record is removed: {}",
        cluster.peers()
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sigterm_lets_the_call_in_flight_finish_runs_cleanup_and_leaves_the_peering() {
    graceful_stop_on("TERM");
}

#[test]
fn sigint_lets_the_call_in_flight_finish_runs_cleanup_and_leaves_the_peering() {
    graceful_stop_on("INT");
}

/// The graceful stop waits for the call in flight (up to its grace, 2 s, as the call
/// here lasts 30 s) before the cleanup handlers run; a second signal does not wait.
#[test]
fn a_second_signal_exits_at_once() {
    let dir = scratch("signalled-twice");
    let cluster = DevCluster::start(&dir);
    let mut operator = Operator::start(&cluster, &dir);
    operator.wait_for_line("warmed up after 2 attempts");
    cluster.create(
        "/api/v1/namespaces/default/configmaps",
        &lingering("endless", 30.0),
    );
    operator.wait_for_line("lingering in endless");
    operator.signal("INT");
    operator.wait_for_line("stopping gracefully");
    operator.signal("INT");
    let status = operator.wait_for_exit();
    let log = operator.log();
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(
        log.contains("Second signal received: exiting now."),
        "{log}"
    );
    assert!(
        !log.contains("tidied up"),
        "no waiting for the cleanup: {log}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
