//! `kapsel freeze` and `kapsel resume`, as the real binary runs them against
//! `kapsel dev-cluster`: the peer record Kopf's `kopf freeze` writes, then its
//! removal; a missing peering object fails with exit code 1.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn kapsel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kapsel"))
}

/// Stops the dev cluster even when an assertion fails.
struct DevCluster {
    child: Child,
    addr: String,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl DevCluster {
    fn start() -> DevCluster {
        let dir = std::env::temp_dir().join(format!("kapsel-freeze-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let child = kapsel()
            .arg("dev-cluster")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&kubeconfig)
                && let Some(url) = text.lines().find_map(|l| l.trim().strip_prefix("server: "))
            {
                break url.trim_start_matches("http://").to_owned();
            }
            assert!(Instant::now() < deadline, "no kubeconfig written");
            std::thread::sleep(Duration::from_millis(50));
        };
        DevCluster {
            child,
            addr,
            kubeconfig,
            dir,
        }
    }

    /// One HTTP/1.1 request; the status code and the JSON body.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let code = response
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let json = response
            .find("\r\n\r\n")
            .and_then(|at| serde_json::from_str(&response[at + 4..]).ok())
            .unwrap_or(Value::Null);
        (code, json)
    }

    /// Runs a `kapsel` command on this cluster.
    fn kapsel(&self, args: &[&str]) -> Output {
        kapsel()
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("POD_ID")
            .output()
            .unwrap()
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn peering_manifests() -> Vec<Value> {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/operator");
    let read = |file: &str| std::fs::read_to_string(deploy.join(file)).unwrap();
    let text = read("peering-crds.yaml") + "\n---\n" + &read("peering-default.yaml");
    text.split("\n---")
        .filter_map(|doc| serde_yaml::from_str::<Value>(doc).ok())
        .filter(Value::is_object)
        .collect()
}

#[test]
fn freeze_writes_a_kopf_peer_record_and_resume_removes_it() {
    let cluster = DevCluster::start();
    for doc in peering_manifests() {
        let path = match doc["kind"].as_str() {
            Some("CustomResourceDefinition") => {
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            }
            Some("ClusterKopfPeering") => "/apis/kopf.dev/v1/clusterkopfpeerings",
            _ => continue,
        };
        let (code, body) = cluster.request("POST", path, &doc.to_string());
        assert_eq!(code, 201, "{body}");
    }
    let object = "/apis/kopf.dev/v1/clusterkopfpeerings/default";

    let frozen = cluster.kapsel(&[
        "freeze",
        "-A",
        "-P",
        "default",
        "-t",
        "300",
        "-i",
        "admin",
        "-m",
        "maintenance",
    ]);
    assert!(frozen.status.success(), "{frozen:?}");
    let (_, body) = cluster.request("GET", object, "");
    let record = &body["status"]["admin"];
    assert_eq!(record["priority"], 100, "Kopf's default: {body}");
    assert_eq!(record["lifetime"], 300, "{body}");
    assert!(record["lastseen"].is_string(), "{body}");

    let dev = cluster.kapsel(&[
        "freeze",
        "-A",
        "--peering",
        "default",
        "--lifetime",
        "60",
        "--dev",
    ]);
    assert!(dev.status.success(), "{dev:?}");
    let (_, body) = cluster.request("GET", object, "");
    let status = body["status"].as_object().unwrap();
    let manual = status
        .iter()
        .find(|(id, _)| *id != "admin")
        .map(|(id, record)| (id.clone(), record["priority"].clone()));
    let (identity, priority) = manual.unwrap();
    assert!(
        identity.contains('@') && !identity.contains('/'),
        "a manual identity is user@host: {identity}"
    );
    assert_eq!(priority, 666);

    let resumed = cluster.kapsel(&["resume", "-A", "-P", "default", "-i", "admin"]);
    assert!(resumed.status.success(), "{resumed:?}");
    let (_, body) = cluster.request("GET", object, "");
    assert!(body["status"].get("admin").is_none(), "{body}");
    assert!(body["status"].get(&identity).is_some(), "{body}");

    let missing = cluster.kapsel(&["freeze", "-A", "-P", "nowhere", "-t", "60"]);
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    let stdout = String::from_utf8_lossy(&missing.stdout);
    assert!(
        stderr.contains("'nowhere'") || stdout.contains("'nowhere'"),
        "{stderr}{stdout}"
    );

    let usage = cluster.kapsel(&["freeze", "-A", "-P", "default"]);
    assert_eq!(usage.status.code(), Some(2), "--lifetime is required");
}
