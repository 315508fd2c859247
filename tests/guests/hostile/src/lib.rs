//! A guest that attacks its host, for the containment tests (`tests/all/containment`).
//! Each attack is triggered by the label `kapsel.test/hostile=<attack>` on a ConfigMap
//! (or on a Secret for `peek-secret`); a ConfigMap without it triggers nothing.
//!
//! CPU:
//! - `spin`: an event handler that never returns (its declared deadline: 2 s);
//! - `spin-too`: another such handler of the same guest (so that the guest's share of
//!   the slots is reached, not only one handler's);
//! - `spin-index`: an index handler that never returns;
//! - `spin-daemon`: a daemon that computes 50 ms between sleeps of 1 ms, for ever.
//!
//! Host memory, one call handing over more than the limits allow:
//! - `log-line`: logs a 1 MiB line; `log-flood`: 4 MiB of 100-byte debug lines;
//!   `empty-lines`: 1.2 million empty debug lines;
//! - `memo-hog`: leaves a 4 MiB memo; `index-hog`: returns 4 MiB of index entries (16
//!   times the limits, well within the 64 MiB cap the guest needs to build them);
//! - `event-hog`: posts Events with 4 MiB messages; `big-result` (on create): returns a
//!   2 MiB result; `big-patch`: patches a 2 MiB annotation; `big-request`: creates a
//!   ConfigMap of 2 MiB through the API;
//! - `random`: asks WASI for 64 MiB of random bytes;
//! - `greedy` (`memory_mib = 64`): touches 48 MiB, computes 1.5 s, then returns.
//!
//! API traffic:
//! - `get-flood`: GETs its own ConfigMap until refused, then returns how many went
//!   through (`{"gets": n, "refused": code}`);
//! - `create-flood`: creates 100 KB ConfigMaps until refused (`{"created": n, ...}`);
//! - `event-flood`: posts 10,000 small Events; `made-up-events`: Events about a made-up
//!   kind, a kube-system Pod and a Node; `event-burst`: posts 1,000 Events about its
//!   object, 500 the same (reason `Burst`, message `same`), then 500 each different
//!   (`burst <i>`);
//! - `fast-timer`: a timer asking for an interval of 1 ms;
//! - `no-delay`: on create, fails with a temporary error asking to be retried at once;
//! - `self-patch`: patches a counter annotation of its object on every event;
//! - `finalizer-fight`: on every event, patches the operator's finalizer away (an
//!   optional-less delete handler makes the operator want it).
//!
//! Permissions:
//! - `big-list`: lists every ConfigMap, then its own by label, and logs
//!   `big-list all: <listed n | refused code message>; own: <...>`;
//! - `peek-secret` (on Secrets, never declared): logs `handed secret <name>` if the host
//!   ever hands it one; `sneaky-events`: Events about a ConfigMap in the "namespace"
//!   `default/../kube-system` (reason `Traversal`) and about a Secret (`AboutSecret`);
//! - `elsewhere`: creates and patches a ConfigMap in `kube-system`, returns the codes
//!   (`{"create": code, "patch": code}`; 200 when allowed) and logs them
//!   (`elsewhere create=<code> patch=<code>`); then posts an Event (reason `Elsewhere`)
//!   about a kube-system ConfigMap, a resource it handles, but in a namespace the
//!   operator may not serve.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-hostile`
//! (the component is `target/wasm32-wasip2/release/hostile.wasm`).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use kapsel::api::Api;
use kapsel::{Cause, TemporaryError, Value, json};

kapsel::permit!(
    "v1",
    "configmaps",
    verbs = ["get", "list", "create", "patch"]
);

fn name(cause: &Cause) -> String {
    cause.name().unwrap_or_default().to_owned()
}

/// Computes (without calling the host) for `duration`.
fn busy(duration: Duration) {
    let started = Instant::now();
    let mut counter: u64 = 0;
    while started.elapsed() < duration {
        for _ in 0..10_000 {
            counter = black_box(counter.wrapping_add(1));
        }
    }
}

#[kapsel::on::event(
    "v1",
    "configmaps",
    deadline_ms = 2000,
    labels("kapsel.test/hostile" = "spin")
)]
fn spin(_cause: &Cause) {
    loop {
        busy(Duration::from_secs(3600));
    }
}

