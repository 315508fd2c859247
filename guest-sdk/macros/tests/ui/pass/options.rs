//! Every kind with its options; the registrations carry every WIT field.

#![deny(unsafe_code)]

use kapsel::Cause;
use kapsel::json;

fn is_big(cause: &Cause) -> bool {
    cause.spec()["size"].as_u64().is_some_and(|size| size > 10)
}

#[kapsel::on::event(
    "v1", "configmaps",
    id = "cm",
    param = json!({"a": 1}),
    labels("kapsel.test/behaviour" = "spin", app = present, legacy = absent),
    annotations("example.com/x" = "y"),
    field = "data.key",
    value = "v",
    when = is_big,
    deadline_ms = 500,
    memory_mib = 64,
)]
fn event_handler() {}

#[kapsel::on::create("kopfexamples", errors = "permanent", timeout = 1.5, retries = 3, backoff = 10)]
#[kapsel::on::update("kopfexamples", field = "spec.size", old = present, new = 5)]
#[kapsel::on::delete("kopfexamples", optional)]
#[kapsel::on::resume("kopfexamples", deleted = true, errors = "ignored")]
fn changes(cause: &mut Cause) -> kapsel::Result<Option<u32>> {
    cause.patch.set("status.seen", true);
    Ok(None)
}

#[kapsel::on::field("kopfexamples", field = "spec.items", param = "text")]
fn items(_cause: &Cause) -> kapsel::Value {
    json!({"ok": true})
}

#[kapsel::on::timer("kopfexamples", interval = 60, initial_delay = 2, idle = 0.5, sharp)]
fn tick() -> Result<(), kapsel::TemporaryError> {
    Err(kapsel::TemporaryError::new("later").with_delay(5.0))
}

#[kapsel::on::daemon("kopfexamples", initial_delay = 1)]
fn daemon(_cause: &Cause) -> Result<(), std::num::ParseIntError> {
    "x".parse::<u32>().map(drop)
}

#[kapsel::on::probe(id = "health")]
fn probe() -> &'static str {
    "ok"
}

#[kapsel::on::startup(retries = 1)]
#[kapsel::on::cleanup]
fn lifecycle() {}

#[kapsel::index("pods", field = "spec.nodeName")]
fn by_node(cause: &Cause) -> std::collections::HashMap<(String, String), u32> {
    let key = (cause.namespace().unwrap_or_default().to_owned(), "x".to_owned());
    std::collections::HashMap::from([(key, 1)])
}

#[kapsel::index("pods")]
fn plain(_cause: &Cause) -> kapsel::Result<String> {
    Err(kapsel::PermanentError::new("no").into())
}

fn main() {
    use kapsel::testing::{self, IndexOutcome, Outcome};
    let regs = testing::registrations();
    let find = |id: &str, kind: &str| {
        regs.iter()
            .find(|r| r["id"] == id && r["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} {id}"))
            .clone()
    };
    let cm = find("cm/data.key", "event");
    assert_eq!(cm["param"], r#"{"a":1}"#);
    assert_eq!(
        cm["labels"],
        json!([
            {"key": "kapsel.test/behaviour", "matcher": {"equals": "spin"}},
            {"key": "app", "matcher": "present"},
            {"key": "legacy", "matcher": "absent"},
        ])
    );
    assert_eq!(cm["annotations"], json!([{"key": "example.com/x", "matcher": {"equals": "y"}}]));
    assert_eq!(cm["value"], json!({"equals": "\"v\""}));
    assert_eq!((cm["has-when"].clone(), cm["deadline-ms"].clone(), cm["memory-mib"].clone()), (json!(true), json!(500), json!(64)));
    let create = find("changes", "create");
    assert_eq!(
        (create["errors"].clone(), create["timeout-seconds"].clone(), create["retries"].clone(), create["backoff-seconds"].clone()),
        (json!("permanent"), json!(1.5), json!(3), json!(10.0))
    );
    let update = find("changes/spec.size", "update");
    assert_eq!((update["old-value"].clone(), update["new-value"].clone()), (json!("present"), json!({"equals": "5"})));
    assert_eq!(find("changes", "delete")["optional"], true);
    assert_eq!(find("changes", "resume")["deleted"], true);
    assert_eq!(find("items/spec.items", "field")["param"], "\"text\"");
    let timer = find("tick", "timer");
    assert_eq!(
        (timer["interval-seconds"].clone(), timer["initial-delay-seconds"].clone(), timer["idle-seconds"].clone(), timer["sharp"].clone()),
        (json!(60.0), json!(2.0), json!(0.5), json!(true))
    );
    assert_eq!(find("health", "probe")["selectors"], json!([]));
    find("lifecycle", "startup");
    find("lifecycle", "cleanup");
    let node = find("by_node", "index");
    assert_eq!(node["field"], "spec.nodeName");

    // Calls through the registry, as the host makes them.
    let body = json!({"metadata": {"name": "n", "namespace": "ns"}, "spec": {"size": 11}});
    let mut cause = testing::cause().handler_id("cm/data.key").body(body.clone()).build();
    assert!(testing::when(&cause));
    assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Done(None));
    let mut cause = testing::cause().handler_id("changes").kind(kapsel::HandlerKind::Create).build();
    let reply = testing::invoke(&mut cause);
    assert_eq!((reply.outcome, reply.patch), (Outcome::Done(None), Some(json!({"status": {"seen": true}}))));
    let mut cause = testing::cause().handler_id("items/spec.items").build();
    assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Done(Some(json!({"ok": true}))));
    let mut cause = testing::cause().handler_id("tick").build();
    assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Temporary("later".into(), 5.0));
    let mut cause = testing::cause().handler_id("daemon").build();
    assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Failed("invalid digit found in string".into()));
    let mut cause = testing::cause().handler_id("health").build();
    assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Done(Some(json!("ok"))));
    let mut cause = testing::cause().handler_id("nope").build();
    assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Permanent("unknown handler `nope`".into()));
    let mut cause = testing::cause().handler_id("by_node").body(body).build();
    assert_eq!(testing::index(&mut cause), IndexOutcome::Entries(vec![(json!(["ns", "x"]), json!(1))]));
    let mut cause = testing::cause().handler_id("plain").build();
    assert_eq!(testing::index(&mut cause), IndexOutcome::Permanent("no".into()));
}
