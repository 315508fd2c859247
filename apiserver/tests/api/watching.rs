//! Watches: replay from a resourceVersion, bookmarks, timeouts, selectors, 410, kube-rs.

use super::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn types(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn watch_from_resource_version_replays_then_streams() {
    let (server, _client) = start().await;
    let server = Arc::new(server);
    let a = post(&server, CMS, json!({"metadata": {"name": "a"}}))
        .await
        .json();
    let rv = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    raw(
        &server,
        "PATCH",
        &format!("{CMS}/a"),
        Some("application/merge-patch+json"),
        br#"{"data": {"x": "1"}}"#,
    )
    .await;
    let s = server.clone();
    let w = tokio::spawn(async move {
        raw(
            &s,
            "GET",
            &format!("{CMS}?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
            None,
            b"",
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    post(&server, CMS, json!({"metadata": {"name": "b"}})).await;
    raw(&server, "DELETE", &format!("{CMS}/a"), None, b"").await;
    let r = w.await.unwrap();
    assert_eq!(r.code, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    let evs = r.events();
    assert_eq!(types(&evs), ["MODIFIED", "ADDED", "DELETED"]);
    assert_eq!(evs[0]["object"]["data"]["x"], "1");
    assert_eq!(evs[0]["object"]["kind"], "ConfigMap");
    let rvs: Vec<u64> = evs
        .iter()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    // Without a resourceVersion: the current state as ADDED first.
    let r = get(&server, &format!("{CMS}?watch=1&timeoutSeconds=1")).await;
    let evs = r.events();
    assert_eq!(types(&evs), ["ADDED"]);
    assert_eq!(evs[0]["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn a_fresh_cluster_answers_a_watch_from_before_it_started_with_gone() {
    // A fresh kube-apiserver's watch cache starts at its first list: what the server made
    // before it served (its namespaces) is no history to replay.
    let (server, _client) = start().await;
    let r = get(
        &server,
        &format!("{CMS}?watch=true&resourceVersion=1&timeoutSeconds=1"),
    )
    .await;
    let evs = r.events();
    assert_eq!(types(&evs), ["ERROR"]);
    assert_eq!(evs[0]["object"]["code"], 410);
    let namespaces = "/api/v1/namespaces?watch=true&resourceVersion=1&timeoutSeconds=1";
    assert_eq!(types(&get(&server, namespaces).await.events()), ["ERROR"]);
    // From the resourceVersion of a list, the watch goes on.
    let rv = get(&server, CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .to_owned();
    post(&server, CMS, json!({"metadata": {"name": "after"}})).await;
    let r = get(
        &server,
        &format!("{CMS}?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
    )
    .await;
    assert_eq!(types(&r.events()), ["ADDED"]);
}

#[tokio::test]
async fn bookmarks_initial_events_and_gone() {
    let (server, _client) = start().await;
    post(&server, CMS, json!({"metadata": {"name": "a"}})).await;
    let r = get(
        &server,
        &format!("{CMS}?watch=true&allowWatchBookmarks=true&timeoutSeconds=1"),
    )
    .await;
    let evs = r.events();
    assert_eq!(evs[0]["type"], "ADDED");
    let bookmarks: Vec<&Value> = evs.iter().filter(|e| e["type"] == "BOOKMARK").collect();
    assert!(bookmarks.len() >= 2, "{evs:?}");
    assert_eq!(bookmarks[0]["object"]["kind"], "ConfigMap");
    assert_eq!(bookmarks[0]["object"]["apiVersion"], "v1");
    assert!(bookmarks[0]["object"]["metadata"]["resourceVersion"].is_string());
    assert!(
        bookmarks[0]["object"]["metadata"]
            .get("annotations")
            .is_none()
    );
    // sendInitialEvents: ADDED for everything, then a bookmark marking the end.
    let r = get(&server, &format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1")).await;
    let evs = r.events();
    assert_eq!(types(&evs[..2]), ["ADDED", "BOOKMARK"]);
    assert_eq!(
        evs[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let r = get(&server, &format!("{CMS}?watch=true&sendInitialEvents=true")).await;
    assert_status(&r, 422, "Invalid");
    // kube's ListOptions validation names resourceVersionMatch.
    assert_eq!(
        r.json()["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    // 410 Gone once the history is expired.
    server.faults().expire_history();
    let r = get(&server, &format!("{CMS}?watch=true&resourceVersion=1")).await;
    assert_eq!(r.code, 200);
    let evs = r.events();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["type"], "ERROR");
    assert_eq!(evs[0]["object"]["code"], 410);
    assert_eq!(evs[0]["object"]["reason"], "Expired");
    assert!(
        evs[0]["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: 1 (")
    );
    // A bounded history expires by itself.
    let (small, _c) = start_with(Config::default().history_limit(3)).await;
    for i in 0..5 {
        post(&small, CMS, json!({"metadata": {"name": format!("n{i}")}})).await;
    }
    let evs = get(&small, &format!("{CMS}?watch=true&resourceVersion=2"))
        .await
        .events();
    assert_eq!(evs[0]["type"], "ERROR");
}

#[tokio::test]
async fn selector_watch_sees_objects_leave() {
    let (server, _client) = start().await;
    let server = Arc::new(server);
    post(
        &server,
        CMS,
        json!({"metadata": {"name": "a", "labels": {"app": "x"}}}),
    )
    .await;
    post(&server, CMS, json!({"metadata": {"name": "b"}})).await;
    let s = server.clone();
    let w = tokio::spawn(async move {
        raw(
            &s,
            "GET",
            &format!("{CMS}?watch=true&labelSelector=app%3Dx&timeoutSeconds=1"),
            None,
            b"",
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = Some("application/merge-patch+json");
    raw(
        &server,
        "PATCH",
        &format!("{CMS}/b"),
        m,
        br#"{"metadata": {"labels": {"app": "x"}}}"#,
    )
    .await;
    let moved_out = raw(
        &server,
        "PATCH",
        &format!("{CMS}/a"),
        m,
        br#"{"metadata": {"labels": {"app": "y"}}}"#,
    )
    .await
    .json();
    raw(
        &server,
        "PATCH",
        &format!("{CMS}/a"),
        m,
        br#"{"data": {"ignored": "yes"}}"#,
    )
    .await;
    let evs = w.await.unwrap().events();
    let seen: Vec<String> = evs
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(seen, ["ADDED a", "ADDED b", "DELETED a"]);
    // As kube-apiserver's watch cache sends it: the object as it was while it matched,
    // at the resourceVersion of the change that moved it out.
    let left = &evs[2]["object"]["metadata"];
    assert_eq!(left["labels"], json!({"app": "x"}), "{left}");
    assert_eq!(
        left["resourceVersion"],
        moved_out["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn kube_runtime_watcher_survives_drops_and_gone() {
    let (server, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    post(&server, CMS, json!({"metadata": {"name": "first"}})).await;
    let cfg = watcher::Config::default();
    let mut stream = watcher(api, cfg).boxed();
    let mut next_name = async || loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                return format!("apply {}", o.metadata.name.unwrap());
            }
            watcher::Event::Delete(o) => return format!("delete {}", o.metadata.name.unwrap()),
            watcher::Event::Init | watcher::Event::InitDone => continue,
        }
    };
    assert_eq!(next_name().await, "apply first");
    post(&server, CMS, json!({"metadata": {"name": "second"}})).await;
    assert_eq!(next_name().await, "apply second");
    // Dropped connections: the watcher resumes from its resourceVersion and misses nothing.
    server.faults().drop_watches();
    post(&server, CMS, json!({"metadata": {"name": "third"}})).await;
    assert_eq!(next_name().await, "apply third");
    // History expired and connection dropped: 410 makes it relist, then watch again.
    server.faults().expire_history();
    server.faults().drop_watches();
    post(&server, CMS, json!({"metadata": {"name": "fourth"}})).await;
    let mut seen = Vec::new();
    while !seen.contains(&"apply fourth".to_string()) {
        seen.push(next_name().await);
    }
    raw(&server, "DELETE", &format!("{CMS}/first"), None, b"").await;
    loop {
        if next_name().await == "delete first" {
            break;
        }
    }
}

#[tokio::test]
async fn kube_runtime_watcher_with_streaming_lists() {
    let (server, client) = start().await;
    post(&server, CMS, json!({"metadata": {"name": "one"}})).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut stream = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        match ev {
            watcher::Event::Init => seen.push("init".to_string()),
            watcher::Event::InitApply(o) => {
                seen.push(format!("initapply {}", o.metadata.name.unwrap()))
            }
            watcher::Event::InitDone => {
                seen.push("done".to_string());
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["init", "initapply one", "done"]);
    post(&server, CMS, json!({"metadata": {"name": "two"}})).await;
    let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event")
        .unwrap()
        .unwrap();
    assert!(matches!(ev, watcher::Event::Apply(o) if o.metadata.name.as_deref() == Some("two")));
}

#[tokio::test]
async fn huge_timeouts_and_slow_readers_do_not_hurt() {
    let (server, _client) = start().await;
    // A timeout past the clock's range is no timeout; the stream is cut by drop_watches.
    let s = Arc::new(server);
    let s2 = s.clone();
    let w = tokio::spawn(async move {
        raw(
            &s2,
            "GET",
            &format!("{CMS}?watch=true&timeoutSeconds=18446744073709551615"),
            None,
            b"",
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.faults().drop_watches();
    assert_eq!(w.await.unwrap().code, 200);
    // A watcher that never reads does not block writers.
    let mut idle = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    use tokio::io::AsyncWriteExt;
    idle.write_all(format!("GET {CMS}?watch=true HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let big = "x".repeat(100_000);
    for i in 0..100 {
        let r = post(
            &s,
            CMS,
            json!({"metadata": {"name": format!("n{i}")}, "data": {"big": big}}),
        )
        .await;
        assert_eq!(r.code, 201);
    }
    drop(idle);
}

#[tokio::test]
async fn metadata_only_clients() {
    let (server, client) = start().await;
    post(
        &server,
        CMS,
        json!({"metadata": {"name": "m", "labels": {"a": "b"}}, "data": {"k": "v"}}),
    )
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let list = api.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("m"));
    let one = api.get_metadata("m").await.unwrap();
    assert_eq!(one.metadata.labels.unwrap()["a"], "b");
    // A write answers in the form asked for too (kube-rs's `patch_metadata`).
    use kube::core::PartialObjectMetaExt;
    let patch = kube::core::ObjectMeta {
        annotations: Some([("test".to_string(), "123".to_string())].into()),
        ..Default::default()
    }
    .into_request_partial::<ConfigMap>();
    let patched = api
        .patch_metadata("m", &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["test"], "123");
    let types = patched.types.expect("types");
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );
    let raw_list = raw_with(
        &server,
        "GET",
        CMS,
        None,
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )],
        b"",
    )
    .await
    .json();
    assert_eq!(raw_list["kind"], "PartialObjectMetadataList");
    assert!(raw_list["items"][0].get("data").is_none());
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(client, "default");
    let mut stream = watcher(meta_api, watcher::Config::default()).boxed();
    let mut names = Vec::new();
    while names.is_empty() {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        if let watcher::Event::InitApply(o) = ev {
            names.push(o.metadata.name.unwrap());
        }
    }
    assert_eq!(names, ["m"]);
}
