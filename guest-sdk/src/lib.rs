//! Write Kubernetes operator handlers the way Kopf users do, in Rust, compiled
//! to a WebAssembly component that the Kapsel host runs in a sandbox.
//!
//! A guest is a `cdylib` crate that depends on `kapsel-sdk` alone and contains
//! nothing but handlers: the attributes register them, and the SDK implements
//! the component's exports (`describe`, `invoke`, `index`, `when`).
//!
//! ```no_run
//! use kapsel::Cause;
//!
//! // Kopf: @kopf.on.event('kopfexamples') + @kopf.on.event('v1', 'pods')
//! #[kapsel::on::event("kopfexamples")]
//! #[kapsel::on::event("v1", "pods")]
//! fn log_event(cause: &Cause) {
//!     let event = cause.event_type().map_or("None", |t| t.as_str());
//!     kapsel::info!("event {event} for {}", cause.name().unwrap_or_default());
//! }
//!
//! // The result lands in `status.create_fn` (KOPF.md §1.14).
//! #[kapsel::on::create("kopf.dev", "v1", "kopfexamples", retries = 3, backoff = 10)]
//! fn create_fn(cause: &mut Cause) -> kapsel::Result<kapsel::Value> {
//!     // Copy what you read before editing the patch (both borrow the cause).
//!     let Some(size) = cause.spec().get("size").cloned() else {
//!         return Err(kapsel::TemporaryError::new("no size yet").with_delay(30.0).into());
//!     };
//!     cause.patch.set_at(&["metadata", "labels", "example.com/sized"], "yes");
//!     Ok(kapsel::json!({"message": format!("hello world, size {size}")}))
//! }
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component.
//!
//! # Handler attributes
//!
//! [`on::event`], [`on::create`], [`on::update`], [`on::delete`], [`on::resume`],
//! [`on::field`], [`on::timer`], [`on::daemon`], [`on::probe`], [`on::startup`],
//! [`on::cleanup`], [`on::login`] (returns a [`ConnectionInfo`]), [`on::validate`] and
//! [`on::mutate`] (admission webhooks, see [below](#admission-webhooks)) and
//! [`macro@index`]. Arguments: first the resource selector,
//! positionally (Kopf's forms, KOPF.md §2.1), then options as `key = value`.
//!
//! | selector | means |
//! |---|---|
//! | `"kopfexamples"`, `"kex"`, `"KopfExample"` | any name: plural, singular, kind or short name, any group |
//! | `"v1", "pods"` | the core group, v1 |
//! | `"kopf.dev/v1", "kopfexamples"` | group `kopf.dev`, version `v1` |
//! | `"kopf.dev", "kopfexamples"` | group `kopf.dev`, its preferred version |
//! | `"kopf.dev", "v1", "kopfexamples"`, `"", "v1", "pods"` | group, version, name (`""`: core) |
//! | `"pods.v1"`, `"kopfexamples.v1.kopf.dev"` | `name.version[.group]` |
//! | `"kopfexamples.kopf.dev"`, `"deployments.apps"` | `name.group` (kubectl style) |
//! | `group = "..", version = "..", kind/plural/singular/shortcut/category = ".."` | keyword forms |
//! | `everything` | every resource (Kopf's `kopf.EVERYTHING`): the preferred version of each resource the cluster serves, also of CRDs created later, except Events; alone, with no other selector; its guest must still `kapsel::permit!` Secrets to be handed them |
//! | `resource_filter = path::to::choose` | the resources a function of their description chooses (Kopf's callable selector, `lambda r: ...`): `fn(&kapsel::ResourceInfo) -> bool`, evaluated in the guest once per resource the cluster serves (every version, CRDs created later too, never Events); alone, with no other selector |
//!
//! | option | example | kinds |
//! |---|---|---|
//! | `id` | `id = "my-id"` (default: the function's name; with `field`, `<id>/<field>` except for indexes) | all |
//! | `param` | `param = 5`, `param = "text"`, `param = kapsel::json!({"a": 1})` (any `Serialize` expression) | all |
//! | `errors` | `errors = "temporary"` / `"permanent"` / `"ignored"` | all but `on::event` and admission handlers |
//! | `timeout`, `backoff` | `timeout = 1.5` (seconds, a literal) | all but `on::event` and admission handlers |
//! | `retries` | `retries = 3` | all but `on::event` and admission handlers |
//! | `labels`, `annotations` | `labels(app = "web", "example.com/tier" = present, legacy = absent, env = \|v, _\| v == Some("prod"))` (a callback: a closure or a `fn(Option<&str>, &Cause) -> bool`) | resource kinds |
//! | `field`, `value` | `field = "spec.size", value = 3` (`present`/`absent`, any `Serialize` expression, or a closure `\|v, _\| ...` given `Option<&Value>` and the cause) | resource kinds |
//! | `old`, `new` | `field = "spec.size", old = present, new = 5` (or closures, as `value`) | update, field |
//! | `when` | `when = path::to::filter` (`fn(&Cause) -> bool`, evaluated in the guest; combine with [`filters`]) | resource kinds |
//! | `optional` | `optional` (no finalizer) | delete |
//! | `deleted` | `deleted` (resume objects being deleted too) | resume |
//! | `interval`, `initial_delay`, `idle`, `sharp` | `interval = 60, sharp`; `initial_delay = 5` or `initial_delay = path::to::delay` (`fn(&Cause) -> f64`, evaluated in the guest for each object) | timer (daemon: `initial_delay`) |
//! | `cancellation_backoff`, `cancellation_timeout`, `cancellation_polling` | `cancellation_timeout = 10` (seconds: once stopped, the time to exit gracefully, then by force before the call is abandoned; how often a daemon still exiting is looked at) | daemon |
//! | `operations` | `operations = ["CREATE", "UPDATE"]` (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`; default: all; Kopf's deprecated `operation = "CREATE"` too) | validate, mutate |
//! | `subresource` | `subresource = "status"` (the subresource's writes, not the object's) | validate, mutate |
//! | `persistent`, `side_effects`, `ignore_failures` | `side_effects, ignore_failures = true` (the webhook stays when the operator exits; it has side effects, `sideEffects: NoneOnDryRun`; the API server ignores its failures, `failurePolicy: Ignore`) | validate, mutate |
//! | `deadline_ms`, `memory_mib` | `deadline_ms = 500, memory_mib = 64` (sandbox budget per call) | all |
//!
//! Several attributes may be stacked on one function: each is one registration,
//! all share the function's id, and the host calls the function once per object
//! and cause even when selectors overlap (KOPF.md §1.4).
//!
//! # Handler functions
//!
//! A handler takes `&Cause`, `&mut Cause` (to edit [`Cause::patch`] or the memo)
//! or nothing, and returns:
//! - `()`, or any `T: Serialize` — the result for `status.<id>` (`null`/`None`:
//!   nothing);
//! - `kapsel::Result<T>` (any `Result` whose error converts into [`Error`]):
//!   [`TemporaryError`] retries after its delay, [`PermanentError`] fails for
//!   good, any other error is handled per the `errors` option.
//!
//! Index handlers return `()`/`None` (keep the object's previous values), a map
//! (`BTreeMap`/`HashMap` with any serialisable keys, or a JSON object: its
//! entries), or any other value (stored under the key `null`), possibly inside a
//! `Result`.
//!
//! A panic traps the call; its message goes to stderr, which the host logs.
//!
//! # Logging and Events
//!
//! [`debug!`], [`info!`], [`warn!`], [`error!`] log through the host (which adds
//! the handler id and the object's reference); [`events::post`], [`events::info`],
//! [`events::warn`], [`events::exception`] post Kubernetes Events.
//!
//! # Kubernetes calls
//!
//! [`api::Api`] gets, lists, creates, patches and deletes objects through the
//! host. A guest declares every call it makes with [`permit!`], at item position,
//! with the selector forms above; the host refuses anything else (403 `Forbidden`):
//!
//! ```
//! kapsel::permit!("v1", "configmaps", verbs = ["get", "list", "create", "patch", "delete"]);
//! kapsel::permit!("kopf.dev", "v1", "kopfexamples", verbs = ["get"]);
//! ```
//!
//! Verbs: `get`, `list`, `watch`, `create`, `patch`, `delete`.
//!
//! # Children
//!
//! [`adopt`] makes an object the handler creates a child of the handler's object
//! (owner reference, namespace, name, labels), as `kopf.adopt` does; its parts are
//! [`append_owner_reference`], [`remove_owner_reference`], [`harmonize_naming`],
//! [`adjust_namespace`] and [`label`]. See [`hierarchies`].
//!
//! # Sub-handlers
//!
//! A changing handler (create, update, delete, resume, field) may declare sub-handlers
//! during its call, each with its own id (`<parent id>/<id>`), retries, progress and
//! result (in `status.<parent id>/<id>`), as in Kopf (KOPF.md §1.8):
//!
//! ```
//! #[kapsel::on::create("kopfexamples")]
//! fn create_fn(cause: &mut kapsel::Cause) -> kapsel::Result<()> {
//!     for item in ["a", "b"] {
//!         // Kopf: @kopf.subhandler(id=f'item-{item}', retries=3)
//!         kapsel::subhandler(format!("item-{item}")).retries(3).register(
//!             move |cause: &mut kapsel::Cause| -> kapsel::Result<kapsel::Value> {
//!                 cause.patch.set_at(&["status", "items", item], "done");
//!                 Ok(kapsel::json!({"item": item})) // in status["create_fn/item-a"]
//!             },
//!         );
//!     }
//!     Ok(()) // the declared sub-handlers run after the parent returns, as in Kopf
//! }
//! ```
//!
//! | Kopf | Kapsel |
//! |---|---|
//! | `@kopf.subhandler(id=..., errors=..., timeout=..., retries=..., backoff=...)` on a function | [`subhandler`]`(id)` [`.errors`](Subhandler::errors)`(..)` [`.timeout`](Subhandler::timeout)`(..)` [`.retries`](Subhandler::retries)`(..)` [`.backoff`](Subhandler::backoff)`(..)` [`.register`](Subhandler::register)`(closure)` |
//! | `kopf.register(fn, id=...)` | [`register`]`(id, closure)` |
//! | `await kopf.execute()` | [`execute`]`(cause)?` |
//! | `kopf.ErrorsMode` | [`ErrorsMode`] |
//! | `HandlerChildrenRetry` | the error of [`execute`]: a temporary one, to return with `?` |
//!
//! - A sub-handler is a closure, called with the parent's [`Cause`] (the same patch and
//!   memo) as the sub-handler's: its handler id, retry, start and runtime. It returns as a
//!   handler does.
//! - The host decides which declared sub-handlers are due (one per cycle, the fewest
//!   retries first, by Kopf's lifecycle) and keeps their progress. The parent is called
//!   again, quietly, until all are finished, and declares them again each time: keep it
//!   idempotent, and declare the same sub-handlers in each call.
//! - Declared and not executed by [`execute`], they run after the parent returns
//!   successfully (not after an error); the parent's result is stored once they are all
//!   finished.
//! - A sub-handler may declare sub-handlers of its own (`create_fn/item-a/step`).
//! - Only changing handlers have sub-handlers: [`execute`] fails in any other.
//!
//! # Admission webhooks
//!
//! [`on::validate`] and [`on::mutate`] (Kopf's `@kopf.on.validate`, `@kopf.on.mutate`)
//! are called by the host's admission webhook before the API server stores a write of a
//! matching object: a validating handler allows it by returning successfully and refuses
//! it by failing, with an [`AdmissionError`] for the message and HTTP code the client
//! sees (any other failure refuses with 500, as in Kopf); a mutating handler changes the
//! object through [`Cause::patch`]. [`Cause::admission`] is the request (Kopf's
//! `operation`, `userinfo`, `dryrun`, `subresource` kwargs), [`admission::warn`] a
//! warning for the client (Kopf's `warnings`):
//!
//! ```
//! use kapsel::admission::Operation;
//!
//! // Kopf: @kopf.on.validate('kopfexamples')
//! //       def check(spec, operation, **_):
//! //           if spec.get('field') == 'forbidden':
//! //               raise kopf.AdmissionError("field must not be forbidden", code=422)
//! #[kapsel::on::validate("kopfexamples")]
//! fn refuse_forbidden_field(cause: &kapsel::Cause) -> kapsel::Result<()> {
//!     if cause.spec()["field"] == "forbidden" {
//!         return Err(kapsel::AdmissionError::new("field must not be forbidden").code(422).into());
//!     }
//!     if cause.admission().is_some_and(|request| request.operation == Operation::Delete) {
//!         kapsel::admission::warn("deleting a kopfexample");
//!     }
//!     Ok(())
//! }
//!
//! // Kopf: @kopf.on.mutate('kopfexamples', operations=['CREATE'])
//! #[kapsel::on::mutate("kopfexamples", operations = ["CREATE"])]
//! fn label_new(cause: &mut kapsel::Cause) {
//!     cause.patch.set_at(&["metadata", "labels", "example.com/seen"], "yes");
//! }
//! ```
//!
//! An admission handler is called once per request, never retried; its body is the
//! object written (the stored one on `DELETE`), `old()` and `new()` the stored object
//! and the one written, its reason [`Reason::Validating`] or [`Reason::Mutating`]. Native
//! tests call it as the webhook does with `testing::admission::review`.
//!
//! # Settings
//!
//! [`settings`] reads the operator's settings (Kopf's `settings`); a startup handler may
//! change them before the operator starts, as in Kopf:
//!
//! ```
//! // Kopf: @kopf.on.startup()
//! //       def configure(settings, **_): settings.watching.server_timeout = 60
//! #[kapsel::on::startup]
//! fn configure() -> kapsel::Result<()> {
//!     kapsel::settings::set("watching.server_timeout", 60)
//! }
//! ```
//!
//! # Testing
//!
//! Native `cargo test` of a guest calls the handler functions directly, with a
//! fake host and an in-memory fake Kubernetes API: see
#![cfg_attr(not(target_arch = "wasm32"), doc = "[`testing`].")]
// The module is not in the guest build, whose documentation names it without a link.
#![cfg_attr(target_arch = "wasm32", doc = "`testing` (native builds only).")]
//!
//! # Caveats
//! - The macros refer to this crate as `::kapsel`: depend on it under its
//!   package name (`kapsel-sdk = ...`) without renaming it.
//! - Handlers are free functions (not methods) and synchronous.

