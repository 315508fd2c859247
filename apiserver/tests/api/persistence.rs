//! The state file: saved on shutdown and periodically, loaded at start, never clobbered.

use super::*;
use serde_json::json;

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
    // Saved periodically too, without a clean shutdown.
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
