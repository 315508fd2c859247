//! The host imports, as the rest of the SDK calls them (the bottom of the SDK): the
//! real host in the wasm build (`wasm`), the thread-local fake host that
//! `kapsel::testing` reads natively (`fake`); and the values they exchange: log
//! [`Level`]s, [`ApiError`]s, sub-handlers' [`Declaration`]s and [`Due`] calls, the
//! operator's settings as JSON, the full description of a call's resource
//! ([`ResourceInfo`]), and admission handlers' declarations and requests
//! ([`AdmissionDeclaration`], [`AdmissionRequest`]).

use std::fmt;

use crate::error::ErrorsMode;
use crate::outcome::Outcome;
use crate::selector::Selector;

#[cfg(target_arch = "wasm32")]
pub(crate) use wasm::{errors_mode_to_wit, outcome_to_wit, selector_to_wit};

/// A log line's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// `kapsel::debug!`.
    Debug,
    /// `kapsel::info!`.
    Info,
    /// `kapsel::warn!`.
    Warning,
    /// `kapsel::error!`.
    Error,
}

/// A failed Kubernetes call.
///
/// Converts into [`crate::Error`] (an arbitrary error, handled per the handler's
/// `errors` option) with `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code; 0 when the request never reached the API server.
    pub code: u16,
    /// The `metav1.Status` reason: `NotFound`, `AlreadyExists`, `Conflict`,
    /// `Forbidden` (also when the guest did not declare the call with `permit!`),
    /// `Invalid`, ...
    pub reason: String,
    /// What went wrong, for humans.
    pub message: String,
}

impl ApiError {
    /// An error with this code, reason and message.
    pub fn new(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A request that could not be made (code 0, reason `Invalid`).
    pub(crate) fn invalid(message: String) -> Self {
        Self::new(0, "Invalid", message)
    }

    /// By reason, as client-go does; by code only when the reason is missing.
    fn is(&self, reason: &str, code: u16) -> bool {
        self.reason == reason || (self.reason.is_empty() && self.code == code)
    }

    /// 404 `NotFound`: the object (or its type) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.is("NotFound", 404)
    }

    /// 409 `AlreadyExists`: a create with a name that is taken.
    pub fn is_already_exists(&self) -> bool {
        self.reason == "AlreadyExists"
    }

    /// 409 `Conflict`: the object changed meanwhile.
    pub fn is_conflict(&self) -> bool {
        self.is("Conflict", 409)
    }

    /// 403 `Forbidden`: refused by the API server, or not declared with `permit!`.
    pub fn is_forbidden(&self) -> bool {
        self.is("Forbidden", 403)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.code == 0 {
            write!(f, "{}: {}", self.reason, self.message)
        } else {
            write!(f, "{} ({}): {}", self.reason, self.code, self.message)
        }
    }
}

impl std::error::Error for ApiError {}

/// One sub-handler as its parent declares it (the WIT's `subhandlers.declaration`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Declaration {
    /// Its own id; its full id is `<parent>/<id>`.
    pub(crate) id: String,
    pub(crate) errors: Option<ErrorsMode>,
    pub(crate) timeout_seconds: Option<f64>,
    pub(crate) retries: Option<u32>,
    pub(crate) backoff_seconds: Option<f64>,
}

/// A sub-handler the host says to call now (the WIT's `subhandlers.due`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Due {
    /// The full id (`create_fn/item-a`).
    pub(crate) id: String,
    /// 0 on the first attempt.
    pub(crate) retry: u32,
    /// RFC 3339 time of the first attempt.
    pub(crate) started: String,
    pub(crate) runtime_seconds: f64,
}

/// Everything discovery says of the resource a handler's object belongs to (Kopf's
/// `resource` kwarg): what `Cause::resource` says, and more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Plural name (`kopfexamples`).
    pub plural: String,
    /// Kind (`KopfExample`).
    pub kind: String,
    /// Singular name (`kopfexample`).
    pub singular: String,
    /// Short names (`kex`).
    pub shortcuts: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Subresources served beside it (`status`, `scale`).
    pub subresources: Vec<String>,
    /// `true` for namespaced resources.
    pub namespaced: bool,
    /// Whether this version is its group's preferred one.
    pub preferred: bool,
    /// The verbs the API server serves for it (`get`, `list`, `watch`, `patch`, ...).
    pub verbs: Vec<String>,
}

