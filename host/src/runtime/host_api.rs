//! The WIT `host` interface as the guest sees it, and [`HostServices`], the part of it the
//! operator implements (indexes, Kubernetes calls, Events, daemon stops).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::bindings::{HostImports, KubeError, Level, Selector, TypesImports};
use super::state::HostState;

/// The tracing target of everything a guest says: its `log` calls, stdout and stderr.
pub(crate) const GUEST_LOG_TARGET: &str = "kapsel::guest";

/// The longest a daemon's single sleep may ask for; longer requests are cut to this.
const MAX_SLEEP: Duration = Duration::from_secs(365 * 24 * 3600);

/// A boxed future, so that [`HostServices`] stays object-safe.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the host offers a guest during one call; implemented by the operator.
///
/// Every method has a default that offers nothing (no index entries, Kubernetes calls and
/// Events refused as `NotAvailable`, daemons told to stop), so an implementation overrides
/// only what it provides. Errors returned here go back to the guest as WIT values; they
/// never fail the call by themselves.
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
}

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
    /// A daemon's call, which lives as long as the daemon: it takes none of the permits
    /// that bound the number of short calls at once (it would starve them).
    pub(crate) long_running: bool,
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
            long_running: false,
        }
    }

    /// Marks the call as a daemon's (see [`CallContext::long_running`]).
    pub(crate) fn long_running(mut self, long_running: bool) -> Self {
        self.long_running = long_running;
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

impl HostState {
    async fn kube(&mut self, request: KubeRequest) -> Result<String, KubeError> {
        let verb = request.verb();
        let services = Arc::clone(&self.services);
        let answer = services.kube(&self.caller, request).await;
        if let Err(error) = &answer {
            tracing::debug!(
                target: GUEST_LOG_TARGET,
                guest = %self.caller.guest,
                handler = %self.caller.handler_id,
                object = self.caller.object_ref(),
                verb,
                %error,
                "a Kubernetes call of the guest failed",
            );
        }
        answer
    }
}

// Each import returns `Ok` unless the host itself is broken: failures the guest should
// handle travel inside the WIT result.
impl HostImports for HostState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let c = &self.caller;
        let (guest, handler, object) = (&*c.guest, c.handler_id.as_str(), c.object_ref());
        match level {
            Level::Debug => {
                tracing::debug!(target: GUEST_LOG_TARGET, guest, handler, object, "{message}");
            }
            Level::Info => {
                tracing::info!(target: GUEST_LOG_TARGET, guest, handler, object, "{message}");
            }
            Level::Warning => {
                tracing::warn!(target: GUEST_LOG_TARGET, guest, handler, object, "{message}");
            }
            Level::Error => {
                tracing::error!(target: GUEST_LOG_TARGET, guest, handler, object, "{message}");
            }
        }
        self.services.log(&self.caller, level, &message);
        Ok(())
    }

    fn index_lookup(
        &mut self,
        index: String,
        key: String,
    ) -> wasmtime::Result<Option<Vec<String>>> {
        Ok(self.services.index_lookup(&self.caller, &index, &key))
    }

    fn index_keys(&mut self, index: String) -> wasmtime::Result<Vec<String>> {
        Ok(self.services.index_keys(&self.caller, &index))
    }

    async fn post_event(
        &mut self,
        object: Option<String>,
        event_type: String,
        reason: String,
        message: String,
    ) -> wasmtime::Result<()> {
        let services = Arc::clone(&self.services);
        let event = GuestEvent {
            object,
            event_type,
            reason,
            message,
        };
        if let Err(error) = services.post_event(&self.caller, event).await {
            tracing::warn!(
                target: GUEST_LOG_TARGET,
                guest = %self.caller.guest,
                handler = %self.caller.handler_id,
                object = self.caller.object_ref(),
                %error,
                "could not post the guest's Event",
            );
        }
        Ok(())
    }

    async fn get(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self
            .kube(KubeRequest::Get {
                target,
                namespace,
                name,
            })
            .await)
    }

    async fn list(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self
            .kube(KubeRequest::List {
                target,
                namespace,
                label_selector,
            })
            .await)
    }

    async fn create(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        body: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self
            .kube(KubeRequest::Create {
                target,
                namespace,
                body,
            })
            .await)
    }

    async fn patch(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        name: String,
        merge_patch: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self
            .kube(KubeRequest::Patch {
                target,
                namespace,
                name,
                merge_patch,
            })
            .await)
    }

    async fn delete(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Result<(), KubeError>> {
        Ok(self
            .kube(KubeRequest::Delete {
                target,
                namespace,
                name,
            })
            .await
            .map(drop))
    }

    async fn sleep_unless_stopped(&mut self, seconds: f64) -> wasmtime::Result<bool> {
        // NaN and negative sleeps are no sleep; absurd ones are cut.
        let duration = if seconds.is_nan() || seconds <= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(seconds)
                .unwrap_or(MAX_SLEEP)
                .min(MAX_SLEEP)
        };
        let services = Arc::clone(&self.services);
        let slept = std::time::Instant::now();
        let go_on = services.sleep_unless_stopped(&self.caller, duration).await;
        // A daemon's budget is for its work, not for its sleeps.
        self.deadline.extend(slept.elapsed());
        Ok(go_on)
    }
}

impl TypesImports for HostState {}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::runtime::bindings::ResourceName;

    fn state() -> HostState {
        let ctx = CallContext::new("h", Some("ns/obj".to_owned()), Arc::new(NoServices));
        HostState::new(
            "g".into(),
            ctx,
            1 << 20,
            super::super::state::Deadline::new(Instant::now() + Duration::from_secs(1)),
        )
    }

    fn pods() -> Selector {
        Selector {
            group: None,
            version: None,
            name: ResourceName::Any("pods".to_owned()),
        }
    }

    /// Without wasm: the imports answer what the services (here: none) offer, and never trap.
    #[tokio::test]
    async fn without_services_the_imports_answer_not_available() {
        let mut state = state();
        let answer = state
            .get(pods(), None, "x".to_owned())
            .await
            .expect("no trap");
        let error = answer.expect_err("no Kubernetes access");
        assert_eq!((error.code, error.reason.as_str()), (0, "NotAvailable"));
        assert!(
            error.message.contains("Kubernetes calls"),
            "{}",
            error.message
        );
        let deleted = state
            .delete(pods(), Some("ns".to_owned()), "x".to_owned())
            .await;
        assert!(deleted.expect("no trap").is_err());
        let event = state
            .post_event(None, "Normal".into(), "R".into(), "m".into())
            .await;
        assert!(event.is_ok(), "a failed Event is logged, not a trap");
        assert!(!state.sleep_unless_stopped(f64::NAN).await.expect("no trap"));
        assert_eq!(
            state.index_lookup("i".into(), "k".into()).expect("no trap"),
            None
        );
        assert!(state.index_keys("i".into()).expect("no trap").is_empty());
        assert!(state.log(Level::Error, "hello".into()).is_ok());
    }

    #[test]
    fn requests_name_their_verb_and_target() {
        let request = KubeRequest::Patch {
            target: pods(),
            namespace: None,
            name: "x".to_owned(),
            merge_patch: "{}".to_owned(),
        };
        assert_eq!(request.verb(), "patch");
        assert_eq!(request.target(), &pods());
    }
}
