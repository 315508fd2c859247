//! What a handler receives: the object and the circumstances of the call
//! (Kopf's keyword arguments, KOPF.md §1.13).

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::lazy::{Body, Diff, Lazy};
use crate::{DiffItem, Patch};

/// The one list of handler kinds in the SDK (the WIT's `handler-kind`, and `Login`): the
/// public enum, and its conversions to and from the contract's in the wasm build. A login
/// handler travels as a `startup` registration that the guest names in the WIT's
/// `login.declare`, and an admission handler as an `event` registration named in the WIT's
/// `admission.declare`, so that the contract's enum keeps its cases.
macro_rules! handler_kinds {
    ($($(#[$doc:meta])* $kind:ident,)*) => {
        /// Which kind of handler is being called (one per attribute).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        #[serde(rename_all = "kebab-case")]
        #[non_exhaustive]
        pub enum HandlerKind {
            $($(#[$doc])* $kind,)*
            /// `#[kapsel::on::login]`.
            Login,
            /// `#[kapsel::on::validate]`.
            Validate,
            /// `#[kapsel::on::mutate]`.
            Mutate,
        }

        #[cfg(target_arch = "wasm32")]
        impl From<crate::bindings::kapsel::operator::types::HandlerKind> for HandlerKind {
            fn from(kind: crate::bindings::kapsel::operator::types::HandlerKind) -> Self {
                use crate::bindings::kapsel::operator::types::HandlerKind as Wit;
                match kind {
                    $(Wit::$kind => Self::$kind,)*
                }
            }
        }

        #[cfg(target_arch = "wasm32")]
        impl From<HandlerKind> for crate::bindings::kapsel::operator::types::HandlerKind {
            fn from(kind: HandlerKind) -> Self {
                match kind {
                    $(HandlerKind::$kind => Self::$kind,)*
                    HandlerKind::Login => Self::Startup,
                    HandlerKind::Validate | HandlerKind::Mutate => Self::Event,
                }
            }
        }
    };
}

handler_kinds! {
    /// `#[kapsel::on::event]`.
    Event,
    /// `#[kapsel::index]`.
    Index,
    /// `#[kapsel::on::create]`.
    Create,
    /// `#[kapsel::on::update]`.
    Update,
    /// `#[kapsel::on::delete]`.
    Delete,
    /// `#[kapsel::on::resume]`.
    Resume,
    /// `#[kapsel::on::field]`.
    Field,
    /// `#[kapsel::on::timer]`.
    Timer,
    /// `#[kapsel::on::daemon]`.
    Daemon,
    /// `#[kapsel::on::probe]`.
    Probe,
    /// `#[kapsel::on::startup]`.
    Startup,
    /// `#[kapsel::on::cleanup]`.
    Cleanup,
}

/// The raw watch event type (Kopf's `type` kwarg); the initial listing has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl EventType {
    /// The Kubernetes spelling: `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a changing handler is called (Kopf's `reason` kwarg, KOPF.md §1.6), or which
/// webhook calls an admission handler (Kopf's `reason` of webhook handlers).
///
/// `on::field` handlers are called for the reason of the change that touched
/// their field (usually `Create` or `Update`); resume handlers mixed into an
/// update (the object changed while the operator was down) see `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Reason {
    /// The object was seen for the first time (no diff-base yet).
    Create,
    /// The object's essence changed since it was last handled.
    Update,
    /// The object is being deleted (`deletionTimestamp` is set).
    Delete,
    /// The object was found unchanged when the operator started.
    Resume,
    /// A validating admission webhook calls an `on::validate` handler.
    Validating,
    /// A mutating admission webhook calls an `on::mutate` handler.
    Mutating,
}

impl Reason {
    /// Kopf's word: `create`, `update`, `delete`, `resume`, `validating`, `mutating`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Resume => "resume",
            Self::Validating => "validating",
            Self::Mutating => "mutating",
        }
    }

    /// The reason Kopf's word names; `None` for any other word.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "create" => Some(Self::Create),
            "update" => Some(Self::Update),
            "delete" => Some(Self::Delete),
            "resume" => Some(Self::Resume),
            "validating" => Some(Self::Validating),
            "mutating" => Some(Self::Mutating),
            _ => None,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The concrete resource the object belongs to, as the host discovered it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Plural name (`pods`).
    pub plural: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// `true` for namespaced resources.
    pub namespaced: bool,
}

impl Resource {
    /// A resource description (mostly for tests).
    pub fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            kind: kind.to_owned(),
            namespaced,
        }
    }

    /// `group/version`, or just `version` for the core group (an `apiVersion`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Everything a handler call receives: the object as last seen, the