extern crate self as kapsel;

pub mod admission;
pub mod api;
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code, reason = "wit-bindgen's generated canonical-ABI glue")]
mod bindings;
mod cause;
mod declaration;
mod diff;
mod error;
pub mod events;
pub mod filters;
#[cfg(target_arch = "wasm32")]
#[allow(
    unsafe_code,
    reason = "`export!` emits the component's `extern \"C\"` exports"
)]
mod guest;
pub mod hierarchies;
mod host;
pub mod index;
mod lazy;
mod log;
mod login;
mod members;
pub mod on;
mod outcome;
mod patch;
mod permissions;
#[cfg(test)]
mod proptests;
#[allow(
    missing_docs,
    reason = "hidden macro support; the types mirror the WIT records field by field"
)]
mod registry;
mod renamed;
mod selector;
pub mod settings;
mod stopping;
mod subhandlers;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod time;

pub use cause::{Cause, EventType, HandlerKind, Reason, Resource};
pub use diff::{DiffItem, DiffOp};
pub use error::{
    AdmissionError, DEFAULT_RETRY_DELAY, Error, ErrorKind, ErrorsMode, PermanentError, Result,
    TemporaryError,
};
/// Kopf's `kopf.adopt` and its parts, at the crate root as Kopf has them.
pub use hierarchies::{
    adjust_namespace, adopt, append_owner_reference, build_owner_reference, harmonize_naming,
    label, remove_owner_reference,
};
pub use host::ResourceInfo;
#[doc(inline)]
pub use kapsel_sdk_macros::index;
#[doc(inline)]
pub use kapsel_sdk_macros::permit;
pub use login::ConnectionInfo;
pub use patch::Patch;
/// Earlier names of items that moved, deprecated (see `CHANGELOG.md`).
#[allow(deprecated, reason = "re-exported to keep the earlier paths working")]
pub use renamed::{event, exception, info, warn};
/// Serde, for `#[derive(Serialize)]` results (`#[serde(crate = "kapsel::serde")]`).
#[doc(no_inline)]
pub use serde;
/// JSON values, as bodies and results are: re-exported so that a guest needs no
/// other dependency.
#[doc(no_inline)]
pub use serde_json::{self, Value, json};
pub use stopping::StopReasons;
pub use subhandlers::{Subhandler, execute, register, subhandler};

/// The SDK version a guest was built with (reported in `describe`).
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the attribute macros' output refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::HandlerKind;
    pub use crate::admission::AdmissionOptions;
    pub use crate::filters::{check_cause, check_text, check_value, field_value};
    pub use crate::log::{Level, log};
    pub use crate::registry::{
        Entry, ErrorsMode, Handler, IndexOutcome, Matcher, MetaFilter, Outcome, Permission,
        PermissionEntry, Registration, ResourceName, Selector, enable_admission, enable_chosen,
        enable_everything, enable_logins, index_error, index_ret, register, register_permission,
        result_outcome, to_json, value_outcome,
    };

    /// Written by an admission attribute with `operation = "..."`, so that the guest is
    /// warned of it where it is written, as Kopf warns of it.
    #[deprecated(
        since = "0.1.0",
        note = "`operation = \"...\"` is deprecated, as in Kopf: write `operations = [\"...\"]`"
    )]
    pub fn deprecated_operation_option() {}
}
