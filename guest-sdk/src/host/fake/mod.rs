//! The fake host of native builds: what the SDK's host imports do when a handler runs in
//! a plain `cargo test` — per thread, so that parallel tests do not see each other. It
//! records log lines and Events, serves indexes and daemon sleeps as a test sets them, and
//! answers Kubernetes calls from an in-memory fake API (`api`), and keeps sub-handlers'
//! progress across calls (`subhandlers`), and the operator's settings as handlers merged
//! them (unchecked: only the host knows the settings), and the current admission call's
//! request, warnings and rejection (`admission`). `kapsel::testing` reads and sets it.

pub(crate) mod admission;
pub(crate) mod api;
mod labels;
pub(crate) mod subhandlers;
mod types;

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::Value;

use super::{ApiError, Declaration, Due, Level};
use crate::outcome::Outcome;
use crate::selector::Selector;

/// One line a handler logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its level.
    pub level: Level,
    /// Its text.
    pub message: String,
}

/// One Kubernetes Event a handler posted.
#[derive(Debug, Clone, PartialEq)]
pub struct PostedEvent {
    /// The object's reference (`apiVersion`, `kind`, `metadata`); `None` for
    /// the handler's current object.
    pub object: Option<Value>,
    /// `Normal`, `Warning` or `Error`.
    pub event_type: String,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
}

#[derive(Default)]
struct FakeHost {
    logs: Vec<LogLine>,
    events: Vec<PostedEvent>,
    /// index name → key JSON → value JSONs.
    indexes: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Seconds daemons slept, in order.
    sleeps: Vec<f64>,
    /// Why timers and daemons must stop (empty: they may go on); what
    /// `sleep_unless_stopped` and `stopped` answer.
    stopped: crate::StopReasons,
    /// What `latest_body` answers.
    latest_body: Option<String>,
    /// The operator's settings as the test gave them and handlers merged into them;
    /// `None`: an empty object.
    settings: Option<Value>,
}

thread_local! {
    static FAKE: RefCell<FakeHost> = RefCell::new(FakeHost::default());
}

// The host imports, served by this thread's fake host.

pub(crate) fn log(level: Level, message: &str) {
    eprintln!("[{level:?}] {message}");
    FAKE.with_borrow_mut(|fake| {
        fake.logs.push(LogLine {
            level,
            message: message.to_owned(),
        })
    });
}

pub(crate) fn index_lookup(index: &str, key: &str) -> Option<Vec<String>> {
    FAKE.with_borrow(|fake| fake.indexes.get(index)?.get(key).cloned())
}

pub(crate) fn index_keys(index: &str) -> Vec<String> {
    FAKE.with_borrow(|fake| {
        fake.indexes
            .get(index)
            .map(|keys| keys.keys().cloned().collect())
            .unwrap_or_default()
    })
}

pub(crate) fn sleep_unless_stopped(seconds: f64) -> bool {
    FAKE.with_borrow_mut(|fake| {
        fake.sleeps.push(seconds);
        fake.stopped.is_empty()
    })
}

pub(crate) fn stopped() -> crate::StopReasons {
    FAKE.with_borrow(|fake| fake.stopped)
}

pub(crate) fn latest_body() -> Option<String> {
    FAKE.with_borrow(|fake| fake.latest_body.clone())
}