/// circumstances of the call, and a [`Patch`] to change the object.
///
/// Accessors for missing parts of the object give empty values, as Kopf does:
/// `spec()`, `meta()` and `status()` an empty object, `labels()` an empty map,
/// `name()` `None`.
///
/// The host hands the object over as text, only scanned for where its members are as
/// far as a handler reads: `name()`, `namespace()` and `uid()` are read where they are
/// in it (the text after them not even scanned);
/// `meta()` (and the other accessors of its fields), `spec()`, `status()`, `body()`,
/// `old()`, `new()` and `diff()` are parsed the first time they are read, so a handler
/// pays for what it reads.
#[derive(Debug, Clone)]
pub struct Cause {
    pub(crate) handler_id: String,
    pub(crate) kind: HandlerKind,
    pub(crate) resource: Resource,
    pub(crate) event_type: Option<EventType>,
    pub(crate) reason: Option<Reason>,
    /// The object, and the parts below, parsed as far as a handler reads them.
    pub(crate) body: Body,
    pub(crate) old: Lazy,
    pub(crate) new: Lazy,
    pub(crate) diff: Diff,
    pub(crate) retry: u32,
    /// The first attempt's start as the host sent it (RFC 3339) and as a time.
    pub(crate) started: (String, SystemTime),
    pub(crate) runtime: Duration,
    pub(crate) param: Option<Value>,
    pub(crate) memo: Value,
    pub(crate) memo_touched: bool,
    /// The merge patch this handler builds for its object; the host applies it
    /// after the call (never for index handlers).
    pub patch: Patch,
}

static EMPTY_OBJECT: LazyLock<Value> = LazyLock::new(|| Value::Object(Map::new()));
static EMPTY_MAP: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

impl Cause {
    /// The handler's id (also the key of its result in `status`).
    pub fn handler_id(&self) -> &str {
        &self.handler_id
    }

    /// Which kind of handler is being called.
    pub fn kind(&self) -> HandlerKind {
        self.kind
    }

    /// During an admission call (an `on::validate` or `on::mutate` handler's): the request
    /// being admitted, Kopf's `operation`, `userinfo`, `dryrun` and `subresource` kwargs;
    /// `None` in any other call. See [`kapsel::admission`](crate::admission).
    pub fn admission(&self) -> Option<crate::admission::Request> {
        crate::admission::request()
    }

    /// The whole object, as last seen.
    pub fn body(&self) -> &Value {
        self.body.whole()
    }

    fn section(&self, key: &str) -> &Value {
        Some(self.body.section(key))
            .filter(|v| v.is_object())
            .unwrap_or(&EMPTY_OBJECT)
    }

    /// `spec` (an empty object if absent).
    pub fn spec(&self) -> &Value {
        self.section("spec")
    }

    /// `metadata` (an empty object if absent).
    pub fn meta(&self) -> &Value {
        self.section("metadata")
    }

    /// `status` (an empty object if absent).
    pub fn status(&self) -> &Value {
        self.section("status")
    }

