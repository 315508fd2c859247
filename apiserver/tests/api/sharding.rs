//! Sharded lists and watches (KEP-5866): `shardSelector` keeps the objects whose uid or
//! namespace hashes into the shard's ranges, on lists (which echo it in `shardInfo`),
//! watches and deletecollection; a malformed one gets kube's 400; a server without the
//! feature ignores it.

use super::*;
use serde_json::json;
use std::collections::BTreeSet;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const HIGH: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

/// 64-bit FNV-1a, written here apart from the server's.
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
    }
    hash
}

/// The selector as a query parameter's value.
fn encoded(selector: &str) -> String {
    selector
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The names of the ConfigMaps of a list or of watch events.
fn names<'a>(objects: impl IntoIterator<Item = &'a Value>) -> BTreeSet<String> {
    objects
        .into_iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Creates ConfigMaps until each half of the hash space of uids has two; returns the
/// names in the lower half and those in the upper half.
async fn configmaps_in_both_halves(server: &ApiServer) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut low, mut high) = (BTreeSet::new(), BTreeSet::new());
    let mut n = 0;
    while low.len() < 2 || high.len() < 2 {
        n += 1;
        let name = format!("cm-{n}");
        let r = post(server, CMS, json!({"metadata": {"name": name}})).await;
        assert_eq!(r.code, 201, "{}", r.body);
        let uid = r.json()["metadata"]["uid"].as_str().unwrap().to_owned();
        if fnv1a(&uid) < 1 << 63 {
            low.insert(name);
        } else {
            high.insert(name);
        }
    }
    (low, high)
}

