//! The `kapsel` command's logging flags: `--log-format json` writes one JSON
//! object per line with Kopf's keys, `-q` keeps only warnings and errors; and a
//! liveness URL that cannot be served is a usage error.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::process::{Command, Output};

/// Runs `kapsel <logging flags> run --embedded -A <a missing guest>`: it starts an
/// in-memory API server (info lines), fails to load the guest (error lines) and exits 1.
fn run_without_guests(name: &str, logging: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!("kapsel-logging-{name}-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_kapsel"))
        .args(logging)
        .args(["run", "--embedded", "--kubeconfig"])
        .arg(dir.join("kubeconfig"))
        .args(["-A", "/nonexistent/guest.wasm"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // A guest that cannot be loaded is an input error.
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    output
}

fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8(output.stderr.clone())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn json_lines_have_kopfs_keys() {
    let output = run_without_guests("json", &["--log-format", "json"]);
    let lines: Vec<serde_json::Value> = stderr_lines(&output)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect();
    for line in &lines {
        assert!(line["timestamp"].is_string(), "{line}");
        assert!(line["message"].is_string(), "{line}");
    }
    let severities: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["severity"].as_str())
        .collect();
    assert!(severities.contains(&"info"), "{severities:?}");
    assert!(severities.contains(&"error"), "{severities:?}");
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("/nonexistent/guest.wasm"))),
        "{lines:?}"
    );
}

#[test]
fn quiet_keeps_only_warnings_and_errors() {
    let loud = run_without_guests("loud", &["--log-format", "plain"]);
    let loud = stderr_lines(&loud);
    assert!(
        loud.iter()
            .any(|l| l.starts_with("The API server is serving on")),
        "{loud:?}"
    );

    let quiet = run_without_guests("quiet", &["-q", "--log-format", "plain"]);
    let quiet = stderr_lines(&quiet);
    assert!(!quiet.is_empty());
    assert!(
        quiet
            .iter()
            .all(|l| !l.contains("The API server is serving on")),
        "{quiet:?}"
    );
    assert!(
        quiet.iter().any(|l| l.contains("no guest could be loaded")),
        "{quiet:?}"
    );
}

#[test]
fn a_liveness_url_that_cannot_be_served_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_kapsel"))
        .args([
            "run",
            "-A",
            "--liveness",
            "https://0.0.0.0:8080/healthz",
            "x.wasm",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("only http://"), "{stderr}");
}
