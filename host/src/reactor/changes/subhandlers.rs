//! Sub-handlers (KOPF.md §1.8; Kopf's `kopf.execute` and `subhandling_context`): what
//! one call of a changing handler declares, which of it runs now, and what is stored.
//!
//! A changing handler declares its sub-handlers during its call, every cycle anew (their
//! code is not persisted, as in Kopf). [`Children::execute`] loads the records of a
//! parent's declared sub-handlers (ids `<parent id>/<sub id>`, at any depth), creates
//! fresh ones, and plans those to call now by the lifecycle, giving up before the call
//! on the ones out of `retries` or `timeout`. The guest calls the planned ones inside
//! the same call and reports each ([`Children::finished`]): the decision is Kopf's, as
//! for any handler, and a sub-handler that returned while its own sub-handlers are
//! unfinished is retried quietly (Kopf's `HandlerChildrenRetry`), as is the parent then
//! ([`Children::pending`]). Afterwards [`Children::store`] puts every changed record and
//! every result in the cycle's patch, and [`Children::subrefs`] lists every declared id
//! for the parent's record, so that the parent's purge purges them all.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::lifecycle::{Lifecycle, State, apply_outcome};
use super::patch::Patch;
use super::progress::{HandlerState, format_time, seconds};
use crate::handlers::execution::{
    Attempt, Decision, Outcome, RetryPolicy, decide, display_name, precheck, taken,
};
use crate::persistence::ProgressStorage;
use crate::runtime::{self, Declaration, Due, ErrorsMode, HandlerKind};

/// The sub-handlers of one call of a top-level changing handler.
#[derive(Debug)]
pub(crate) struct Children {
    /// The top-level handler's id.
    root: String,
    /// Its kind, which its sub-handlers share (for Kopf's messages).
    kind: HandlerKind,
    /// The cause's reason, the purpose of fresh records.
    purpose: String,
    lifecycle: Lifecycle,
    /// The host's shortest retry delay, in seconds.
    min_delay: f64,
    /// The delay after an arbitrary failure of a sub-handler that declares no backoff.
    default_backoff: f64,
    /// Each parent that executed its sub-handlers, in the order they did.
    families: Vec<Family>,
    /// The sub-handlers handed to the guest and not reported yet, innermost last.
    running: Vec<String>,
}

/// One parent's declared sub-handlers.
#[derive(Debug)]
struct Family {
    parent: String,
    /// Full ids and their retry policies, in declaration order.
    declared: Vec<(String, RetryPolicy)>,
    /// Their records, with the outcomes of this call applied.
    state: State,
    /// The outcomes of this call, in the order they came.
    outcomes: Vec<(String, Outcome)>,
}

/// What [`Children::execute`] planned: the sub-handlers to call now, and the lines of
/// those given up on before their call (out of retries or time).
#[derive(Debug, Default)]
pub(crate) struct Planned {
    pub(crate) due: Vec<Due>,
    pub(crate) given_up: Vec<String>,
}

impl Children {
    /// No sub-handlers yet for a call of `root` (of `kind`) for a cause of this
    /// `purpose`.
    pub(crate) fn new(
        (root, kind): (&str, HandlerKind),
        purpose: &str,
        lifecycle: Lifecycle,
        (min_delay, default_backoff): (f64, f64),
    ) -> Self {
        Children {
            root: root.to_owned(),
            kind,
            purpose: purpose.to_owned(),
            lifecycle,
            min_delay,
            default_backoff,
            families: Vec::new(),
            running: Vec::new(),
        }
    }

