//! [`HostServices`]: what the operator offers a guest during one call (indexes,
//! Kubernetes calls, Events, daemon sleeps, sub-handlers, settings), and what one call is told: [`CallContext`]
//! going in, [`Caller`] as the services see it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::bindings::{Declaration, Due, KubeError, Level, Outcome, Selector};
use super::deadline::Deadline;
use super::slots::Pool;

/// The tracing target of everything a guest says: its `log` calls, stdout and stderr.
pub(crate) const GUEST_LOG_TARGET: &str = "kapsel::guest";

/// What the host offers a guest during one call; implemented by the operator.
///
/// Every method has a default that offers nothing (no index entries, Kubernetes calls and
/// Events refused as `NotAvailable`, daemons told to stop), so an implementation overrides
/// only what it provides. Errors returned here go back to the guest as WIT values; they
/// never fail the call by themselves. The asynchronous methods return a [`BoxFuture`], so
/// that the trait stays object-safe.
pub(crate) trait HostServices: Send + Sync + 'static {
    /// `log`: sees every line the guest logs (after the host's own tracing event), e.g.
    /// to keep a journal of what handlers said.
    fn log(&self, caller: &Caller, level: Level, message: &str) {
        let _ = (caller, level, message);
    }

    /// `index-lookup`: the values (JSON) stored under `key` (JSON) in the named index, or
    /// `None` when the index or the key is unknown.
    fn index_lookup(&self, caller: &Caller, index: &str, key: &str) -> Option<Vec<String>> {
        let _ = (caller, index, key);
        None
    }

    /// `index-keys`: every key (JSON) of the named index.
    fn index_keys(&self, caller: &Caller, index: &str) -> Vec<String> {
        let _ = (caller, index);
        Vec::new()
    }

    /// `post-event`: post a Kubernetes Event. The guest gets no answer; a failure is logged.
    fn post_event<'a>(
        &'a self,
        caller: &'a Caller,
        event: GuestEvent,
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        let _ = (caller, event);
        Box::pin(async { Err(not_available("posting Events")) })
    }

    /// `get`/`list`/`create`/`patch`/`delete`: a Kubernetes call. The implementation checks
    /// it against the guest's declared permissions. Answers the object or list as JSON
    /// (an empty string for `delete`).
    fn kube<'a>(
        &'a self,
        caller: &'a Caller,
        request: KubeRequest,
    ) -> BoxFuture<'a, Result<String, KubeError>> {
        let _ = (caller, request);
        Box::pin(async { Err(not_available("Kubernetes calls")) })
    }

    /// `sleep-unless-stopped`: sleep up to `duration`; `false` once the daemon must stop.
    fn sleep_unless_stopped<'a>(
        &'a self,
        caller: &'a Caller,
        duration: Duration,
    ) -> BoxFuture<'a, bool> {
        let _ = (caller, duration);
        Box::pin(async { false })
    }

    /// `stopped`: why the timer or daemon being called must stop; empty while it may go
    /// on (and for every other handler).
    fn stopped(&self, caller: &Caller) -> StopReasons {
        let _ = caller;
        StopReasons::default()
    }

    /// `latest-body`: the object's body (JSON) as the operator saw it last, for timers and
    /// daemons; `None` for every other handler.
    fn latest_body(&self, caller: &Caller) -> Option<Arc<str>> {
        let _ = caller;
        None
    }

    /// `subhandlers.execute`: declares the sub-handlers of `parent` and answers those to
    /// call now; an error refuses the declaration, with the reason for the guest.
    fn execute_subhandlers(
        &self,
        caller: &Caller,
        parent: &str,
        declared: Vec<Declaration>,
    ) -> Result<Vec<Due>, String> {
        let _ = (caller, parent, declared);
        Err(NOT_CHANGING.to_owned())
    }

    /// `subhandlers.finished`: how the call of a due sub-handler ended.
    fn subhandler_finished(&self, caller: &Caller, id: &str, outcome: Outcome) {
        let _ = (caller, id, outcome);
    }

    /// `subhandlers.pending`: `None` when every sub-handler `parent` declared is
    /// finished, else the seconds until the next one is due.
    fn pending_subhandlers(&self, caller: &Caller, parent: &str) -> Option<f64> {
        let _ = (caller, parent);
        None
    }

    /// `settings.get`: the operator's settings as JSON (without an operator: the
    /// defaults).
    fn settings(&self, caller: &Caller) -> String {
        let _ = caller;
        crate::settings::Settings::default().to_json().to_string()
    }

    /// `settings.merge`: merges a JSON object of changes into the operator's settings;
    /// an error refuses them, with the reason for the guest.
    fn merge_settings(&self, caller: &Caller, changes: &str) -> Result<(), String> {
        let _ = (caller, changes);
        Err(NOT_STARTUP.to_owned())
    }

    /// `resources.current`: the resource of the call's object, as discovery found it
    /// (without an object: none).
    fn resource_info(&self, caller: &Caller) -> Option<super::bindings::ResourceInfo> {
        let _ = caller;
        None
    }
}

