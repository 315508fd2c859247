//! Native unit tests of handlers (`cargo test`, no wasm, no cluster).
//!
//! In native builds the SDK's host calls go to a fake host that belongs to the
//! current thread (so tests running in parallel do not see each other): it
//! records log lines and posted events, and serves the index contents the test
//! sets up. Build a [`Cause`] with [`cause()`], call the handler function
//! directly, and assert on what it returned, its `patch`, and the fake host.
//!
//! ```
//! use kapsel::testing;
//! use serde_json::json;
//!
//! #[kapsel::on::event("pods")]
//! fn neighbours(cause: &mut kapsel::Cause) -> usize {
//!     let ns = cause.namespace().unwrap_or_default().to_owned();
//!     let names: Vec<String> = kapsel::index::get("pods_by_namespace", &ns);
//!     kapsel::info!("pods in {ns}: {names:?}");
//!     cause.patch.set("status.seen", true);
//!     names.len()
//! }
//!
//! testing::set_index("pods_by_namespace", "default", ["a", "b"]);
//! let mut cause = testing::cause()
//!     .body(json!({"metadata": {"name": "a", "namespace": "default"}}))
//!     .build();
//! assert_eq!(neighbours(&mut cause), 2);
//! assert_eq!(cause.patch.to_value(), json!({"status": {"seen": true}}));
//! assert_eq!(testing::logs()[0].message, r#"pods in default: ["a", "b"]"#);
//! ```
//!
//! [`invoke`] and [`index`] call a handler the way the host does (through the
//! registry, by handler id), to check how its return value is understood.
//!
//! Kubernetes calls ([`kapsel::api`](crate::api)) go to an in-memory fake API,
//! [`api`], that answers as an API server and the host would (refusing calls
//! outside the crate's `permit!`s):
//!
//! ```
//! use kapsel::api::Api;
//! use kapsel::testing;
//! use serde_json::json;
//!
//! kapsel::permit!("v1", "configmaps", verbs = ["get", "patch"]);
//!
//! #[kapsel::on::update("kopfexamples")]
//! fn touch(cause: &kapsel::Cause) -> kapsel::Result<String> {
//!     // No namespace: the current object's.
//!     let configmaps = Api::new("v1", "configmaps");
//!     let name = cause.name().unwrap_or_default();
//!     let patched = configmaps.patch(name, &json!({"data": {"touched": "yes"}}))?;
//!     Ok(patched["metadata"]["resourceVersion"].to_string())
//! }
//!
//! # testing::reset();
//! testing::api::insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
//!                             "metadata": {"name": "ex", "namespace": "ns"}}));
//! // Building a cause makes its body the current object.
//! let cause = testing::cause()
//!     .body(json!({"metadata": {"name": "ex", "namespace": "ns"}}))
//!     .build();
//! assert!(touch(&cause).is_ok());
//! let stored = testing::api::get("v1", "ConfigMap", Some("ns"), "ex").unwrap();
//! assert_eq!(stored["data"]["touched"], "yes");
//! assert_eq!(testing::api::calls()[0].verb, "patch");
//!
//! // Not declared with `permit!`: refused, as the host would.
//! let denied = Api::new("v1", "secrets").get("token").unwrap_err();
//! assert_eq!((denied.code, denied.reason.as_str()), (403, "Forbidden"));
//! ```
//!
//! # Sub-handlers
//!
//! The fake host keeps each sub-handler's progress across calls (its attempts, how each
//! ended, whether it is finished), as the real host keeps it in the object between
//! cycles, so that a test calls the parent once per cycle, as the host would, and reads
//! [`subhandlers()`]. Call the parent through [`invoke`] (by its handler id, with a
//! changing kind): then its sub-handlers also run after it returns, as on the host.
//! Unlike the host, which calls one due sub-handler per cycle, the fake calls every
//! unfinished one at once, whatever its delay; and it has no clock: a sub-handler's
//! runtime is the sum of its delays so far, for its `timeout`. A handler called
//! directly runs its sub-handlers only at [`execute`](crate::execute), each call the
//! ones declared since the last.
//!
//! ```
//! use kapsel::testing::{self, Outcome, SubhandlerState};
//! use kapsel::{Cause, Reason, json};
//!
//! #[kapsel::on::create("kopfexamples")]
//! fn provision(cause: &mut Cause) -> &'static str {
//!     kapsel::subhandler("flaky").retries(3).register(|cause: &mut Cause| -> kapsel::Result<()> {
//!         if cause.retry() == 0 {
//!             return Err(kapsel::TemporaryError::new("not yet").with_delay(5.0).into());
//!         }
//!         cause.patch.set_at(&["status", "flaky"], "done");
//!         Ok(())
//!     });
//!     "created"
//! }
//!
//! # testing::reset();
//! let cycle = || testing::cause().handler_id("provision").changing(Reason::Create).build();
//! // The sub-handler fails once: the parent is not done yet (Kopf's quiet retry).
//! assert_eq!(testing::invoke(&mut cycle()).outcome, Outcome::Done(None));
//! assert_eq!(testing::subhandlers()[0].state, SubhandlerState::Pending);
//! // The next cycle, as the host calls the parent again: all done.
//! let reply = testing::invoke(&mut cycle());
//! assert_eq!(reply.outcome, Outcome::Done(Some(json!("created"))));
//! assert_eq!(reply.patch, Some(json!({"status": {"flaky": "done"}})));
//! let progress = &testing::subhandlers()[0];
//! assert_eq!((progress.id.as_str(), progress.retries), ("provision/flaky", 2));
//! assert_eq!(progress.state, SubhandlerState::Succeeded);
//! ```
//!
//! Admission handlers (`on::validate`, `on::mutate`) answer [`admission::review`]s: the
//! request, the object and the old object as the host's webhook server hands them over,
//! and what the API server would get back (allowed or refused, message, code, warnings,
//! patch).
//!
//! The operator's settings a handler reads and merges ([`kapsel::settings`](crate::settings))
//! are kept too: [`settings()`], [`set_settings`].
//!
//! Only available in native builds.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::lazy::{Body, Diff, Lazy};
use crate::registry::{self, IndexOutcome as RawIndexOutcome, Outcome as RawOutcome};
use crate::{Cause, EventType, HandlerKind, Patch, Reason, Resource};

