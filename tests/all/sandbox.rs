//! The sandbox: a guest that loops forever is stopped at its deadline, one that
//! allocates without bound at its memory cap, one that panics traps; the host
//! and the other handlers go on; and a guest that tries to reach the environment, files,
//! the network or the timezone gets nothing.

use std::time::Duration;

use kapsel_host::{Operator, Record, testing::Cluster};
use kapsel_tests::*;
use serde_json::json;

fn failures(records: &[Record], handler: &str) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFailed {
                handler: h, error, ..
            } if h == handler => Some(error.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn misbehaving_handlers_are_stopped_and_the_host_goes_on() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let cm = core("ConfigMap", "configmaps");
    let operator = cluster.start_operator(
        Operator::new([guest("misbehaving")])
            .call_deadline(Duration::from_millis(300))
            .call_memory_mib(32),
    );
    let journal = operator.journal().clone();
    for behaviour in ["spin", "hog", "crash"] {
        create(
            &client,
            &cm,
            Some("default"),
            configmap(behaviour, json!({"kapsel.test/behaviour": behaviour})),
        )
        .await;
    }
    journal
        .wait_for(PATIENCE, |r| {
            ["spin", "hog", "crash"]
                .iter()
                .all(|h| !failures(r, h).is_empty())
        })
        .await
        .expect("each misbehaviour fails its call");
    let records = journal.records();
    let spin = failures(&records, "spin").join(" | ");
    let hog = failures(&records, "hog").join(" | ");
    let crash = failures(&records, "crash").join(" | ");
    assert!(
        spin.contains("deadline") || spin.contains("time"),
        "spin: {spin}"
    );
    assert!(hog.contains("memory"), "hog: {hog}");
    assert!(
        crash.contains("panic") || crash.contains("trap"),
        "crash: {crash}"
    );

    // The host goes on: a well-behaved configmap is still handled afterwards.
    create(&client, &cm, Some("default"), configmap("fine", json!({}))).await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "ok").iter().any(|(o, _)| o == "default/fine")
        })
        .await
        .expect("other handlers keep running");
    assert!(!operator.is_finished());
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// "No files, network or environment" (DESIGN.md): a guest that tries every way out a
/// std program has gets nothing, though the host process has all of them — an
/// environment, a file the test wrote, a listener on loopback, a name resolver.
#[tokio::test]
async fn a_guest_reaches_no_environment_files_network_or_timezone() {
    let cluster = Cluster::start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("kapsel-escapes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("host-only.txt");
    std::fs::write(&file, "for the host's eyes only").unwrap();
    let file = file.display().to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(
        std::env::vars_os().next().is_some(),
        "the host has an environment to leak"
    );

    let operator = cluster.start_operator(Operator::new([guest("escapes")]));
    let journal = operator.journal().clone();
    create(
        &cluster.client(),
        &core("ConfigMap", "configmaps"),
        Some("default"),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "escape", "labels": {"kapsel.test/escape": "yes"}},
            "data": {"file": file, "port": port.to_string()},
        }),
    )
    .await;
    journal
        .wait_for(PATIENCE, |r| {
            r.iter().any(
                |r| matches!(r, Record::HandlerFinished { handler, outcome, .. } if handler == "escape" && outcome == "success"),
            )
        })
        .await
        .expect("the handler ran to its end");

    let lines = guest_logs(&journal.records(), "escapes");
    let refused = [
        format!("read {file}"),
        "list /".to_owned(),
        "list .".to_owned(),
        format!("write {file}.copy"),
        format!("connect 127.0.0.1:{port}"),
        "bind udp".to_owned(),
        "resolve localhost".to_owned(),
        "timezone: TZ=None, /etc/localtime".to_owned(),
    ];
    assert_eq!(lines.len(), 2 + refused.len(), "{lines:#?}");
    assert_eq!(lines[..2], ["env: []", "args: []"], "{lines:#?}");
    for (line, attempt) in lines[2..].iter().zip(&refused) {
        assert!(
            line.starts_with(&format!("{attempt}: refused (")),
            "{attempt}: {line}"
        );
    }
    // The call has ended: a connection it made would be waiting to be accepted.
    assert_eq!(
        listener.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "nothing connected"
    );
    assert!(!std::path::Path::new(&format!("{file}.copy")).exists());
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