    /// Declares the sub-handlers of `parent` (the top-level handler, or a sub-handler
    /// being called) and plans the ones to call now. An error refuses the declaration.
    pub(crate) fn execute(
        &mut self,
        (body, storage): (&Value, &ProgressStorage),
        parent: &str,
        declared: Vec<Declaration>,
        now: DateTime<Utc>,
    ) -> Result<Planned, String> {
        self.check(parent, &declared)?;
        let declared: Vec<(String, RetryPolicy)> = declared
            .into_iter()
            .map(|d| (format!("{parent}/{}", d.id), self.policy(&d)))
            .collect();
        let mut state = State {
            handlers: Vec::new(),
            purpose: Some(self.purpose.clone()),
        };
        // Unreadable records start afresh, as Kopf's do; the top-level cycle warns about
        // its own records only.
        let mut unreadable = Vec::new();
        for (id, _) in &declared {
            let stored = storage
                .fetch(body, id, &mut unreadable)
                .and_then(|record| HandlerState::from_record(&record, now));
            let fresh = || HandlerState::from_scratch(now, Some(&self.purpose));
            let s = stored.map_or_else(fresh, |s| HandlerState { active: true, ..s });
            state.handlers.push((id.clone(), s));
        }
        let awakened: Vec<(String, u32)> = state
            .handlers
            .iter()
            .filter(|(_, s)| s.awakened(now))
            .map(|(id, s)| (id.clone(), s.retries))
            .collect();
        let mut family = Family {
            parent: parent.to_owned(),
            declared,
            state,
            outcomes: Vec::new(),
        };
        let mut planned = Planned::default();
        for id in self.lifecycle.plan(&awakened) {
            let (Some(s), Some(policy)) = (family.state.get(&id), family.policy(&id)) else {
                continue;
            };
            let started = s.started.unwrap_or(now);
            let retries = s.retries;
            let name = display_name(self.kind, &id);
            if let Some(outcome) = precheck(&name, policy, retries, now - started) {
                planned
                    .given_up
                    .push(outcome.error.clone().unwrap_or_default());
                family.record(&id, outcome, now);
                continue;
            }
            planned.due.push(Due {
                id: id.clone(),
                retry: retries,
                started: format_time(started),
                runtime_seconds: seconds(now - started),
            });
            self.running.push(id);
        }
        self.families.push(family);
        Ok(planned)
    }

    /// Refuses what Kopf would not run: a parent that is not being called, a second
    /// execution for the same parent, an empty, nested or repeated id.
    fn check(&self, parent: &str, declared: &[Declaration]) -> Result<(), String> {
        if parent != self.root && !self.running.iter().any(|id| id == parent) {
            return Err(format!(
                "'{parent}' is not being called: sub-handlers are declared by the handler \
                 being called ('{}') or by one of its sub-handlers while it is called",
                self.root
            ));
        }
        if self.families.iter().any(|f| f.parent == parent) {
            return Err(format!(
                "the sub-handlers of '{parent}' were already executed in this call"
            ));
        }
        for (index, d) in declared.iter().enumerate() {
            if d.id.is_empty() || d.id.contains('/') {
                return Err(format!(
                    "a sub-handler id must be non-empty and without '/' (ids nest as \
                     '<parent>/<id>' by themselves): {:?}",
                    d.id
                ));
            }
            if declared[..index].iter().any(|other| other.id == d.id) {
                return Err(format!(
                    "sub-handler id '{}' is declared twice by '{parent}'",
                    d.id
                ));
            }
        }
        Ok(())
    }

    /// A declared sub-handler's retry options (Kopf's handler defaults: errors are
    /// temporary).
    fn policy(&self, d: &Declaration) -> RetryPolicy {
        RetryPolicy {
            errors: d.errors.unwrap_or(ErrorsMode::Temporary),
            timeout: d.timeout_seconds,
            retries: d.retries,
            backoff: d.backoff_seconds.filter(|s| s.is_finite() && *s >= 0.0),
            default_backoff: self.default_backoff,
            min_delay: self.min_delay,
        }
    }