#[kapsel::on::event(
    "v1",
    "configmaps",
    deadline_ms = 2000,
    labels("kapsel.test/hostile" = "spin-too")
)]
fn spin_too(_cause: &Cause) {
    loop {
        busy(Duration::from_secs(3600));
    }
}

#[kapsel::index("v1", "configmaps", labels("kapsel.test/hostile" = "spin-index"))]
fn spin_index(_cause: &Cause) -> BTreeMap<String, String> {
    loop {
        busy(Duration::from_secs(3600));
    }
}

#[kapsel::on::daemon(
    "v1",
    "configmaps",
    deadline_ms = 60000,
    labels("kapsel.test/hostile" = "spin-daemon")
)]
fn spin_daemon(cause: &Cause) {
    loop {
        busy(Duration::from_millis(50));
        if !cause.sleep_unless_stopped(0.001) {
            return;
        }
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "log-line"))]
fn log_line(cause: &Cause) {
    kapsel::info!("{} {}", name(cause), "x".repeat(1 << 20));
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "log-flood"))]
fn log_flood(_cause: &Cause) {
    let line = "d".repeat(100);
    for _ in 0..(4 << 20) / 100 {
        kapsel::debug!("{line}");
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "empty-lines"))]
fn empty_lines(_cause: &Cause) {
    for _ in 0..1_200_000 {
        kapsel::debug!("");
    }
}

#[kapsel::on::event(
    "v1",
    "configmaps",
    memory_mib = 64,
    labels("kapsel.test/hostile" = "memo-hog")
)]
fn memo_hog(cause: &mut Cause) {
    *cause.memo_mut() = json!("m".repeat(4 << 20));
}

#[kapsel::index(
    "v1",
    "configmaps",
    memory_mib = 64,
    labels("kapsel.test/hostile" = "index-hog")
)]
fn index_hog(cause: &Cause) -> BTreeMap<String, String> {
    [(name(cause), "i".repeat(4 << 20))].into()
}

#[kapsel::on::event(
    "v1",
    "configmaps",
    memory_mib = 64,
    labels("kapsel.test/hostile" = "event-hog")
)]
fn event_hog(cause: &Cause) {
    let message = "e".repeat(4 << 20);
    for _ in 0..500 {
        kapsel::events::info(cause.body(), "Hog", &message);
    }
}

#[kapsel::on::create(
    "v1",
    "configmaps",
    memory_mib = 64,
    labels("kapsel.test/hostile" = "big-error")
)]
fn big_error(_cause: &Cause) -> kapsel::Result<()> {
    Err(kapsel::TemporaryError::new("e".repeat(4 << 20))
        .with_delay(60.0)
        .into())
}

#[kapsel::on::create("v1", "configmaps", labels("kapsel.test/hostile" = "big-result"))]
fn big_result(_cause: &Cause) -> Value {
    json!("r".repeat(2 << 20))
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "big-patch"))]
fn big_patch(cause: &mut Cause) {
    cause.patch.set_at(
        &["metadata", "annotations", "hostile/big"],
        "p".repeat(2 << 20),
    );
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "big-request"))]
fn big_request(cause: &Cause) -> Value {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": format!("{}-big", name(cause))},
                      "data": {"payload": "b".repeat(2 << 20)}});
    match Api::new("v1", "configmaps").create(&body) {
        Ok(_) => json!({"created": true}),
        Err(error) => json!({"refused": error.code}),
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "random"))]
fn random(_cause: &Cause) {
    let bytes = wasip2::random::random::get_random_bytes(64 << 20);
    black_box(bytes);
}