/// Why a timer or daemon must stop (Kopf's `DaemonStoppingReason` flags, the WIT's
/// `stop-reasons`): several at once; none while it may go on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct StopReasons(u8);

impl StopReasons {
    /// Its task has ended.
    pub(crate) const DONE: StopReasons = StopReasons(1);
    /// The object no longer matches the handler's filters (or a reload took it away).
    pub(crate) const FILTERS_MISMATCH: StopReasons = StopReasons(1 << 1);
    /// The object is being deleted, or is gone.
    pub(crate) const RESOURCE_DELETED: StopReasons = StopReasons(1 << 2);
    /// The operator pauses for a peer or a freeze.
    pub(crate) const OPERATOR_PAUSING: StopReasons = StopReasons(1 << 3);
    /// The operator exits, or no longer serves the object's resource or namespace.
    pub(crate) const OPERATOR_EXITING: StopReasons = StopReasons(1 << 4);
    /// Its `cancellation_backoff` runs.
    pub(crate) const DAEMON_SIGNALLED: StopReasons = StopReasons(1 << 5);
    /// Its `cancellation_timeout` runs.
    pub(crate) const DAEMON_CANCELLED: StopReasons = StopReasons(1 << 6);
    /// Its call was abandoned.
    pub(crate) const DAEMON_ABANDONED: StopReasons = StopReasons(1 << 7);

    /// Kopf's names, in its order.
    const NAMES: [(StopReasons, &'static str); 8] = [
        (StopReasons::DONE, "DONE"),
        (StopReasons::FILTERS_MISMATCH, "FILTERS_MISMATCH"),
        (StopReasons::RESOURCE_DELETED, "RESOURCE_DELETED"),
        (StopReasons::OPERATOR_PAUSING, "OPERATOR_PAUSING"),
        (StopReasons::OPERATOR_EXITING, "OPERATOR_EXITING"),
        (StopReasons::DAEMON_SIGNALLED, "DAEMON_SIGNALLED"),
        (StopReasons::DAEMON_CANCELLED, "DAEMON_CANCELLED"),
        (StopReasons::DAEMON_ABANDONED, "DAEMON_ABANDONED"),
    ];

    /// The reasons of these bits (as [`StopReasons::bits`] gave them).
    pub(crate) const fn from_bits(bits: u8) -> StopReasons {
        StopReasons(bits)
    }

    /// The reasons as bits, one per reason.
    pub(crate) const fn bits(self) -> u8 {
        self.0
    }

    /// Whether there is no reason: the timer or daemon may go on.
    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every reason of `other` is among these.
    pub(crate) const fn contains(self, other: StopReasons) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for StopReasons {
    type Output = StopReasons;

    fn bitor(self, other: StopReasons) -> StopReasons {
        StopReasons(self.0 | other.0)
    }
}

/// Kopf's way: `RESOURCE_DELETED|DAEMON_SIGNALLED`; `none` when empty.
impl fmt::Display for StopReasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = StopReasons::NAMES
            .iter()
            .filter(|(reason, _)| self.contains(*reason))
            .map(|(_, name)| *name)
            .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join("|"))
        }
    }
}
/// Why a handler that is not a startup handler cannot change the settings (Kopf hands
/// `settings` to activities, and what changes after the operator started has no effect).
pub(crate) const NOT_STARTUP: &str = "only startup handlers may change the operator's \
     settings, before the operator starts (in Kopf too, changes made later have no effect); \
     other handlers may read them";

/// Why a handler that is not a changing one cannot have sub-handlers (Kopf: "Sub-handlers
/// of event-handlers are not supported").
pub(crate) const NOT_CHANGING: &str = "sub-handlers are only for changing handlers \
     (create, update, delete, resume, field): other handlers keep no progress to retry them by";