pub mod admission;
pub mod api;
mod subhandlers;

pub use subhandlers::{SubhandlerProgress, SubhandlerState, subhandlers};

pub use crate::host::Level;
use crate::host::fake;
pub use crate::host::fake::{LogLine, PostedEvent};

/// The lines logged on this thread so far.
pub fn logs() -> Vec<LogLine> {
    fake::logs()
}

/// The events posted on this thread so far.
pub fn events() -> Vec<PostedEvent> {
    fake::events()
}

/// Makes the index `index` hold `values` under `key` (replacing what it held
/// under that key; no values removes the key).
///
/// # Panics
/// When the key or a value cannot be serialised to JSON (a test bug).
pub fn set_index<K, V>(index: &str, key: &K, values: impl IntoIterator<Item = V>)
where
    K: Serialize + ?Sized,
    V: Serialize,
{
    let key = registry::to_json(key);
    let values: Vec<String> = values.into_iter().map(|v| registry::to_json(&v)).collect();
    fake::set_index(index, key, values);
}

/// The seconds a daemon asked to sleep, in order (sleeps return at once).
pub fn sleeps() -> Vec<f64> {
    fake::sleeps()
}

/// Makes [`Cause::sleep_unless_stopped`] answer that the daemon must stop, and
/// [`Cause::stop_reasons`] that it is because the object is being deleted.
pub fn stop_daemons() {
    fake::stop_daemons(crate::StopReasons::RESOURCE_DELETED);
}

/// Makes timers and daemons stop for these reasons (besides those they have): as
/// [`stop_daemons`], with the reasons [`Cause::stop_reasons`] reads.
pub fn stop_daemons_because(reasons: crate::StopReasons) {
    fake::stop_daemons(reasons);
}

/// What [`Cause::latest_body`] answers from now on (until [`reset`]).
pub fn set_latest_body(body: &Value) {
    fake::set_latest_body(body);
}

/// The initial delay the timer or daemon `cause.handler_id()` names computes for the
/// cause's object (`initial_delay = <function>`), as the host asks for it; `None` when
/// its initial delay is a number or absent.
pub fn initial_delay(cause: &Cause) -> Option<f64> {
    registry::initial_delay(cause)
}

