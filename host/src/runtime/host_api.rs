//! The WIT `host`, `subhandlers`, `spawning`, `login`, `settings` and `resources` imports as the guest calls them: each one logged,
//! checked against the call's limits, and handed to the call's
//! [`HostServices`](super::services::HostServices).

use std::sync::Arc;
use std::time::Duration;

use super::bindings::{
    Declaration, Due, HostImports, KubeError, Level, LoginImports, Outcome, ResourceInfo,
    ResourcesImports, SelectionImports, Selector, SettingsImports, SpawningImports,
    SpawningOptions, SubhandlerImports, TypesImports, WitStopReasons,
};
use super::services::{GUEST_LOG_TARGET, GuestEvent, KubeRequest, StopReasons};
use super::state::{HostState, over_limit};
use crate::clock::LONGEST_WAIT;

/// What a log line costs the host beyond its text (its journal record, the fields and
/// prefix of its log record), counted against the call's log budget: empty lines are not
/// free (one call once wrote 1.19 million of them, 109 MB of log).
const LINE_COST: usize = 64;

impl HostState {
    /// Counts a log line against the call's limits; an error fails the call.
    pub(super) fn admit_log(&mut self, message: &str) -> wasmtime::Result<()> {
        let limits = &self.limits;
        if message.len() > limits.max_log_line_bytes {
            let limit = limits.max_log_line_bytes;
            return Err(self.refuse(over_limit(
                "logged a line",
                message.len(),
                limit,
                "max-log-line-bytes",
            )));
        }
        self.usage.log_bytes = self
            .usage
            .log_bytes
            .saturating_add(message.len().saturating_add(LINE_COST));
        if self.usage.log_bytes > limits.max_log_bytes_per_call {
            let (logged, limit) = (self.usage.log_bytes, limits.max_log_bytes_per_call);
            return Err(self.refuse(over_limit(
                "logged lines",
                logged,
                limit,
                "max-log-bytes-per-call",
            )));
        }
        Ok(())
    }

    /// Counts an Event against the call's limits; an error fails the call.
    fn admit_event(&mut self, event: &GuestEvent) -> wasmtime::Result<()> {
        let limits = &self.limits;
        self.usage.events = self.usage.events.saturating_add(1);
        if self.usage.events > limits.max_events_per_call {
            let message = format!(
                "posted more than {} Events in one call (--max-events-per-call)",
                limits.max_events_per_call
            );
            return Err(self.refuse(message));
        }
        let size = [&event.reason, &event.message, &event.event_type]
            .iter()
            .map(|text| text.len())
            .chain(event.object.as_ref().map(String::len))
            .fold(0_usize, usize::saturating_add);
        if size > limits.max_event_bytes {
            let limit = limits.max_event_bytes;
            return Err(self.refuse(over_limit(
                "posted an Event",
                size,
                limit,
                "max-event-bytes",
            )));
        }
        Ok(())
    }

    /// Checks the body of a Kubernetes request before anything parses it.
    fn admit_request(&mut self, request: &KubeRequest) -> wasmtime::Result<()> {
        let body = match request {
            KubeRequest::Create { body, .. } => body,
            KubeRequest::Patch { merge_patch, .. } => merge_patch,
            _ => return Ok(()),
        };
        let limit = self.limits.max_patch_bytes;
        if body.len() > limit {
            let what = format!("sent a Kubernetes {} request", request.verb());
            return Err(self.refuse(over_limit(&what, body.len(), limit, "max-patch-bytes")));
        }
        Ok(())
    }

    async fn kube(&mut self, request: KubeRequest) -> wasmtime::Result<Result<String, KubeError>> {
        self.admit_request(&request)?;
        let verb = request.verb();
        let services = Arc::clone(&self.services);
        // Waiting for the API server is no computing: the turn goes to another call.
        self.turns.pause();
        let answer = services.kube(&self.caller, request).await;
        self.turns.compute().await;
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
        Ok(answer)
    }
}