    /// `spec` as your own type (`#[derive(Deserialize)]`, with
    /// `#[serde(crate = "kapsel::serde")]`); a missing `spec` reads as `{}`.
    ///
    /// ```
    /// # use kapsel::serde::Deserialize;
    /// #[derive(Deserialize)]
    /// # #[serde(crate = "kapsel::serde")]
    /// struct Spec { size: u32 }
    ///
    /// fn size(cause: &kapsel::Cause) -> kapsel::Result<u32> {
    ///     let spec: Spec = cause.spec_as()?;
    ///     Ok(spec.size)
    /// }
    /// # let cause = kapsel::testing::cause().body(kapsel::json!({"spec": {"size": 3}})).build();
    /// # assert_eq!(size(&cause), Ok(3));
    /// ```
    ///
    /// # Errors
    /// The spec does not fit the type (an arbitrary error: with `?`, the
    /// handler's `errors` mode decides, temporary by default).
    pub fn spec_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(self.spec())
    }

    /// The whole object as your own type, or as a typed Kubernetes object (a
    /// `k8s_openapi::api::apps::v1::Deployment`: see `examples/typed` for what
    /// that costs a guest).
    ///
    /// ```
    /// # use kapsel::serde::Deserialize;
    /// #[derive(Deserialize)]
    /// # #[serde(crate = "kapsel::serde")]
    /// struct Object { kind: String, spec: Spec }
    /// #[derive(Deserialize)]
    /// # #[serde(crate = "kapsel::serde")]
    /// struct Spec { replicas: u32 }
    ///
    /// fn replicas(cause: &kapsel::Cause) -> kapsel::Result<u32> {
    ///     let object: Object = cause.body_as()?;
    ///     Ok(object.spec.replicas)
    /// }
    /// # let cause = kapsel::testing::cause()
    /// #     .body(kapsel::json!({"kind": "Deployment", "spec": {"replicas": 3}})).build();
    /// # assert_eq!(replicas(&cause), Ok(3));
    /// # let cause = kapsel::testing::cause().body(kapsel::json!({"kind": "Deployment"})).build();
    /// # assert!(replicas(&cause).is_err());
    /// ```
    ///
    /// # Errors
    /// The object does not fit the type (as for [`spec_as`](Self::spec_as)).
    pub fn body_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(self.body())
    }

    fn meta_str(&self, key: &str) -> Option<&str> {
        self.body.meta_str(key)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.meta_str("uid")
    }

    /// `metadata.name`.
    pub fn name(&self) -> Option<&str> {
        self.meta_str("name")
    }

    /// `metadata.namespace` (`None` for cluster-scoped objects).
    pub fn namespace(&self) -> Option<&str> {
        self.meta_str("namespace")
    }

    fn meta_map(&self, key: &str) -> &Map<String, Value> {
        self.meta()
            .get(key)
            .and_then(Value::as_object)
            .unwrap_or(&EMPTY_MAP)
    }

    /// `metadata.labels` (empty if absent).
    pub fn labels(&self) -> &Map<String, Value> {
        self.meta_map("labels")
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().get(key).and_then(Value::as_str)
    }

    /// `metadata.annotations` (empty if absent).
    pub fn annotations(&self) -> &Map<String, Value> {
        self.meta_map("annotations")
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations().get(key).and_then(Value::as_str)
    }

    /// The raw watch event type; `None` for the initial listing (and for
    /// handlers that are not called for a watch event).
    pub fn event_type(&self) -> Option<EventType> {
        self.event_type
    }

    /// Why a changing handler (create, update, delete, resume, field) is
    /// called, or which webhook calls an admission handler (`Validating`, `Mutating`);
    /// `None` for other kinds.
    pub fn reason(&self) -> Option<Reason> {
        self.reason
    }

    /// The essence (or, for field handlers, the field's value) before the
    /// change; `None` when there was none (creation, a field that was absent).
    pub fn old(&self) -> Option<&Value> {
        self.old.optional()
    }

    /// The essence (or the field's value) after the change; `None` when absent
    /// (a field that was removed).
    #[allow(
        clippy::new_ret_no_self,
        reason = "Kopf's `new` keyword argument, beside `old`"
    )]
    pub fn new(&self) -> Option<&Value> {
        self.new.optional()
    }

    /// What changed between [`old`](Self::old) and [`new`](Self::new), in
    /// order; for field handlers, re-rooted at the field. Empty for handlers
    /// that are not changing handlers.
    ///
    /// ```
    /// use kapsel::{DiffOp, json};
    ///
    /// let cause = kapsel::testing::cause()
    ///     .diff(json!([["change", ["spec", "size"], 1, 2], ["add", ["spec", "tier"], null, "gold"]]))
    ///     .build();
    /// for item in cause.diff() {
    ///     if item.op == DiffOp::Change {
    ///         assert_eq!((item.field(), &item.old, &item.new), ("spec.size".into(), &Some(json!(1)), &Some(json!(2))));
    ///     }
    /// }
    /// assert!(cause.diff().iter().any(|item| item.is_under(&["spec", "tier"])));
    /// ```
    pub fn diff(&self) -> &[DiffItem] {
        self.diff.items()
    }

    /// The attempt number: 0 on the first attempt.
    pub fn retry(&self) -> u32 {
        self.retry
    }

    /// When the first attempt started.
    pub fn started(&self) -> SystemTime {
        self.started.1
    }

    /// When the first attempt started, as the host wrote it (RFC 3339 with
    /// microseconds, UTC).
    pub fn started_rfc3339(&self) -> &str {
        &self.started.0
    }

    /// Time since the first attempt.
    pub fn runtime(&self) -> Duration {
        self.runtime
    }

    /// The registration's `param`.
    pub fn param(&self) -> Option<&Value> {
        self.param.as_ref()
    }

    /// The registration's `param` as your own type (`None` when the
    /// registration has none).
    ///
    /// # Errors
    /// The param does not fit the type.
    pub fn param_as<T: DeserializeOwned>(&self) -> Result<Option<T>, serde_json::Error> {
        self.param.as_ref().map(T::deserialize).transpose()
    }

    /// The resource the object belongs to.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The per-object memo the last call left (`null` if none).
    pub fn memo(&self) -> &Value {
        &self.memo
    }

    /// The memo, to change for later calls about this object.
    ///
    /// # Guarantees
    /// Only a memo borrowed mutably is sent back to the host; otherwise the
    /// host keeps the one it has.
    pub fn memo_mut(&mut self) -> &mut Value {
        self.memo_touched = true;
        &mut self.memo
    }

    /// Timers and daemons: sleeps up to `seconds`, returning `false` as soon as the
    /// timer or daemon must stop (Kopf's `stopped.wait()`, inverted: `while
    /// cause.sleep_unless_stopped(10.0) {...}`); [`Cause::stop_reasons`] says why.
    ///
    /// # Caveats
    /// Only meaningful in timers and daemons (other handlers get `false` at once); in
    /// native tests it returns at once (see `kapsel::testing::stop_daemons`).
    pub fn sleep_unless_stopped(&self, seconds: f64) -> bool {
        crate::host::sleep_unless_stopped(seconds)
    }

    /// Timers and daemons: whether they must stop (Kopf's `stopped`, as a flag).
    ///
    /// # Caveats
    /// Always `false` in other handlers. In native tests, see
    /// `kapsel::testing::stop_daemons`.
    pub fn is_stopped(&self) -> bool {
        !self.stop_reasons().is_empty()
    }

    /// Timers and daemons: why they must stop (Kopf's `stopped.reason`); empty while
    /// they may go on. A daemon with a `cancellation_timeout` that sees
    /// [`StopReasons::DAEMON_CANCELLED`](crate::StopReasons::DAEMON_CANCELLED) has
    /// until that timeout is over before its call is abandoned.
    pub fn stop_reasons(&self) -> crate::StopReasons {
        crate::host::stopped()
    }

    /// Timers and daemons: the object's body as the operator saw it last, which is newer
    /// than [`Cause::body`] once the object changed during the call (Kopf's live `body`
    /// of daemons); no API call is made. `None` in other handlers, or when the host
    /// sent no JSON object.
    ///
    /// # Caveats
    /// Parsed anew at each call: a daemon reads it when it wakes up, not in a tight loop.
    /// In native tests, see `kapsel::testing::set_latest_body`.
    pub fn latest_body(&self) -> Option<Value> {
        let text = crate::host::latest_body()?;
        serde_json::from_str::<Value>(&text)
            .ok()
            .filter(Value::is_object)
    }

    /// Everything the host's discovery says of the object's resource (Kopf's `resource`
    /// kwarg, beyond [`Cause::resource`]): singular name, short names, categories,
    /// subresources, whether the version is preferred, and the served verbs. One host
    /// call each time. `None` in calls about no object (activities), and in native tests.
    pub fn resource_info(&self) -> Option<crate::ResourceInfo> {
        crate::host::resource_info()
    }

    /// The memo to send back, if the handler touched it.
    pub(crate) fn memo_json(&self) -> Option<String> {
        self.memo_touched.then(|| self.memo.to_string())
    }
}