/// Whether the handler `cause.handler_id()` names selects `resource` by its
/// `resource_filter = <function>` (Kopf's callable selector), as the host asks it; false
/// for a handler without one.
pub fn chooses(cause: &Cause, resource: &crate::ResourceInfo) -> bool {
    registry::chooses(cause, resource)
}

/// The operator's settings on this thread: those [`set_settings`] gave (an empty object
/// otherwise), with what handlers merged into them ([`kapsel::settings`](crate::settings)),
/// unchecked: only the host knows which settings there are.
///
/// ```
/// #[kapsel::on::startup]
/// fn quieter() -> kapsel::Result<()> {
///     kapsel::settings::set("posting.level", "warning")
/// }
///
/// # kapsel::testing::reset();
/// kapsel::testing::set_settings(kapsel::json!({"posting": {"enabled": true}}));
/// quieter().unwrap();
/// assert_eq!(
///     kapsel::testing::settings(),
///     kapsel::json!({"posting": {"enabled": true, "level": "warning"}})
/// );
/// ```
pub fn settings() -> Value {
    fake::current_settings()
}

/// Makes the operator's settings `settings` (what handlers then read and merge into),
/// e.g. the host's defaults that a handler reads.
pub fn set_settings(settings: Value) {
    fake::set_settings(settings);
}

/// Forgets this thread's logs, events, indexes, settings, fake API (objects, calls,
/// scripted failures, the current namespace) and sub-handlers (declared and their
/// progress).
pub fn reset() {
    fake::reset();
    crate::subhandlers::reset();
}

/// Every permission the crate declares with `permit!`, as the host receives them
/// from `describe` (JSON in the WIT's shape: `{"target": selector, "verbs": [...]}`).
pub fn permissions() -> Vec<Value> {
    crate::permissions::permissions()
        .iter()
        .map(|p| serde_json::to_value(p).unwrap_or_default())
        .collect()
}

/// Every handler registration of the crate, as the host receives them from
/// `describe` (JSON in the WIT's shape, kebab-case field names).
///
/// # Panics
/// When two functions share a handler id, or two admission attributes of one id differ
/// (the host would refuse the guest).
pub fn registrations() -> Vec<Value> {
    let registrations = registry::registrations();
    registry::declare_admission(&registrations);
    registrations
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .collect()
}

/// What a handler call ended with, as the host sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Success, with the result for `status.<handler id>` (if any).
    Done(Option<Value>),
    /// A temporary error: message and delay in seconds.
    Temporary(String, f64),
    /// A permanent error.
    Permanent(String),
    /// An arbitrary error (the handler's `errors` mode decides).
    Failed(String),
}

/// What the host receives from one handler call.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// How the call ended.
    pub outcome: Outcome,
    /// The merge patch, if the handler built one.
    pub patch: Option<Value>,
    /// The memo, if the handler changed it.
    pub memo: Option<Value>,
}

/// What an index handler's call means for the index.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexOutcome {
    /// Nothing returned: the object's previous values stay.
    Keep,
    /// Key/value pairs (keys and values as JSON values).
    Entries(Vec<(Value, Value)>),
    /// A temporary error: message and delay in seconds.
    Temporary(String, f64),
    /// A permanent error.
    Permanent(String),
    /// An arbitrary error.
    Failed(String),
}

fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

fn outcome_from_raw(outcome: RawOutcome) -> Outcome {
    match outcome {
        RawOutcome::Done(result) => Outcome::Done(result.as_deref().map(parse)),
        RawOutcome::Temporary(message, delay) => Outcome::Temporary(message, delay),
        RawOutcome::Permanent(message) | RawOutcome::Rejected(message, _) => {
            Outcome::Permanent(message)
        }
        RawOutcome::Failed(message) => Outcome::Failed(message),
    }
}

/// Calls the handler `cause.handler_id()` names, as the host's `invoke` does: also
/// its sub-handlers after it returns, if it declared some and did not
/// [`execute`](crate::execute) them (see [the sub-handlers](crate::testing#sub-handlers)).
pub fn invoke(cause: &mut Cause) -> Reply {
    Reply {
        outcome: outcome_from_raw(registry::invoke(cause)),
        patch: cause.patch.to_json().as_deref().map(parse),
        memo: cause.memo_json().as_deref().map(parse),
    }
}