// Each import returns `Ok` unless the host itself is broken: failures the guest should
// handle travel inside the WIT result.
impl HostImports for HostState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        self.admit_log(&message)?;
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
        self.admit_event(&event)?;
        self.turns.pause();
        let posted = services.post_event(&self.caller, event).await;
        self.turns.compute().await;
        // Past the guest's pace, an Event waits, is folded or dropped in the background:
        // only a refusal (a bad Event, an object or namespace not the guest's) comes back.
        if let Err(error) = posted {
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
        self.kube(KubeRequest::Get {
            target,
            namespace,
            name,
        })
        .await
    }

    async fn list(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        self.kube(KubeRequest::List {
            target,
            namespace,
            label_selector,
        })
        .await
    }

    async fn create(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        body: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        self.kube(KubeRequest::Create {
            target,
            namespace,
            body,
        })
        .await
    }

    async fn patch(
        &mut self,
        target: Selector,
        namespace: Option<String>,
        name: String,
        merge_patch: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        self.kube(KubeRequest::Patch {
            target,
            namespace,
            name,
            merge_patch,
        })
        .await
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
            .await?
            .map(drop))
    }

    async fn sleep_unless_stopped(&mut self, seconds: f64) -> wasmtime::Result<bool> {
        // NaN and negative sleeps are no sleep; absurd ones are cut.
        let duration = if seconds.is_nan() || seconds <= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(seconds)
                .unwrap_or(LONGEST_WAIT)
                .min(LONGEST_WAIT)
        };
        let services = Arc::clone(&self.services);
        // A daemon's budget is for its work, not for its sleeps.
        self.deadline.pause();
        self.turns.pause();
        let go_on = services.sleep_unless_stopped(&self.caller, duration).await;
        self.turns.compute().await;
        self.deadline.resume();
        Ok(go_on)
    }

    fn stopped(&mut self) -> wasmtime::Result<WitStopReasons> {
        Ok(stop_reasons_to_wit(self.services.stopped(&self.caller)))
    }

    fn latest_body(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self
            .services
            .latest_body(&self.caller)
            .map(|body| body.to_string()))
    }
}

/// The WIT's flags of the host's reasons.
fn stop_reasons_to_wit(reasons: StopReasons) -> WitStopReasons {
    [
        (StopReasons::DONE, WitStopReasons::DONE),
        (
            StopReasons::FILTERS_MISMATCH,
            WitStopReasons::FILTERS_MISMATCH,
        ),
        (
            StopReasons::RESOURCE_DELETED,
            WitStopReasons::RESOURCE_DELETED,
        ),
        (
            StopReasons::OPERATOR_PAUSING,
            WitStopReasons::OPERATOR_PAUSING,
        ),
        (
            StopReasons::OPERATOR_EXITING,
            WitStopReasons::OPERATOR_EXITING,
        ),
        (
            StopReasons::DAEMON_SIGNALLED,
            WitStopReasons::DAEMON_SIGNALLED,
        ),
        (
            StopReasons::DAEMON_CANCELLED,
            WitStopReasons::DAEMON_CANCELLED,
        ),
        (
            StopReasons::DAEMON_ABANDONED,
            WitStopReasons::DAEMON_ABANDONED,
        ),
    ]
    .into_iter()
    .filter(|(reason, _)| reasons.contains(*reason))
    .fold(WitStopReasons::empty(), |wit, (_, flag)| wit | flag)
}

/// The timer and daemon options one `describe` may declare: far more than a guest has
/// handlers, few enough that a guest cannot fill the host's memory with them.
const MAX_DECLARED_OPTIONS: usize = 4096;

// What the guest answers is kept for the export that asked (`describe`, `when`), and
// ignored in any other call.
impl SpawningImports for HostState {
    fn declare(&mut self, options: SpawningOptions) -> wasmtime::Result<()> {
        if !self.spawning.describing {
            return Ok(());
        }
        if self.spawning.declared.len() >= MAX_DECLARED_OPTIONS {
            return Err(self.refuse(format!(
                "declared the options of more than {MAX_DECLARED_OPTIONS} timers and daemons"
            )));
        }
        self.spawning.declared.push(options);
        Ok(())
    }

    fn initial_delay(&mut self, seconds: f64) -> wasmtime::Result<()> {
        if self.spawning.asking_initial_delay {
            self.spawning.initial_delay = Some(seconds);
        }
        Ok(())
    }
}

impl TypesImports for HostState {}