/// The answer to a host call this handler has no access to.
pub(crate) fn not_available(what: &str) -> KubeError {
    KubeError::local(
        "NotAvailable",
        format!("{what} are not available to this handler"),
    )
}

/// Services that offer nothing: for `describe` at load, `kapsel inspect`, and tests.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NoServices;

impl HostServices for NoServices {}

/// What the operator passes to one guest call.
#[derive(Clone)]
pub(crate) struct CallContext {
    /// The handler being called, for log fields. (The call's budget comes from the
    /// registration with the cause's handler id.)
    pub(crate) handler_id: String,
    /// The object's reference, `namespace/name` or `name`, for log fields.
    pub(crate) object: Option<String>,
    /// What the guest may ask of the host during the call.
    pub(crate) services: Arc<dyn HostServices>,
    /// Where the call takes its slots: timers and daemons apart from the short calls,
    /// activities apart from both.
    pub(crate) pool: Pool,
}

impl CallContext {
    /// A context for `handler_id` on `object`, with `services`.
    pub(crate) fn new(
        handler_id: impl Into<String>,
        object: Option<String>,
        services: Arc<dyn HostServices>,
    ) -> Self {
        Self {
            handler_id: handler_id.into(),
            object,
            services,
            pool: Pool::Handlers,
        }
    }

    /// Takes the call's slots from `pool` (see [`CallContext::pool`]).
    pub(crate) fn in_pool(mut self, pool: Pool) -> Self {
        self.pool = pool;
        self
    }
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("handler_id", &self.handler_id)
            .field("object", &self.object)
            .finish_non_exhaustive()
    }
}

/// Who is asking, as the services see it.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    /// The guest's name (its file stem).
    pub(crate) guest: Arc<str>,
    /// The handler being called.
    pub(crate) handler_id: String,
    /// The object's reference, `namespace/name` or `name`.
    pub(crate) object: Option<String>,
    /// When the call's budget runs out: a request that would have to wait past it for
    /// the guest's API rate is refused at once.
    pub(crate) deadline: Deadline,
}

impl Caller {
    /// The object reference for log fields (`-` when the call is about no object).
    pub(crate) fn object_ref(&self) -> &str {
        self.object.as_deref().unwrap_or("-")
    }
}

/// An Event a guest asked to post.
#[derive(Clone, Debug)]
pub(crate) struct GuestEvent {
    /// The object the Event is about (JSON with apiVersion, kind, metadata); `None` means
    /// the object of the call.
    pub(crate) object: Option<String>,
    /// `Normal`, `Warning` or `Error`, as the guest gave it.
    pub(crate) event_type: String,
    pub(crate) reason: String,
    pub(crate) message: String,
}

/// A Kubernetes call a guest asked for.
#[derive(Clone, Debug)]
pub(crate) enum KubeRequest {
    /// Read one object.
    Get {
        target: Selector,
        namespace: Option<String>,
        name: String,
    },
    /// List objects, optionally by label selector.
    List {
        target: Selector,
        namespace: Option<String>,
        label_selector: Option<String>,
    },
    /// Create an object from a JSON body.
    Create {
        target: Selector,
        namespace: Option<String>,
        body: String,
    },
    /// Apply a JSON merge patch to an object.
    Patch {
        target: Selector,
        namespace: Option<String>,
        name: String,
        merge_patch: String,
    },
    /// Delete an object.
    Delete {
        target: Selector,
        namespace: Option<String>,
        name: String,
    },
}

impl KubeRequest {
    /// The RBAC verb this request needs.
    pub(crate) fn verb(&self) -> &'static str {
        match self {
            KubeRequest::Get { .. } => "get",
            KubeRequest::List { .. } => "list",
            KubeRequest::Create { .. } => "create",
            KubeRequest::Patch { .. } => "patch",
            KubeRequest::Delete { .. } => "delete",
        }
    }

    /// The resource the request is about.
    pub(crate) fn target(&self) -> &Selector {
        match self {
            KubeRequest::Get { target, .. }
            | KubeRequest::List { target, .. }
            | KubeRequest::Create { target, .. }
            | KubeRequest::Patch { target, .. }
            | KubeRequest::Delete { target, .. } => target,
        }
    }
}