#[tokio::test]
async fn a_shard_selector_lists_and_watches_one_shard() {
    let (server, _client) = start().await;
    let before = get(&server, CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // A watch of the lower half from before anything was created: the history since.
    let watching = {
        let addr = server.addr();
        let path = format!(
            "{CMS}?watch=true&resourceVersion={before}&timeoutSeconds=2&shardSelector={}",
            encoded(LOW)
        );
        tokio::spawn(async move { raw_at(addr, "GET", &path, None, &[], b"").await })
    };
    let (low, high) = configmaps_in_both_halves(&server).await;
    let every: BTreeSet<String> = low.union(&high).cloned().collect();

    for (selector, expected) in [(LOW, &low), (HIGH, &high)] {
        let r = get(
            &server,
            &format!("{CMS}?shardSelector={}", encoded(selector)),
        )
        .await;
        assert_eq!(r.code, 200, "{}", r.body);
        let list = r.json();
        assert_eq!(&names(list["items"].as_array().unwrap()), expected);
        assert_eq!(list["metadata"]["shardInfo"], json!({"selector": selector}));
    }
    let both = format!("{LOW} || {HIGH}");
    let r = get(&server, &format!("{CMS}?shardSelector={}", encoded(&both))).await;
    assert_eq!(names(r.json()["items"].as_array().unwrap()), every);
    // Without a selector: the whole list, and no shardInfo.
    let whole = get(&server, CMS).await.json();
    assert_eq!(names(whole["items"].as_array().unwrap()), every);
    assert!(whole["metadata"].get("shardInfo").is_none(), "{whole}");
    // Pages of a shard: the shard, page by page.
    let mut paged = BTreeSet::new();
    let mut token = String::new();
    loop {
        let page = get(
            &server,
            &format!(
                "{CMS}?limit=1&continue={token}&shardSelector={}",
                encoded(HIGH)
            ),
        )
        .await
        .json();
        paged.extend(names(page["items"].as_array().unwrap()));
        match page["metadata"]["continue"].as_str() {
            Some(next) => token = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(&paged, &high);
    // As a Table and as metadata only, the list still says it is a shard.
    let table = raw_with(
        &server,
        "GET",
        &format!("{CMS}?shardSelector={}", encoded(LOW)),
        None,
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        b"",
    )
    .await
    .json();
    assert_eq!(table["metadata"]["shardInfo"]["selector"], LOW);
    assert_eq!(table["rows"].as_array().unwrap().len(), low.len());

    // Changes and deletions of the other shard's objects are not sent either.
    for name in every.iter() {
        let r = raw(
            &server,
            "PATCH",
            &format!("{CMS}/{name}"),
            Some("application/merge-patch+json"),
            br#"{"data": {"touched": "yes"}}"#,
        )
        .await;
        assert_eq!(r.code, 200, "{}", r.body);
        let r = raw(&server, "DELETE", &format!("{CMS}/{name}"), None, b"").await;
        assert_eq!(r.code, 200, "{}", r.body);
    }
    let events = watching.await.unwrap().events();
    let of_type = |ty: &str| {
        names(
            events
                .iter()
                .filter(|e| e["type"] == ty)
                .map(|e| &e["object"]),
        )
    };
    assert_eq!(of_type("ADDED"), low, "{events:?}");
    assert_eq!(of_type("MODIFIED"), low);
    assert_eq!(of_type("DELETED"), low);
    server.shutdown().await.unwrap();
}

/// A live watch of the upper half: only its objects, as they come (the initial events of
/// a watch without a resourceVersion included); a shard of the namespace's hash; and a
/// deletecollection of the lower half, which leaves the upper one.
#[tokio::test]
async fn a_live_watch_sends_only_its_shards_objects() {
    let (server, _client) = start().await;
    let first = post(&server, CMS, json!({"metadata": {"name": "first"}})).await;
    let first_uid = first.json()["metadata"]["uid"].as_str().unwrap().to_owned();
    let watching = {
        let addr = server.addr();
        let path = format!(
            "{CMS}?watch=true&timeoutSeconds=2&shardSelector={}",
            encoded(HIGH)
        );
        tokio::spawn(async move { raw_at(addr, "GET", &path, None, &[], b"").await })
    };
    // "default" hashes into the upper half: a namespace shard of it holds everything there.
    assert!(fnv1a("default") >= 1 << 63);
    let by_namespace =
        "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')";
    let (low, high) = configmaps_in_both_halves(&server).await;
    let in_default = get(
        &server,
        &format!("{CMS}?shardSelector={}", encoded(by_namespace)),
    )
    .await
    .json();
    assert_eq!(
        in_default["items"].as_array().unwrap().len(),
        low.len() + high.len() + 1
    );
    let other_half = by_namespace.replace(
        "'0x8000000000000000', '0x10000000000000000'",
        "'0x0000000000000000', '0x8000000000000000'",
    );
    let none = get(
        &server,
        &format!("{CMS}?shardSelector={}", encoded(&other_half)),
    )
    .await
    .json();
    assert_eq!(none["items"], json!([]));

    let events = watching.await.unwrap().events();
    let mut expected = high.clone();
    if fnv1a(&first_uid) >= 1 << 63 {
        expected.insert("first".to_owned());
    }
    // The watch may have started before or after some creations: each object of the
    // shard is there once, as an initial event or as it was created; none of the other.
    let added: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "ADDED")
        .map(|e| &e["object"])
        .collect();
    assert_eq!(names(added.iter().copied()), expected, "{events:?}");
    assert_eq!(added.len(), expected.len(), "each once");
    // deletecollection takes the shard too: the other half is left.
    let r = raw(
        &server,
        "DELETE",
        &format!("{CMS}?shardSelector={}", encoded(LOW)),
        None,
        b"",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let left = get(&server, CMS).await.json();
    assert_eq!(names(left["items"].as_array().unwrap()), expected);
    server.shutdown().await.unwrap();
}

/// kube-apiserver's 400 (since Kubernetes 1.38; 1.36 and 1.37 answered the same message
/// with a 500) for a selector it cannot read, on lists and watches alike.
#[tokio::test]
async fn a_malformed_shard_selector_is_a_bad_request() {
    let (server, _client) = start().await;
    for (selector, message) in [
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
        ),
        (
            "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
            "invalid shard selector: unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
        ),
        (
            &format!("{LOW} && {HIGH}"),
            "invalid shard selector: unsupported function \"_&&_\"; only shardRange() and || are allowed",
        ),
        (
            " ",
            "invalid shard selector: empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
    ] {
        for watch in ["", "&watch=true"] {
            let r = get(
                &server,
                &format!("{CMS}?shardSelector={}{watch}", encoded(selector)),
            )
            .await;
            assert_status(&r, 400, "BadRequest");
            assert_eq!(r.json()["message"], message);
        }
    }
    // An empty parameter is no parameter.
    let r = get(&server, &format!("{CMS}?shardSelector=")).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.json()["metadata"].get("shardInfo").is_none());
    server.shutdown().await.unwrap();
}

/// The OpenAPI documents list `shardSelector` among a collection's query parameters, as
/// kube-apiserver's do (it lists `ListOptions`' fields whatever its feature gates say).
#[tokio::test]
async fn openapi_names_the_shard_selector() {
    let (server, _client) = start().await;
    let doc = get(&server, "/openapi/v3/api/v1").await.json();
    let collection = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"];
    assert!(
        collection.to_string().contains(r#""name":"shardSelector""#),
        "{collection}"
    );
    server.shutdown().await.unwrap();
}

/// Without the feature (kube's `ShardedListAndWatch` gate off), the parameter is ignored
/// as kube-apiserver ignores parameters it does not know: every object, no `shardInfo`,
/// and no 400 for a malformed one.
#[tokio::test]
async fn without_the_feature_the_shard_selector_is_ignored() {
    let (server, _client) = start_with(
        Config::default()
            .bookmark_interval(Duration::from_millis(200))
            .sharded_list_and_watch(false),
    )
    .await;
    let (low, high) = configmaps_in_both_halves(&server).await;
    let every: BTreeSet<String> = low.union(&high).cloned().collect();
    let list = get(&server, &format!("{CMS}?shardSelector={}", encoded(LOW)))
        .await
        .json();
    assert_eq!(names(list["items"].as_array().unwrap()), every);
    assert!(list["metadata"].get("shardInfo").is_none(), "{list}");
    let r = get(
        &server,
        &format!(
            "{CMS}?watch=true&timeoutSeconds=1&shardSelector={}",
            encoded(LOW)
        ),
    )
    .await;
    assert_eq!(names(r.events().iter().map(|e| &e["object"])), every);
    let r = get(
        &server,
        &format!("{CMS}?shardSelector={}", encoded("nonsense(")),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    server.shutdown().await.unwrap();
}
