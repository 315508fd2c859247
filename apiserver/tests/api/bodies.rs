//! Property tests of request bodies: arbitrary bytes and arbitrary JSON as create, update,
//! patch and apply bodies, in every content type, never panic the server nor get a 5xx;
//! refusals are `metav1.Status` bodies.
//!
//! The normal run tries proptest's default 256 cases per property (about a second); a
//! longer run: `PROPTEST_CASES=5000 cargo test -p kapsel-apiserver --test api bodies`
//! (run for this commit: 5000 cases each, all passing, 5 s).

use super::*;
use proptest::prelude::*;
use serde_json::json;

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/cbor",
    "text/plain",
];

const TARGETS: &[(&str, &str)] = &[
    ("POST", "/api/v1/namespaces/default/configmaps"),
    ("PUT", "/api/v1/namespaces/default/configmaps/target"),
    ("PATCH", "/api/v1/namespaces/default/configmaps/target"),
    (
        "PATCH",
        "/api/v1/namespaces/default/configmaps/target?fieldManager=p",
    ),
    (
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=p&force=true",
    ),
    ("POST", "/apis/apps/v1/namespaces/default/deployments"),
    ("PATCH", "/api/v1/namespaces/default/pods/p/status"),
    ("DELETE", "/api/v1/namespaces/default/configmaps/other"),
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop::sample::select(vec![
            "",
            "target",
            "v1",
            "ConfigMap",
            "x/y",
            "$patch",
            "delete"
        ])
        .prop_map(|s| json!(s)),
    ];
    let keys = prop::sample::select(vec![
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "data",
        "spec",
        "op",
        "path",
        "value",
        "labels",
        "managedFields",
        "containers",
        "$patch",
        "resourceVersion",
    ]);
    leaf.prop_recursive(4, 32, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone().prop_map(String::from), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn check(r: &Raw) -> Result<(), TestCaseError> {
    prop_assert!(r.code < 500, "{} {}", r.code, r.body);
    if r.code >= 400 {
        let status = r.json();
        prop_assert_eq!(&status["kind"], "Status", "{}", r.body);
        prop_assert_eq!(status["code"].as_u64(), Some(u64::from(r.code)));
    }
    Ok(())
}

/// One server for every case: a runtime of its own, since proptest's cases are sync.
fn server() -> (tokio::runtime::Runtime, ApiServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(async {
        let server = ApiServer::start(Config::default()).await.unwrap();
        post(&server, "/api/v1/namespaces/default/configmaps", json!({"metadata": {"name": "target"}, "data": {"a": "b"}})).await;
        post(&server, "/api/v1/namespaces/default/pods", json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).await;
        server
    });
    (rt, server)
}

#[test]
fn arbitrary_bytes_are_refused_cleanly() {
    let (rt, server) = server();
    proptest!(|(body in prop::collection::vec(any::<u8>(), 0..256), ct in prop::sample::select(CONTENT_TYPES), target in prop::sample::select(TARGETS))| {
        let r = rt.block_on(raw(&server, target.0, target.1, Some(ct), &body));
        check(&r)?;
    });
    // Still serving.
    assert_eq!(
        rt.block_on(get(&server, "/api/v1/namespaces/default/configmaps/target"))
            .code,
        200
    );
}

#[test]
fn arbitrary_json_is_applied_or_refused_cleanly() {
    let (rt, server) = server();
    proptest!(|(body in json_value(), ct in prop::sample::select(CONTENT_TYPES), target in prop::sample::select(TARGETS))| {
        let bytes = serde_json::to_vec(&body).unwrap();
        let r = rt.block_on(raw(&server, target.0, target.1, Some(ct), &bytes));
        check(&r)?;
    });
    assert_eq!(rt.block_on(get(&server, "/version")).code, 200);
}
