//! [`HostServices`]: what the operator offers a guest during one call (indexes,
//! Kubernetes calls, Events, daemon sleeps), and what one call is told: [`CallContext`]
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
}

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