impl HostState {
    /// Counts declared sub-handlers against the call's limit; an error fails the call.
    fn admit_subhandlers(&mut self, declared: &[Declaration]) -> wasmtime::Result<()> {
        let count = u32::try_from(declared.len()).unwrap_or(u32::MAX);
        self.usage.subhandlers = self.usage.subhandlers.saturating_add(count);
        let limit = self.limits.max_subhandlers;
        if self.usage.subhandlers > limit {
            return Err(self.refuse(format!(
                "declared more than {limit} sub-handlers in one call (--max-subhandlers)"
            )));
        }
        Ok(())
    }
}

// The sub-handlers' progress is the operator's: the services keep it; these only check
// what the guest hands over.
impl SubhandlerImports for HostState {
    fn execute(
        &mut self,
        parent: String,
        declared: Vec<Declaration>,
    ) -> wasmtime::Result<Result<Vec<Due>, String>> {
        self.admit_subhandlers(&declared)?;
        Ok(self
            .services
            .execute_subhandlers(&self.caller, &parent, declared))
    }

    fn finished(&mut self, id: String, outcome: Outcome) -> wasmtime::Result<()> {
        if let Outcome::Done(Some(result)) = &outcome
            && result.len() > self.limits.max_result_bytes
        {
            let limit = self.limits.max_result_bytes;
            let what = format!("returned a result of sub-handler '{id}'");
            return Err(self.refuse(over_limit(&what, result.len(), limit, "max-result-bytes")));
        }
        self.services
            .subhandler_finished(&self.caller, &id, outcome);
        Ok(())
    }

    fn pending(&mut self, parent: String) -> wasmtime::Result<Option<f64>> {
        Ok(self.services.pending_subhandlers(&self.caller, &parent))
    }
}

// Which handlers log in is part of what the guest declares at load: kept for the loader,
// which checks them against the registrations.
impl LoginImports for HostState {
    fn declare(&mut self, ids: Vec<String>) -> wasmtime::Result<()> {
        match &mut self.logins {
            // Once per `describe`, so that the list is bounded by the guest's own memory.
            Some(logins) if logins.is_empty() => {
                *logins = ids;
                Ok(())
            }
            Some(_) => Err(self.refuse("declared its login handlers twice".to_owned())),
            None => Err(self.refuse(
                "declared login handlers outside describe (login.declare is for describe only)"
                    .to_owned(),
            )),
        }
    }
}

impl HostState {
    /// Keeps the ids of one `selection` declaration (`what` names it), once per
    /// `describe`, so that the list is bounded by the guest's own memory.
    fn declare_selection(
        &mut self,
        which: fn(&mut HostState) -> &mut Option<Vec<String>>,
        what: &str,
        ids: Vec<String>,
    ) -> wasmtime::Result<()> {
        match which(self) {
            Some(declared) if declared.is_empty() => {
                *declared = ids;
                Ok(())
            }
            Some(_) => Err(self.refuse(format!("declared its handlers {what} twice"))),
            None => Err(self.refuse(format!(
                "declared handlers {what} outside describe (selection is for describe only)"
            ))),
        }
    }
}

// Which handlers select every resource, or resources the guest chooses, is part of what
// the guest declares at load: kept for the loader, which checks them against the
// registrations.
impl SelectionImports for HostState {
    fn everything(&mut self, ids: Vec<String>) -> wasmtime::Result<()> {
        self.declare_selection(|s| &mut s.everything, "selecting every resource", ids)
    }

    fn chosen(&mut self, ids: Vec<String>) -> wasmtime::Result<()> {
        self.declare_selection(|s| &mut s.chosen, "choosing their resources", ids)
    }
}

// The settings are the operator's: the services keep them and check the changes.
impl SettingsImports for HostState {
    fn get(&mut self) -> wasmtime::Result<String> {
        Ok(self.services.settings(&self.caller))
    }

    fn merge(&mut self, changes: String) -> wasmtime::Result<Result<(), String>> {
        Ok(self.services.merge_settings(&self.caller, &changes))
    }
}

// What discovery found of the object's resource: the services know the call's object.
impl ResourcesImports for HostState {
    fn current(&mut self) -> wasmtime::Result<Option<ResourceInfo>> {
        Ok(self.services.resource_info(&self.caller))
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::runtime::bindings::ResourceName;
    use crate::runtime::state::test_state as fresh_state;

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
        let mut state = fresh_state();
        // (`settings.get` is a `get` too.)
        let answer = HostImports::get(&mut state, pods(), None, "x".to_owned())
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
        let settings = SettingsImports::get(&mut state).expect("no trap");
        assert!(
            settings.contains("\"watching\""),
            "the defaults: {settings}"
        );
        let refused = state.merge("{}".into()).expect("no trap");
        assert_eq!(refused, Err(crate::runtime::NOT_STARTUP.to_owned()));
    }