/// Calls the index handler `cause.handler_id()` names, as the host's `index` does.
pub fn index(cause: &mut Cause) -> IndexOutcome {
    match registry::index(cause) {
        RawIndexOutcome::Keep => IndexOutcome::Keep,
        RawIndexOutcome::Entries(entries) => {
            IndexOutcome::Entries(entries.iter().map(|(k, v)| (parse(k), parse(v))).collect())
        }
        RawIndexOutcome::Temporary(message, delay) => IndexOutcome::Temporary(message, delay),
        RawIndexOutcome::Permanent(message) => IndexOutcome::Permanent(message),
        RawIndexOutcome::Failed(message) => IndexOutcome::Failed(message),
    }
}

/// Evaluates the `when` filter of the handler `cause.handler_id()` names.
pub fn when(cause: &Cause) -> bool {
    registry::when(cause)
}

/// The first attempt's start in a built [`Cause`], unless told otherwise (and of
/// every sub-handler).
pub const STARTED: &str = fake::subhandlers::STARTED;

/// Starts building a [`Cause`]: an `on::event` call for an initial listing,
/// with an empty body, unless told otherwise.
pub fn cause() -> CauseBuilder {
    CauseBuilder {
        cause: Cause {
            handler_id: String::new(),
            kind: HandlerKind::Event,
            resource: Resource::default(),
            event_type: None,
            reason: None,
            body: Body::from_value(Value::Object(serde_json::Map::new())),
            old: Lazy::from_value(Value::Null),
            new: Lazy::from_value(Value::Null),
            diff: Diff::from_items(Vec::new()),
            retry: 0,
            started: (
                STARTED.to_owned(),
                crate::time::parse_rfc3339(STARTED).unwrap_or(std::time::UNIX_EPOCH),
            ),
            runtime: Duration::ZERO,
            param: None,
            memo: Value::Null,
            memo_touched: false,
            patch: Patch::default(),
        },
        resource_set: false,
    }
}

/// Builds a [`Cause`] for a test; see [`cause()`].
#[derive(Debug, Clone)]
#[must_use]
pub struct CauseBuilder {
    cause: Cause,
    resource_set: bool,
}

impl CauseBuilder {
    /// The handler id (needed by [`invoke`], [`index`] and [`when`]).
    pub fn handler_id(mut self, id: &str) -> Self {
        self.cause.handler_id = id.to_owned();
        self
    }

    /// The handler kind (default: event).
    pub fn kind(mut self, kind: HandlerKind) -> Self {
        self.cause.kind = kind;
        self
    }

    /// The object. Unless [`CauseBuilder::resource`] is given, the resource is
    /// guessed from its `apiVersion` and `kind`.
    pub fn body(mut self, body: Value) -> Self {
        self.cause.body = Body::from_value(body);
        self
    }