#[kapsel::on::event(
    "v1",
    "configmaps",
    memory_mib = 64,
    deadline_ms = 2000,
    labels("kapsel.test/hostile" = "greedy")
)]
fn greedy(_cause: &Cause) {
    let block = vec![1_u8; 48 << 20];
    busy(Duration::from_millis(1500));
    black_box(&block);
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "get-flood"))]
fn get_flood(cause: &Cause) -> Value {
    let configmaps = Api::new("v1", "configmaps");
    let me = name(cause);
    let mut gets = 0_u64;
    loop {
        match configmaps.get(&me) {
            Ok(_) => gets += 1,
            Err(error) => return json!({"gets": gets, "refused": error.code}),
        }
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "create-flood"))]
fn create_flood(cause: &Cause) -> Value {
    let configmaps = Api::new("v1", "configmaps");
    let payload = "c".repeat(100_000);
    let mut created = 0_u64;
    loop {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": format!("{}-flood-{created}", name(cause))},
                          "data": {"payload": payload}});
        match configmaps.create(&body) {
            Ok(_) => created += 1,
            Err(error) => return json!({"created": created, "refused": error.code}),
        }
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "event-flood"))]
fn event_flood(cause: &Cause) {
    for i in 0..10_000 {
        kapsel::events::info(cause.body(), "Flood", &format!("event {i}"));
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "event-burst"))]
fn event_burst(cause: &Cause) {
    for _ in 0..500 {
        kapsel::events::info(cause.body(), "Burst", "same");
    }
    for i in 0..500 {
        kapsel::events::info(cause.body(), "Burst", &format!("burst {i}"));
    }
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "made-up-events"))]
fn made_up_events(_cause: &Cause) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "coredns", "namespace": "kube-system"}});
    kapsel::events::warn(&pod, "Hijack", "about a pod it has nothing to do with");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}});
    kapsel::events::warn(&node, "Hijack", "about a node it has nothing to do with");
    for i in 0..3000 {
        let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
                            "metadata": {"name": format!("gadget-{i}"), "namespace": "default"}});
        kapsel::events::info(&gadget, "MadeUp", "about nothing at all");
    }
}

#[kapsel::on::timer(
    "v1",
    "configmaps",
    interval = 0.001,
    labels("kapsel.test/hostile" = "fast-timer")
)]
fn fast_timer(_cause: &Cause) {}

#[kapsel::on::create("v1", "configmaps", labels("kapsel.test/hostile" = "no-delay"))]
fn no_delay(_cause: &Cause) -> kapsel::Result<()> {
    Err(TemporaryError::new("again, right now")
        .with_delay(0.0)
        .into())
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "self-patch"))]
fn self_patch(cause: &mut Cause) {
    let count: u64 = cause
        .annotation("hostile/count")
        .and_then(|text| text.parse().ok())
        .unwrap_or(0);
    cause.patch.set_at(
        &["metadata", "annotations", "hostile/count"],
        (count + 1).to_string(),
    );
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "finalizer-fight"))]
fn finalizer_fight(cause: &mut Cause) {
    cause
        .patch
        .set_at(&["metadata", "finalizers"], Value::Array(Vec::new()));
}

#[kapsel::on::delete("v1", "configmaps", labels("kapsel.test/hostile" = "finalizer-fight"))]
fn finalizer_fight_done(_cause: &Cause) {}

#[kapsel::on::event("v1", "secrets", labels("kapsel.test/hostile" = "peek-secret"))]
fn peek_secret(cause: &Cause) {
    kapsel::info!("handed secret {}", name(cause));
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "big-list"))]
fn big_list(_cause: &Cause) {
    let configmaps = Api::new("v1", "configmaps");
    let answer = |list: Result<Vec<Value>, kapsel::api::ApiError>| match list {
        Ok(items) => format!("listed {}", items.len()),
        Err(error) => format!("refused {} {}", error.code, error.message),
    };
    let all = answer(configmaps.list(None));
    let own = answer(configmaps.list(Some("kapsel.test/hostile=big-list")));
    kapsel::info!("big-list all: {all}; own: {own}");
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "sneaky-events"))]
fn sneaky_events(_cause: &Cause) {
    let traversal = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "kube-proxy", "namespace": "default/../kube-system"}});
    kapsel::events::warn(&traversal, "Traversal", "a namespace that is a path");
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "credentials", "namespace": "default"}});
    kapsel::events::warn(&secret, "AboutSecret", "about a Secret it was never handed");
}

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/hostile" = "elsewhere"))]
fn elsewhere(cause: &Cause) -> Value {
    let code = |answer: Result<Value, kapsel::api::ApiError>| match answer {
        Ok(_) => 200,
        Err(error) => error.code,
    };
    let kube_system = Api::namespaced("v1", "configmaps", "kube-system");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": format!("{}-planted", name(cause))}});
    let create = code(kube_system.create(&body));
    let patch = code(kube_system.patch(
        "extension-apiserver-authentication",
        &json!({"data": {"planted": "yes"}}),
    ));
    kapsel::info!("elsewhere create={create} patch={patch}");
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "extension-apiserver-authentication",
                                     "namespace": "kube-system"}});
    kapsel::events::warn(
        &theirs,
        "Elsewhere",
        "about a ConfigMap outside the operator's namespaces",
    );
    json!({"create": create, "patch": patch})
}
