//! The state file: every acknowledged write in it before the answer (a SIGKILLed server
//! loses none), torn last records dropped, damage reported, old files still loaded.

use super::*;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kapsel-apiserver-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("state.json")
}

#[tokio::test]
async fn state_survives_restart() {
    let path = temp_path("roundtrip");
    let _ = std::fs::remove_file(&path);
    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        kopf_crd(),
    )
    .await;
    post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "kept"}}),
    )
    .await;
    let ex = post(
        &server,
        "/apis/kopf.dev/v1/namespaces/kept/kopfexamples",
        json!({"metadata": {"name": "ex"}, "spec": {"a": 1}}),
    )
    .await
    .json();
    let cm = post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
    )
    .await
    .json();
    server.shutdown().await.unwrap();
    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    let got = get(&server, "/apis/kopf.dev/v1/namespaces/kept/kopfexamples/ex")
        .await
        .json();
    assert_eq!(got["spec"], json!({"a": 1}));
    assert_eq!(got["metadata"]["uid"], ex["metadata"]["uid"]);
    let got = get(&server, "/api/v1/namespaces/default/configmaps/c")
        .await
        .json();
    assert_eq!(
        got["metadata"]["resourceVersion"],
        cm["metadata"]["resourceVersion"]
    );
    assert_eq!(get(&server, "/apis/kopf.dev/v1").await.code, 200);
    // New writes continue the resourceVersion sequence.
    let n = post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "d"}}),
    )
    .await
    .json();
    let new_rv: u64 = n["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        new_rv
            > ex["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
    );
    // In the file as soon as it is acknowledged, without a shutdown.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"d\""));
    drop(server);
}

#[tokio::test]
async fn broken_state_file_is_an_error_and_left_alone() {
    let path = temp_path("broken");
    std::fs::write(&path, "{not json").unwrap();
    let err = ApiServer::start(Config::default().state_file(&path))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
}

/// Set in the child process of [`acknowledged_writes_survive_sigkill`]: the state file it
/// serves.
const CHILD_STATE: &str = "KAPSEL_APISERVER_CRASH_CHILD_STATE";