    /// How the call of a due sub-handler ended: Kopf's decision on it (a success with
    /// unfinished sub-handlers of its own is a quiet retry). An error: `id` was not due.
    pub(crate) fn finished(
        &mut self,
        id: &str,
        reply: runtime::Outcome,
        now: DateTime<Utc>,
    ) -> Result<Decision, String> {
        let Some(position) = self.running.iter().position(|r| r == id) else {
            return Err(format!(
                "sub-handler '{id}' reported an outcome without being due"
            ));
        };
        self.running.remove(position);
        let (attempt, _) = taken(reply, None);
        let attempt = match (attempt, self.pending(id, now)) {
            (Attempt::Success(_), Some(delay)) => Attempt::ChildrenRetry { delay: Some(delay) },
            (attempt, _) => attempt,
        };
        let subrefs = self.descendants(id);
        let family = self
            .families
            .iter_mut()
            .find(|f| f.policy(id).is_some())
            .ok_or_else(|| format!("sub-handler '{id}' was never declared"))?;
        let (Some(s), Some(policy)) = (family.state.get(id), family.policy(id)) else {
            return Err(format!("sub-handler '{id}' was never declared"));
        };
        let started = s.started.unwrap_or(now);
        let name = display_name(self.kind, id);
        let mut decision = decide(&name, policy, s.retries, now - started, attempt);
        decision.outcome.subrefs = subrefs;
        family.record(id, decision.outcome.clone(), now);
        Ok(decision)
    }

    /// The sub-handlers handed to the guest and not reported yet, outermost first.
    pub(crate) fn running(&self) -> Vec<String> {
        self.running.clone()
    }

    /// `None` when every sub-handler `parent` declared in this call is finished (or it
    /// declared none), else the seconds until the next one is due.
    pub(crate) fn pending(&self, parent: &str, now: DateTime<Utc>) -> Option<f64> {
        let family = self.families.iter().find(|f| f.parent == parent)?;
        if family.state.done() {
            return None;
        }
        family.state.delays(now).into_iter().reduce(f64::min)
    }

    /// Every sub-handler declared in this call, at every depth: the top-level handler's
    /// `subrefs`.
    pub(crate) fn subrefs(&self) -> Vec<String> {
        self.descendants(&self.root)
    }

    /// The ids declared under `id`, at every depth (Kopf gives every ancestor all of them).
    fn descendants(&self, id: &str) -> Vec<String> {
        let prefix = format!("{id}/");
        let mut ids: Vec<String> = self
            .families
            .iter()
            .flat_map(|f| f.declared.iter().map(|(id, _)| id))
            .filter(|sub| sub.starts_with(&prefix))
            .cloned()
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Puts the changed records and the results of this call in the cycle's patch.
    pub(crate) fn store(&self, body: &Value, patch: &mut Patch, storage: &ProgressStorage) {
        for family in &self.families {
            family.state.store(body, patch, storage);
            for (id, outcome) in &family.outcomes {
                if outcome.error.is_none()
                    && let Some(result) = &outcome.result
                {
                    patch.deliver_result(id, result);
                }
            }
        }
    }
}

impl Family {
    fn policy(&self, id: &str) -> Option<&RetryPolicy> {
        self.declared
            .iter()
            .find(|(declared, _)| declared == id)
            .map(|(_, policy)| policy)
    }