/// One admission handler as its attribute declares it (the WIT's `admission.declaration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdmissionDeclaration {
    /// The id of its `event` registration.
    pub(crate) id: String,
    /// A mutating webhook's handler (else a validating one's).
    pub(crate) mutating: bool,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`; empty: every operation.
    pub(crate) operations: Vec<String>,
    pub(crate) subresource: Option<String>,
    pub(crate) persistent: bool,
    pub(crate) side_effects: bool,
    pub(crate) ignore_failures: bool,
}

/// The admission request of the current call, as the host hands it over (the WIT's
/// `admission.request`): words and JSON, which `kapsel::admission` types.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct AdmissionRequest {
    pub(crate) uid: String,
    pub(crate) operation: String,
    pub(crate) subresource: Option<String>,
    pub(crate) dry_run: bool,
    /// JSON: `username`, `uid`, `groups`, `extra`.
    pub(crate) user_info: String,
    /// JSON: the write's options.
    pub(crate) options: Option<String>,
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod fake;
#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(not(target_arch = "wasm32"))]
use fake as imp;
#[cfg(target_arch = "wasm32")]
use wasm as imp;

pub(crate) fn log(level: Level, message: &str) {
    imp::log(level, message);
}

pub(crate) fn index_lookup(index: &str, key: &str) -> Option<Vec<String>> {
    imp::index_lookup(index, key)
}

pub(crate) fn index_keys(index: &str) -> Vec<String> {
    imp::index_keys(index)
}

pub(crate) fn post_event(object: Option<&str>, event_type: &str, reason: &str, message: &str) {
    imp::post_event(object, event_type, reason, message);
}

pub(crate) fn sleep_unless_stopped(seconds: f64) -> bool {
    imp::sleep_unless_stopped(seconds)
}

pub(crate) fn stopped() -> crate::StopReasons {
    imp::stopped()
}

pub(crate) fn latest_body() -> Option<String> {
    imp::latest_body()
}

/// The options of a timer or daemon that the WIT's `registration` has no field for (the
/// WIT's `spawning.options`).
#[cfg(target_arch = "wasm32")]
pub(crate) struct SpawningOptions {
    pub(crate) id: String,
    pub(crate) cancellation_backoff_seconds: Option<f64>,
    pub(crate) cancellation_timeout_seconds: Option<f64>,
    pub(crate) cancellation_polling_seconds: Option<f64>,
    pub(crate) initial_delay_callback: bool,
}

/// Declares the further options of a timer or daemon (during `describe`).
#[cfg(target_arch = "wasm32")]
pub(crate) fn declare_spawning(options: SpawningOptions) {
    imp::declare_spawning(options);
}

/// Answers the initial delay the host asked for (during `when`).
#[cfg(target_arch = "wasm32")]
pub(crate) fn answer_initial_delay(seconds: f64) {
    imp::answer_initial_delay(seconds);
}

pub(crate) fn get(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, ApiError> {
    imp::get(target, namespace, name)
}

pub(crate) fn list(
    target: &Selector,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<String, ApiError> {
    imp::list(target, namespace, label_selector)
}

pub(crate) fn create(
    target: &Selector,
    namespace: Option<&str>,
    body: &str,
) -> Result<String, ApiError> {
    imp::create(target, namespace, body)
}

pub(crate) fn patch(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
    merge_patch: &str,
) -> Result<String, ApiError> {
    imp::patch(target, namespace, name, merge_patch)
}

pub(crate) fn delete(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    imp::delete(target, namespace, name)
}

/// Declares the sub-handlers of `parent` (a full handler id) and returns those to call
/// now; an error: the host refuses the declaration.
pub(crate) fn execute_subhandlers(
    parent: &str,
    declared: &[Declaration],
) -> Result<Vec<Due>, String> {
    imp::execute_subhandlers(parent, declared)
}

/// How the call of a due sub-handler ended.
pub(crate) fn subhandler_finished(id: &str, outcome: &Outcome) {
    imp::subhandler_finished(id, outcome);
}

/// `None` when every sub-handler `parent` declared is finished, else the seconds until
/// the next one is due.
pub(crate) fn subhandlers_pending(parent: &str) -> Option<f64> {
    imp::subhandlers_pending(parent)
}

/// Names the guest's login handlers to the host (during `describe` only).
pub(crate) fn declare_logins(ids: &[String]) {
    imp::declare_logins(ids);
}

/// Names the guest's handlers selecting every resource to the host (during `describe`
/// only).
pub(crate) fn declare_everything(ids: &[String]) {
    imp::declare_everything(ids);
}

/// Names the guest's handlers choosing their resources to the host (during `describe`
/// only).
pub(crate) fn declare_chosen(ids: &[String]) {
    imp::declare_chosen(ids);
}

/// Names the guest's admission handlers to the host (during `describe` only).
pub(crate) fn declare_admission(declarations: &[AdmissionDeclaration]) {
    imp::declare_admission(declarations);
}

/// The admission request of the current call; none outside an admission call.
pub(crate) fn admission_request() -> Option<AdmissionRequest> {
    imp::admission_request()
}

/// A warning for the client of the current admission call.
pub(crate) fn admission_warn(message: &str) {
    imp::admission_warn(message);
}

/// The current admission call's failure refuses the request with this code.
pub(crate) fn admission_reject(code: u16) {
    imp::admission_reject(code);
}

/// The resource of the call's object, as the host discovered it.
pub(crate) fn resource_info() -> Option<ResourceInfo> {
    imp::resource_info()
}

/// The operator's settings, as JSON.
pub(crate) fn settings() -> String {
    imp::settings()
}

/// Merges a JSON object of changes into the operator's settings; an error: the host
/// refuses them, and says why.
pub(crate) fn merge_settings(changes: &str) -> Result<(), String> {
    imp::merge_settings(changes)
}