pub(crate) fn get(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, ApiError> {
    api::call("get", target, namespace, Some(name), None, None)
}

pub(crate) fn list(
    target: &Selector,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<String, ApiError> {
    api::call("list", target, namespace, None, label_selector, None)
}

pub(crate) fn create(
    target: &Selector,
    namespace: Option<&str>,
    body: &str,
) -> Result<String, ApiError> {
    api::call("create", target, namespace, None, None, Some(body))
}

pub(crate) fn patch(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
    merge_patch: &str,
) -> Result<String, ApiError> {
    api::call(
        "patch",
        target,
        namespace,
        Some(name),
        None,
        Some(merge_patch),
    )
}

pub(crate) fn delete(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    api::call("delete", target, namespace, Some(name), None, None).map(drop)
}

pub(crate) fn post_event(object: Option<&str>, event_type: &str, reason: &str, message: &str) {
    let object = object.and_then(|json| serde_json::from_str(json).ok());
    FAKE.with_borrow_mut(|fake| {
        fake.events.push(PostedEvent {
            object,
            event_type: event_type.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
        });
    });
}

pub(crate) fn execute_subhandlers(
    parent: &str,
    declared: &[Declaration],
) -> Result<Vec<Due>, String> {
    subhandlers::execute(parent, declared)
}

pub(crate) fn subhandler_finished(id: &str, outcome: &Outcome) {
    subhandlers::finished(id, outcome);
}

pub(crate) fn subhandlers_pending(parent: &str) -> Option<f64> {
    subhandlers::pending(parent)
}

/// Natively nothing is described to a host: a test calls a login handler itself.
pub(crate) fn declare_logins(_ids: &[String]) {}

/// Natively nothing is described to a host.
pub(crate) fn declare_everything(_ids: &[String]) {}

/// Natively nothing is described to a host.
pub(crate) fn declare_chosen(_ids: &[String]) {}

pub(crate) fn declare_admission(declarations: &[super::AdmissionDeclaration]) {
    admission::declare(declarations);
}

pub(crate) fn admission_request() -> Option<super::AdmissionRequest> {
    admission::request()
}

pub(crate) fn admission_warn(message: &str) {
    admission::warn(message);
}

pub(crate) fn admission_reject(code: u16) {
    admission::reject(code);
}

/// Native tests have no discovery: a cause's resource is all they know.
pub(crate) fn resource_info() -> Option<super::ResourceInfo> {
    None
}

pub(crate) fn settings() -> String {
    current_settings().to_string()
}

pub(crate) fn merge_settings(changes: &str) -> Result<(), String> {
    let changes: Value =
        serde_json::from_str(changes).map_err(|e| format!("the changes are not JSON: {e}"))?;
    if !changes.is_object() {
        return Err(format!("the changes are not a JSON object: {changes}"));
    }
    FAKE.with_borrow_mut(|fake| {
        let settings = fake
            .settings
            .get_or_insert_with(|| Value::Object(serde_json::Map::new()));
        merge_into(settings, changes);
    });
    Ok(())
}

/// Merges `changes` into `whole`, object by object (a value replaces what it meets).
fn merge_into(whole: &mut Value, changes: Value) {
    match (whole, changes) {
        (Value::Object(whole), Value::Object(changes)) => {
            for (key, change) in changes {
                merge_into(whole.entry(key).or_insert(Value::Null), change);
            }
        }
        (whole, change) => *whole = change,
    }
}

/// The settings as they are now on this thread.
pub(crate) fn current_settings() -> Value {
    FAKE.with_borrow(|fake| fake.settings.clone())
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}

/// Makes the settings `settings` (what handlers then read and merge into).
pub(crate) fn set_settings(settings: Value) {
    FAKE.with_borrow_mut(|fake| fake.settings = Some(settings));
}

/// The lines logged on this thread so far.
pub(crate) fn logs() -> Vec<LogLine> {
    FAKE.with_borrow(|fake| fake.logs.clone())
}

/// The events posted on this thread so far.
pub(crate) fn events() -> Vec<PostedEvent> {
    FAKE.with_borrow(|fake| fake.events.clone())
}

/// Makes the index hold `values` (JSON) under `key` (JSON); no values removes the key.
pub(crate) fn set_index(index: &str, key: String, values: Vec<String>) {
    FAKE.with_borrow_mut(|fake| {
        let keys = fake.indexes.entry(index.to_owned()).or_default();
        if values.is_empty() {
            keys.remove(&key);
        } else {
            keys.insert(key, values);
        }
    });
}

/// The seconds daemons asked to sleep, in order.
pub(crate) fn sleeps() -> Vec<f64> {
    FAKE.with_borrow(|fake| fake.sleeps.clone())
}

/// Makes daemons' sleeps answer that they must stop, for these reasons.
pub(crate) fn stop_daemons(reasons: crate::StopReasons) {
    FAKE.with_borrow_mut(|fake| fake.stopped |= reasons);
}

/// What timers and daemons read as the object's latest body.
pub(crate) fn set_latest_body(body: &Value) {
    FAKE.with_borrow_mut(|fake| fake.latest_body = Some(body.to_string()));
}

/// Forgets everything of this thread's fake host, fake API and sub-handlers.
pub(crate) fn reset() {
    FAKE.with_borrow_mut(|fake| *fake = FakeHost::default());
    api::reset();
    subhandlers::reset();
    admission::reset();
}