    /// What a guest hands over is refused past the limits, and the call remembers why.
    #[tokio::test]
    async fn data_past_the_limits_fails_the_call() {
        let mut state = fresh_state();
        assert!(state.log(Level::Info, "x".repeat(16 << 10)).is_ok());
        let refused = state.log(Level::Info, "x".repeat((16 << 10) + 1));
        let message = refused.expect_err("too long").to_string();
        assert!(message.contains("--max-log-line-bytes"), "{message}");
        assert_eq!(state.exceeded.as_deref(), Some(message.as_str()));

        // Each line also counts its cost beyond the text (LINE_COST): 15 of the longest
        // fit in 256 KiB, the 16th does not.
        let mut state = fresh_state();
        for _ in 0..15 {
            state
                .log(Level::Debug, "y".repeat(16 << 10))
                .expect("within");
        }
        let refused = state.log(Level::Debug, "y".repeat(16 << 10));
        assert!(
            refused
                .expect_err("too much")
                .to_string()
                .contains("--max-log-bytes-per-call")
        );

        let mut state = fresh_state();
        let post = |state: &mut HostState, message: String| {
            state.admit_event(&GuestEvent {
                object: None,
                event_type: "Normal".into(),
                reason: "R".into(),
                message,
            })
        };
        assert!(post(&mut state, "m".repeat(1 << 20)).is_err(), "too large");
        let mut state = fresh_state();
        for _ in 0..100 {
            post(&mut state, "m".into()).expect("within");
        }
        let refused = post(&mut state, "m".into()).expect_err("too many");
        assert!(refused.to_string().contains("--max-events-per-call"));

        let mut state = fresh_state();
        let body = "b".repeat((1 << 20) + 1);
        let refused = state
            .create(pods(), None, body)
            .await
            .expect_err("too large a body fails the call");
        assert!(refused.to_string().contains("--max-patch-bytes"));
    }

    /// Login handlers are declared during `describe` only, and once.
    #[test]
    fn selections_are_declared_once_in_describe() {
        let mut state = fresh_state();
        let refused = SelectionImports::everything(&mut state, vec!["all".to_owned()])
            .expect_err("not describe");
        assert!(
            refused.to_string().contains("outside describe"),
            "{refused}"
        );
        let mut state = fresh_state();
        state.everything = Some(Vec::new());
        SelectionImports::everything(&mut state, vec!["all".to_owned()]).expect("in describe");
        assert_eq!(state.everything.as_deref(), Some(&["all".to_owned()][..]));
        let refused =
            SelectionImports::everything(&mut state, vec!["more".to_owned()]).expect_err("twice");
        assert!(refused.to_string().contains("twice"), "{refused}");
        // The handlers choosing their resources alike, apart.
        let refused =
            SelectionImports::chosen(&mut state, vec!["mine".to_owned()]).expect_err("not now");
        assert!(
            refused.to_string().contains("outside describe"),
            "{refused}"
        );
        let mut state = fresh_state();
        state.chosen = Some(Vec::new());
        SelectionImports::chosen(&mut state, vec!["mine".to_owned()]).expect("in describe");
        assert_eq!(state.chosen.as_deref(), Some(&["mine".to_owned()][..]));
    }

    #[test]
    fn logins_are_declared_once_in_describe() {
        let mut state = fresh_state();
        let refused =
            LoginImports::declare(&mut state, vec!["login".to_owned()]).expect_err("not describe");
        assert!(
            refused.to_string().contains("outside describe"),
            "{refused}"
        );
        let mut state = fresh_state();
        state.logins = Some(Vec::new());
        LoginImports::declare(&mut state, vec!["login".to_owned()]).expect("in describe");
        assert_eq!(state.logins.as_deref(), Some(&["login".to_owned()][..]));
        let refused =
            LoginImports::declare(&mut state, vec!["more".to_owned()]).expect_err("twice");
        assert!(refused.to_string().contains("twice"), "{refused}");
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