    /// Applies an outcome to the sub-handler's record (Kopf's `with_outcomes`).
    fn record(&mut self, id: &str, outcome: Outcome, now: DateTime<Utc>) {
        if let Some(s) = self.state.get_mut(id) {
            apply_outcome(s, &outcome, now);
        }
        self.outcomes.push((id.to_owned(), outcome));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::handlers::execution::Verdict;
    use crate::reactor::changes::ChangeSettings;
    use crate::reactor::changes::progress::parse_time;
    use crate::reactor::changes::tests::merge;

    fn now() -> DateTime<Utc> {
        parse_time("2026-12-07T08:00:00+00:00").expect("a time")
    }

    fn storage() -> ProgressStorage {
        ChangeSettings::default().progress().clone()
    }

    fn declare(id: &str) -> Declaration {
        Declaration {
            id: id.to_owned(),
            errors: None,
            timeout_seconds: None,
            retries: None,
            backoff_seconds: None,
        }
    }

    fn children() -> Children {
        Children::new(
            ("create_fn", HandlerKind::Create),
            "create",
            Lifecycle::Asap,
            (0.0, 60.0),
        )
    }

    fn done(result: Value) -> runtime::Outcome {
        runtime::Outcome::Done(Some(result.to_string()))
    }

    /// The stored record of `id` in `body` (annotations, Kopf's V2 key).
    fn record(body: &Value, id: &str) -> Value {
        let mut unreadable = Vec::new();
        storage()
            .fetch(body, id, &mut unreadable)
            .unwrap_or(Value::Null)
    }

    /// One cycle: the parent declares `ids`, the due ones answer by `answer`; returns the
    /// body with the cycle's patch applied and what the parent's children left pending.
    fn cycle(
        body: &Value,
        ids: &[&str],
        answer: impl Fn(&str) -> runtime::Outcome,
    ) -> (Value, Vec<String>, Option<f64>) {
        let mut children = children();
        let declared = ids.iter().map(|id| declare(id)).collect();
        let planned = children
            .execute((body, &storage()), "create_fn", declared, now())
            .expect("declared");
        let due: Vec<String> = planned.due.iter().map(|d| d.id.clone()).collect();
        for id in &due {
            children.finished(id, answer(id), now()).expect("due");
        }
        let pending = children.pending("create_fn", now());
        let mut patch = Patch::default();
        children.store(body, &mut patch, &storage());
        let mut body = body.clone();
        merge(&mut body, &Value::Object(patch.merge));
        (body, due, pending)
    }

    #[test]
    fn one_sub_handler_runs_per_cycle_until_all_are_done() {
        let body = json!({"metadata": {"name": "x"}});
        let ok = |id: &str| done(json!({"id": id}));
        let (body, due, pending) = cycle(&body, &["a", "b"], ok);
        assert_eq!(due, ["create_fn/a"], "asap: one at a time, first declared");
        assert_eq!(
            pending,
            Some(0.0),
            "b is awake: the parent comes back at once"
        );
        assert_eq!(record(&body, "create_fn/a")["success"], json!(true));
        assert_eq!(
            record(&body, "create_fn/b")["retries"],
            json!(0),
            "every declared sub-handler gets its record at once, as in Kopf"
        );
        assert_eq!(body["status"]["create_fn/a"], json!({"id": "create_fn/a"}));

        let (body, due, pending) = cycle(&body, &["a", "b"], ok);
        assert_eq!(due, ["create_fn/b"], "a is finished and not called again");
        assert_eq!(pending, None);
        assert_eq!(record(&body, "create_fn/b")["success"], json!(true));
    }

    #[test]
    fn a_failing_sub_handler_keeps_the_parent_pending_until_it_gives_up() {
        let body = json!({"metadata": {"name": "x"}});
        let mut children = children();
        let mut limited = declare("a");
        limited.retries = Some(2);
        limited.backoff_seconds = Some(5.0);
        let planned = children
            .execute(
                (&body, &storage()),
                "create_fn",
                vec![limited.clone()],
                now(),
            )
            .expect("declared");
        let decision = children
            .finished(
                &planned.due[0].id,
                runtime::Outcome::Failed("boom".into()),
                now(),
            )
            .expect("due");
        assert_eq!(decision.verdict, Verdict::Retry);
        assert_eq!(
            decision.line,
            "Handler 'create_fn/a' failed with an exception and will try again in 5 seconds: boom"
        );
        assert_eq!(children.pending("create_fn", now()), Some(5.0));
        let mut patch = Patch::default();
        children.store(&body, &mut patch, &storage());
        let mut body = body;
        merge(&mut body, &Value::Object(patch.merge));

        // Five seconds later, the second and last attempt fails for good.
        let later = now() + chrono::TimeDelta::seconds(5);
        let mut children = Children::new(
            ("create_fn", HandlerKind::Create),
            "create",
            Lifecycle::Asap,
            (0.0, 60.0),
        );
        let planned = children
            .execute((&body, &storage()), "create_fn", vec![limited], later)
            .expect("declared");
        assert_eq!(planned.due[0].retry, 1);
        let decision = children
            .finished(
                "create_fn/a",
                runtime::Outcome::Failed("boom".into()),
                later,
            )
            .expect("due");
        assert_eq!(decision.verdict, Verdict::Failure);
        assert_eq!(
            children.pending("create_fn", later),
            None,
            "a failed sub-handler is finished: the parent goes on, as in Kopf"
        );
    }

    #[test]
    fn a_sub_handler_out_of_retries_is_given_up_on_before_its_call() {
        let record = r#"{"started":"2026-12-07T07:00:00.000000+00:00","purpose":"create","retries":3,"success":false,"failure":false}"#;
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/create_fn.a": record}}});
        let mut children = children();
        let mut limited = declare("a");
        limited.retries = Some(3);
        let planned = children
            .execute((&body, &storage()), "create_fn", vec![limited], now())
            .expect("declared");
        assert!(planned.due.is_empty());
        assert_eq!(
            planned.given_up,
            ["Handler 'create_fn/a' has exceeded 3 retries."]
        );
        assert_eq!(children.pending("create_fn", now()), None);
    }

    #[test]
    fn nested_sub_handlers_keep_their_parent_pending_and_are_everyones_subrefs() {
        let body = json!({"metadata": {"name": "x"}});
        let mut children = children();
        let planned = children
            .execute((&body, &storage()), "create_fn", vec![declare("a")], now())
            .expect("declared");
        assert_eq!(planned.due[0].id, "create_fn/a");
        let nested = children
            .execute(
                (&body, &storage()),
                "create_fn/a",
                vec![declare("x"), declare("y")],
                now(),
            )
            .expect("a sub-handler being called declares its own");
        assert_eq!(nested.due[0].id, "create_fn/a/x");
        children
            .finished("create_fn/a/x", done(Value::Null), now())
            .expect("due");
        let a = children
            .finished("create_fn/a", done(json!(1)), now())
            .expect("due");
        assert_eq!(a.verdict, Verdict::Pending, "y is unfinished");
        assert_eq!(
            a.line,
            "Handler 'create_fn/a' has unfinished sub-handlers. Will retry soon."
        );
        assert_eq!(a.outcome.subrefs, ["create_fn/a/x", "create_fn/a/y"]);
        assert_eq!(children.pending("create_fn", now()), Some(0.0));
        assert_eq!(
            children.subrefs(),
            ["create_fn/a", "create_fn/a/x", "create_fn/a/y"]
        );
    }

    #[test]
    fn declarations_kopf_would_not_run_are_refused() {
        let body = json!({});
        let execute = |children: &mut Children, parent: &str, ids: &[&str]| {
            let declared = ids.iter().map(|id| declare(id)).collect();
            children.execute((&body, &storage()), parent, declared, now())
        };
        let mut c = children();
        let refused = |r: Result<Planned, String>| r.expect_err("refused");
        assert!(refused(execute(&mut c, "other", &["a"])).contains("is not being called"));
        assert!(refused(execute(&mut c, "create_fn", &["a", "a"])).contains("declared twice"));
        assert!(refused(execute(&mut c, "create_fn", &[""])).contains("non-empty"));
        assert!(refused(execute(&mut c, "create_fn", &["a/b"])).contains("without '/'"));
        execute(&mut c, "create_fn", &["a"]).expect("declared");
        assert!(refused(execute(&mut c, "create_fn", &["b"])).contains("already executed"));
        assert!(
            c.finished("create_fn/b", done(Value::Null), now())
                .expect_err("not due")
                .contains("without being due")
        );
    }
}