    /// The resource.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.cause.resource = resource;
        self.resource_set = true;
        self
    }

    /// The watch event type (`None`: the initial listing).
    pub fn event_type(mut self, event_type: impl Into<Option<EventType>>) -> Self {
        self.cause.event_type = event_type.into();
        self
    }

    /// The reason of a changing handler's call.
    pub fn reason(mut self, reason: Reason) -> Self {
        self.cause.reason = Some(reason);
        self
    }

    /// A changing handler's call for this reason: the kind and the reason
    /// (`Reason::Create` → `HandlerKind::Create`, ...; `Reason::Validating` →
    /// `HandlerKind::Validate`, `Reason::Mutating` → `HandlerKind::Mutate`, though
    /// [`admission::review`] builds an admission call whole). For `on::field`
    /// handlers, add `.kind(HandlerKind::Field)` after this.
    pub fn changing(self, reason: Reason) -> Self {
        let kind = match reason {
            Reason::Create => HandlerKind::Create,
            Reason::Update => HandlerKind::Update,
            Reason::Delete => HandlerKind::Delete,
            Reason::Resume => HandlerKind::Resume,
            Reason::Validating => HandlerKind::Validate,
            Reason::Mutating => HandlerKind::Mutate,
        };
        self.kind(kind).reason(reason)
    }

    /// The old essence (or field value); `null` means absent, as from the host.
    pub fn old(mut self, old: Value) -> Self {
        self.cause.old = Lazy::from_value(old);
        self
    }

    /// The new essence (or field value); `null` means absent, as from the host.
    pub fn new(mut self, new: Value) -> Self {
        self.cause.new = Lazy::from_value(new);
        self
    }

    /// The diff, in the host's JSON form: `[[op, [key...], old, new], ...]`
    /// (Kopf's tuples, `null` for absent values).
    ///
    /// # Panics
    /// When `diff` is not of that form (a test bug).
    pub fn diff(mut self, diff: Value) -> Self {
        self.cause.diff = match crate::diff::parse(&diff) {
            Ok(items) => Diff::from_items(items),
            Err(error) => panic!("kapsel::testing: {error}"),
        };
        self
    }

    /// The attempt number.
    pub fn retry(mut self, retry: u32) -> Self {
        self.cause.retry = retry;
        self
    }

    /// When the first attempt started (RFC 3339, as the host sends it).
    ///
    /// # Panics
    /// When `started` is not an RFC 3339 time (a test bug).
    pub fn started(mut self, started: &str) -> Self {
        let Some(time) = crate::time::parse_rfc3339(started) else {
            panic!("kapsel::testing: {started:?} is not an RFC 3339 time");
        };
        self.cause.started = (started.to_owned(), time);
        self
    }

    /// Time since the first attempt.
    pub fn runtime(mut self, runtime: Duration) -> Self {
        self.cause.runtime = runtime;
        self
    }

    /// The registration's `param`.
    pub fn param(mut self, param: Value) -> Self {
        self.cause.param = Some(param);
        self
    }

    /// The memo the last call left.
    pub fn memo(mut self, memo: Value) -> Self {
        self.cause.memo = memo;
        self
    }

    /// The cause. Its body becomes the fake API's current object: calls without
    /// a namespace act in its namespace (see [`api`]).
    pub fn build(mut self) -> Cause {
        api::set_current_namespace(self.cause.namespace());
        if !self.resource_set {
            let api_version = self
                .cause
                .body()
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("v1");
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let kind = self
                .cause
                .body()
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let plural = if kind.is_empty() {
                String::new()
            } else {
                format!("{}s", kind.to_lowercase())
            };
            let namespaced = self.cause.namespace().is_some();
            self.cause.resource = Resource::new(group, version, &plural, kind, namespaced);
        }
        self.cause
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fake_host_records_and_serves() {
        set_index("idx", &("ns", 1), [json!({"a": 1})]);
        let values: Vec<Value> = crate::index::get("idx", &("ns", 1));
        assert_eq!(values, [json!({"a": 1})]);
        assert!(crate::index::contains("idx", &("ns", 1)));
        let keys: Vec<(String, u32)> = crate::index::keys("idx");
        assert_eq!(keys, [("ns".to_owned(), 1)]);
        let wrong: Vec<u32> = crate::index::get("idx", &("ns", 1));
        assert!(wrong.is_empty());
        assert_eq!(logs()[0].level, Level::Warning);

        let body = json!({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "p", "namespace": "n", "labels": {"x": "y"}}});
        crate::events::warn(&body, "Odd", "very odd");
        crate::events::info(&Value::Null, "Fine", "all fine");
        let posted = events();
        assert_eq!(
            posted[0].object,
            Some(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}})
            )
        );
        assert_eq!(
            (posted[0].event_type.as_str(), posted[1].object.as_ref()),
            ("Warning", None)
        );

        let cause = cause().body(body).build();
        assert_eq!(
            (cause.resource().plural.as_str(), cause.label("x")),
            ("pods", Some("y"))
        );
        assert!(cause.sleep_unless_stopped(1.5));
        assert!(!cause.is_stopped() && cause.stop_reasons().is_empty());
        assert_eq!(cause.latest_body(), None);
        stop_daemons();
        assert!(!cause.sleep_unless_stopped(2.0));
        assert_eq!(sleeps(), [1.5, 2.0]);
        assert!(cause.is_stopped());
        stop_daemons_because(crate::StopReasons::DAEMON_SIGNALLED);
        assert_eq!(
            cause.stop_reasons().to_string(),
            "RESOURCE_DELETED|DAEMON_SIGNALLED"
        );
        set_latest_body(&json!({"spec": {"size": 2}}));
        assert_eq!(cause.latest_body(), Some(json!({"spec": {"size": 2}})));
        reset();
        assert!(logs().is_empty() && events().is_empty());
    }
}