/// The real crash: a server in a child process (this test binary, re-run as that child),
/// N writes acknowledged over HTTP, SIGKILL (`Child::kill`), then a restart on the same
/// file must show every acknowledged object at its acknowledged resourceVersion.
#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    if let Some(state) = std::env::var_os(CHILD_STATE) {
        // The child: serve until killed.
        let server = ApiServer::start(Config::default().state_file(state))
            .await
            .unwrap();
        println!("KAPSEL-CHILD-PORT={}", server.addr().port());
        std::future::pending::<()>().await;
    }
    let path = temp_path("sigkill");
    let _ = std::fs::remove_file(&path);
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "persistence::acknowledged_writes_survive_sigkill",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_STATE, &path)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the child starts in time")
            .unwrap()
            .expect("the child prints its port");
        // libtest prints `test <name> ... ` before it, on the same line.
        if let Some((_, p)) = line.split_once("KAPSEL-CHILD-PORT=") {
            break p.parse().unwrap();
        }
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut acknowledged = Vec::new();
    for i in 0..30 {
        let body = json!({"metadata": {"name": format!("cm-{i}")}, "data": {"i": i.to_string()}});
        let r = raw_at(
            addr,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/json"),
            &[],
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(r.code, 201, "{}", r.body);
        acknowledged.push((
            format!("cm-{i}"),
            r.json()["metadata"]["resourceVersion"].clone(),
        ));
    }
    // And an update and a delete, acknowledged the same way.
    let r = raw_at(
        addr,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm-0",
        Some("application/merge-patch+json"),
        &[],
        br#"{"data":{"i":"changed"}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    acknowledged[0].1 = r.json()["metadata"]["resourceVersion"].clone();
    let r = raw_at(
        addr,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/cm-29",
        None,
        &[],
        b"",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    acknowledged.pop();
    child.kill().await.unwrap();

    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    for (name, rv) in &acknowledged {
        let got = get(
            &server,
            &format!("/api/v1/namespaces/default/configmaps/{name}"),
        )
        .await;
        assert_eq!(got.code, 200, "{name} lost: {}", got.body);
        assert_eq!(&got.json()["metadata"]["resourceVersion"], rv, "{name}");
    }
    let first = get(&server, "/api/v1/namespaces/default/configmaps/cm-0")
        .await
        .json();
    assert_eq!(first["data"]["i"], "changed");
    assert_status(
        &get(&server, "/api/v1/namespaces/default/configmaps/cm-29").await,
        404,
        "NotFound",
    );
}

/// A crash mid-append leaves a torn last record: it is dropped, everything before it loads,
/// and the file takes new writes again.
#[tokio::test]
async fn a_torn_last_record_is_dropped() {
    let path = temp_path("torn");
    let _ = std::fs::remove_file(&path);
    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    let base = "/api/v1/namespaces/default/configmaps";
    post(&server, base, json!({"metadata": {"name": "whole"}})).await;
    post(
        &server,
        base,
        json!({"metadata": {"name": "torn"}, "data": {"k": "v"}}),
    )
    .await;
    drop(server);
    let bytes = std::fs::read(&path).unwrap();
    // Cut the last record in the middle, as a crash during its write would.
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + (bytes.len() - last_start) / 2;
    std::fs::write(&path, &bytes[..cut]).unwrap();

    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    assert_eq!(get(&server, &format!("{base}/whole")).await.code, 200);
    assert_status(
        &get(&server, &format!("{base}/torn")).await,
        404,
        "NotFound",
    );
    post(&server, base, json!({"metadata": {"name": "after"}})).await;
    drop(server);
    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    assert_eq!(get(&server, &format!("{base}/whole")).await.code, 200);
    assert_eq!(get(&server, &format!("{base}/after")).await.code, 200);
    post(&server, base, json!({"metadata": {"name": "last"}})).await;
    post(&server, base, json!({"metadata": {"name": "later"}})).await;
    drop(server);

    // A bad record with good ones after it is damage, not a torn write: refused, untouched.
    let text = std::fs::read_to_string(&path).unwrap();
    let damaged = text.replacen("\"whole\"", "\"wh0le\"", 1);
    std::fs::write(&path, &damaged).unwrap();
    let err = ApiServer::start(Config::default().state_file(&path))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged);
    // So is a damaged record in the middle of the log (after the magic line and snapshot).
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 4, "{text}");
    let middle = lines[2].replacen('"', "'", 1);
    lines[2] = &middle;
    let damaged = format!("{}\n", lines.join("\n"));
    std::fs::write(&path, &damaged).unwrap();
    let err = ApiServer::start(Config::default().state_file(&path))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("records after it are intact"),
        "{err}"
    );
}

/// A state file of the previous format (one JSON document) still loads.
#[tokio::test]
async fn old_format_state_files_load() {
    let path = temp_path("old-format");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy", "namespace": "default", "uid": "u-1", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {"k": "v"}});
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "uid": "u-0", "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"}});
    let old = json!({"kind": "KapselState", "version": 1, "resourceVersion": "7", "resources": [
        {"group": "", "plural": "namespaces", "items": [ns]},
        {"group": "", "plural": "configmaps", "items": [cm]},
    ]});
    std::fs::write(&path, old.to_string()).unwrap();
    let (server, _c) = start_with(Config::default().state_file(&path)).await;
    let got = get(&server, "/api/v1/namespaces/default/configmaps/legacy")
        .await
        .json();
    assert_eq!(
        (
            got["data"]["k"].clone(),
            got["metadata"]["resourceVersion"].clone()
        ),
        (json!("v"), json!("7"))
    );
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("KAPSEL-STATE 2\n")
    );
}
