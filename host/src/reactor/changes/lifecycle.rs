//! One changing cycle: which handlers run now, and what is stored afterwards
//! (KOPF.md §1.15, §4.4, §4.7; Kopf's `process_changing_cause` and `State`).
//!
//! [`begin`] loads the records of this resource's handlers, creates fresh ones for the
//! newly selected handlers, reports and purges superseded causes, and plans the
//! handlers to run by the lifecycle (`execution.lifecycle`; default `asap`: the awakened
//! one with the fewest retries, ties in declaration order). The caller runs them (guest calls, with the
//! prechecks of `retries`) and hands the outcomes to [`finish`], which writes the
//! changed records and the results, and when everything is finished purges the records
//! and stores the new diff-base. [`after_patch`] decides the sleep/touch wake-up.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};

use super::causes::{ChangingCause, capitalize, title};
use super::patch::Patch;
use super::progress::{HandlerState, seconds};
use crate::clock;
use crate::handlers::execution::{Outcome, usable_delay};
use crate::persistence::{DiffBaseStorage, ProgressStorage};
use crate::pyformat::py_eq;

pub(crate) use crate::settings::Lifecycle;

impl Lifecycle {
    /// Picks from the awakened handlers (in declaration order, with their retries) those
    /// to run in this cycle, in order (Kopf's `kopf.lifecycles`).
    pub(crate) fn plan(self, awakened: &[(String, u32)]) -> Vec<String> {
        self.plan_with(awakened, &mut rand::rng())
    }

    /// [`Lifecycle::plan`], with the random choices of `randomized` and `shuffled` made
    /// by `rng`.
    pub(crate) fn plan_with(self, awakened: &[(String, u32)], rng: &mut impl Rng) -> Vec<String> {
        let ids = awakened.iter().map(|(id, _)| id.clone());
        match self {
            Lifecycle::AllAtOnce => ids.collect(),
            Lifecycle::OneByOne => ids.take(1).collect(),
            // Kopf's `sorted()` is stable: ties keep the declaration order.
            Lifecycle::Asap => awakened
                .iter()
                .min_by_key(|(_, r)| *r)
                .map(|(id, _)| id.clone())
                .into_iter()
                .collect(),
            Lifecycle::Randomized => awakened
                .choose(rng)
                .map(|(id, _)| id.clone())
                .into_iter()
                .collect(),
            Lifecycle::Shuffled => {
                let mut all: Vec<String> = ids.collect();
                all.shuffle(rng);
                all
            }
        }
    }
}

/// Counts of a purpose's records (Kopf's `StateCounters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counters {
    pub(crate) success: usize,
    pub(crate) failure: usize,
    pub(crate) running: usize,
}

/// The handlers' states for one cause, in a stable order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct State {
    pub(crate) handlers: Vec<(String, HandlerState)>,
    pub(crate) purpose: Option<String>,
}

impl State {
    pub(crate) fn get(&self, id: &str) -> Option<&HandlerState> {
        self.handlers.iter().find(|(h, _)| h == id).map(|(_, s)| s)
    }

    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut HandlerState> {
        self.handlers
            .iter_mut()
            .find(|(h, _)| h == id)
            .map(|(_, s)| s)
    }

    /// All active handlers finished (no handlers at all counts as done).
    pub(crate) fn done(&self) -> bool {
        self.handlers.iter().all(|(_, s)| !s.active || s.finished())
    }

    /// Seconds until each unfinished active handler is due (0 = awake now).
    pub(crate) fn delays(&self, now: DateTime<Utc>) -> Vec<f64> {
        self.handlers
            .iter()
            .filter(|(_, s)| s.active && !s.finished())
            .map(|(_, s)| s.delayed.map_or(0.0, |d| seconds(d - now).max(0.0)))
            .collect()
    }

    fn counters(&self, matches: impl Fn(&HandlerState) -> bool) -> Counters {
        let states = self.handlers.iter().map(|(_, s)| s).filter(|s| matches(s));
        let mut c = Counters::default();
        for s in states {
            c.success += usize::from(s.success);
            c.failure += usize::from(s.failure);
            c.running += usize::from(!s.finished());
        }
        c
    }

    /// Records left by other causes (their purposes, in first-seen order).
    pub(crate) fn extras(&self) -> Vec<(String, Counters)> {
        let mut purposes: Vec<String> = Vec::new();
        for (_, s) in &self.handlers {
            if let Some(p) = &s.purpose
                && Some(p) != self.purpose.as_ref()
                && !purposes.contains(p)
            {
                purposes.push(p.clone());
            }
        }
        purposes
            .into_iter()
            .map(|p| {
                let c = self.counters(|s| s.purpose.as_ref() == Some(&p));
                (p, c)
            })
            .collect()
    }

    /// The counts for the final "processed" line.
    pub(crate) fn counts(&self) -> Counters {
        self.counters(|s| {
            self.purpose.is_none() || s.purpose.is_none() || s.purpose == self.purpose
        })
    }

    /// Write the records that differ from what was read.
    pub(crate) fn store(
        &self,
        body: &serde_json::Value,
        patch: &mut Patch,
        storage: &ProgressStorage,
    ) {
        for (id, s) in &self.handlers {
            if s.changed() {
                storage.store(body, patch, id, &s.for_storage());
            }
        }
    }

    /// Purge the records of all this resource's handlers, any others in the state, and
    /// all their sub-handlers. Other operators' records are left alone.
    fn purge(
        &self,
        body: &serde_json::Value,
        patch: &mut Patch,
        storage: &ProgressStorage,
        owned: &[String],
    ) {
        for id in owned {
            storage.purge(body, patch, id);
        }
        for (id, s) in &self.handlers {
            if !owned.contains(id) {
                storage.purge(body, patch, id);
            }
            for sub in &s.subrefs {
                storage.purge(body, patch, sub);
            }
        }
    }
}

/// The start of a cycle: the state, Kopf's log lines, and the handlers to run now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cycle {
    pub(crate) state: State,
    /// "Creation is superseded by updating: 1 succeeded; 0 failed; 2 left to the moment."
    pub(crate) log: Vec<String>,
    /// Handler ids to invoke now, in order.
    pub(crate) plan: Vec<String>,
    /// Warnings about unreadable records.
    pub(crate) warnings: Vec<String>,
}

/// Everything [`begin`] and [`finish`] need besides the cause.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CycleContext<'a> {
    pub(crate) body: &'a serde_json::Value,
    pub(crate) progress: &'a ProgressStorage,
    pub(crate) diffbase: &'a DiffBaseStorage,
    /// Ids of all changing handlers of this resource (for loading and purging).
    pub(crate) owned: &'a [String],
    /// Ids of the handlers selected for this cause (after `when`), in order.
    pub(crate) selected: &'a [String],
    pub(crate) now: DateTime<Utc>,
}

/// Load the state, add fresh records, handle superseded causes, plan the handlers.
pub(crate) fn begin(
    ctx: &CycleContext<'_>,
    cause: &ChangingCause,
    lifecycle: Lifecycle,
    patch: &mut Patch,
) -> Cycle {
    let mut warnings = Vec::new();
    let purpose = cause.reason.as_str().to_owned();
    let mut state = State {
        handlers: Vec::new(),
        purpose: Some(purpose.clone()),
    };
    for id in ctx.owned.iter().chain(ctx.selected) {
        if state.get(id).is_none()
            && let Some(record) = ctx.progress.fetch(ctx.body, id, &mut warnings)
            && let Some(s) = HandlerState::from_record(&record, ctx.now)
        {
            state.handlers.push((id.clone(), s));
        }
    }
    for id in ctx.selected {
        match state.get_mut(id) {
            Some(s) => s.active = true,
            None => state.handlers.push((
                id.clone(),
                HandlerState::from_scratch(ctx.now, Some(&purpose)),
            )),
        }
    }
    let mut log = Vec::new();
    let current = capitalize(&title(&purpose)).to_lowercase();
    for (extra, c) in state.extras() {
        log.push(format!(
            "{} is superseded by {current}: {} succeeded; {} failed; {} left to the moment.",
            capitalize(&title(&extra)),
            c.success,
            c.failure,
            c.running
        ));
        for id in ctx.selected {
            if let Some(s) = state.get_mut(id) {
                s.purpose = Some(purpose.clone());
            }
        }
    }
    if !state.extras().is_empty() {
        state.purge(ctx.body, patch, ctx.progress, ctx.owned);
    }
    let awakened: Vec<(String, u32)> = ctx
        .selected
        .iter()
        .filter_map(|id| {
            state
                .get(id)
                .filter(|s| s.awakened(ctx.now))
                .map(|s| (id.clone(), s.retries))
        })
        .collect();
    Cycle {
        plan: lifecycle.plan(&awakened),
        state,
        log,
        warnings,
    }
}

/// The end of a cycle.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CycleEnd {
    /// All selected handlers finished (or none were selected).
    pub(crate) done: bool,
    /// Seconds until each pending handler is due; empty when done.
    pub(crate) delays: Vec<f64>,
    /// "Creation is processed: 3 succeeded; 0 failed." when done with handlers.
    pub(crate) log: Vec<String>,
    /// The object counts as fully handled once (no more resume handlers in this process).
    pub(crate) fully_handled: bool,
    /// The diff-base was too large and stored with digests, for the first time: the
    /// warning to log and post.
    pub(crate) oversized: Option<String>,
}

/// Apply the outcomes: records, results, and on completion the purge and the diff-base.
pub(crate) fn finish(
    ctx: &CycleContext<'_>,
    cause: &ChangingCause,
    mut cycle: Cycle,
    outcomes: Vec<(String, Outcome)>,
    patch: &mut Patch,
) -> CycleEnd {
    let mut log = Vec::new();
    let mut delays = Vec::new();
    let done = if ctx.selected.is_empty() {
        true
    } else {
        for (id, outcome) in &outcomes {
            if let Some(s) = cycle.state.get_mut(id) {
                apply_outcome(s, outcome, ctx.now);
            }
        }
        cycle.state.store(ctx.body, patch, ctx.progress);
        for (id, outcome) in &outcomes {
            if outcome.error.is_none()
                && let Some(result) = &outcome.result
            {
                patch.deliver_result(id, result);
            }
        }
        let done = cycle.state.done();
        if done {
            let c = cycle.state.counts();
            let purpose = cycle.state.purpose.clone().unwrap_or_default();
            log.push(format!(
                "{} is processed: {} succeeded; {} failed.",
                capitalize(&title(&purpose)),
                c.success,
                c.failure
            ));
            cycle.state.purge(ctx.body, patch, ctx.progress, ctx.owned);
        }
        delays = cycle.state.delays(ctx.now);
        done
    };
    let mut oversized = None;
    if done
        && let Some(new) = &cause.new
        && !cause.old.as_ref().is_some_and(|old| py_eq(old, new))
    {
        oversized = ctx
            .diffbase
            .store(ctx.body, patch, new)
            .map(|shrunk| shrunk.message());
    }
    CycleEnd {
        done,
        delays,
        log,
        fully_handled: done,
        oversized,
    }
}

/// Kopf's `HandlerState.with_outcome`.
pub(crate) fn apply_outcome(s: &mut HandlerState, outcome: &Outcome, now: DateTime<Utc>) {
    s.started = Some(s.started.unwrap_or(now));
    s.stopped = s.stopped.or(outcome.is_final.then_some(now));
    // Whole microseconds, as progress records write times.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "usable delays are between 0 and a year, far inside the u64 µs range"
    )]
    let delay = |d: f64| Duration::from_micros((usable_delay(d) * 1e6) as u64);
    s.delayed = outcome.delay.map(|d| clock::after(now, delay(d)));
    s.success = outcome.is_final && outcome.error.is_none();
    s.failure = outcome.is_final && outcome.error.is_some();
    s.retries += 1;
    s.message = outcome.error.clone();
    for sub in &outcome.subrefs {
        if !s.subrefs.contains(sub) {
            s.subrefs.push(sub.clone());
        }
    }
    s.subrefs.sort();
}

/// Kopf's cap on one sleep for delayed handlers (then it touches and re-evaluates).
pub(crate) const WAITING_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(600);

/// What to do after the cycle's patch was sent (or not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Wakeup {
    /// Nothing pending: wait for new changes.
    Idle,
    /// The patch itself produces the next event (pending handlers will run then).
    ByPatch,
    /// Sleep this long (interruptible by any new event for the object), then touch.
    SleepThenTouch(Duration),
}

/// Kopf's `apply()` after-patch rules over the cycle's delays.
pub(crate) fn after_patch(patched: bool, delays: &[f64]) -> Wakeup {
    let Some(delay) = delays.iter().copied().reduce(f64::min) else {
        return Wakeup::Idle;
    };
    if patched {
        return Wakeup::ByPatch; // incl. delay 0: the patch's own event wakes it
    }
    let capped = Duration::try_from_secs_f64(delay.max(0.0)).unwrap_or(WAITING_KEEPALIVE_INTERVAL);
    Wakeup::SleepThenTouch(capped.min(WAITING_KEEPALIVE_INTERVAL))
}

/// The value of the touch marker: Python's `datetime.now(timezone.utc).isoformat()`,
/// which omits the microseconds when they are zero.
pub(crate) fn touch_value(now: DateTime<Utc>) -> String {
    let format = if now.timestamp_subsec_micros() == 0 {
        SecondsFormat::Secs
    } else {
        SecondsFormat::Micros
    };
    now.to_rfc3339_opts(format, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycles_pick() {
        let awake = vec![
            ("a".to_owned(), 1),
            ("b".to_owned(), 0),
            ("c".to_owned(), 0),
        ];
        assert_eq!(
            Lifecycle::Asap.plan(&awake),
            vec!["b"],
            "fewest retries, first declared"
        );
        assert_eq!(Lifecycle::OneByOne.plan(&awake), vec!["a"]);
        assert_eq!(Lifecycle::AllAtOnce.plan(&awake), vec!["a", "b", "c"]);
        for lifecycle in [
            Lifecycle::Asap,
            Lifecycle::OneByOne,
            Lifecycle::AllAtOnce,
            Lifecycle::Randomized,
            Lifecycle::Shuffled,
        ] {
            assert!(lifecycle.plan(&[]).is_empty(), "{lifecycle:?}");
        }
    }

    /// `randomized` runs one awakened handler, any of them; `shuffled` all of them, in
    /// any order (Kopf's `random.choice` and `random.sample`): with seeded choices, each
    /// handler is picked and each order comes up, and nothing else does.
    #[test]
    fn random_lifecycles_pick_by_their_rng() {
        use rand::SeedableRng;
        let awake: Vec<(String, u32)> = ["a", "b", "c"]
            .iter()
            .map(|id| ((*id).to_owned(), 0))
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(32);
        let mut picked = std::collections::BTreeSet::new();
        let mut orders = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let one = Lifecycle::Randomized.plan_with(&awake, &mut rng);
            assert_eq!(one.len(), 1, "{one:?}");
            picked.insert(one[0].clone());
            let all = Lifecycle::Shuffled.plan_with(&awake, &mut rng);
            let mut sorted = all.clone();
            sorted.sort();
            assert_eq!(sorted, ["a", "b", "c"], "each once: {all:?}");
            orders.insert(all);
        }
        assert_eq!(picked.len(), 3, "every handler is picked: {picked:?}");
        assert_eq!(orders.len(), 6, "every order comes up: {orders:?}");
        let mut same = rand::rngs::StdRng::seed_from_u64(7);
        let mut again = rand::rngs::StdRng::seed_from_u64(7);
        assert_eq!(
            Lifecycle::Shuffled.plan_with(&awake, &mut same),
            Lifecycle::Shuffled.plan_with(&awake, &mut again),
            "the choices are the rng's alone"
        );
    }

    #[test]
    fn wakeups() {
        assert_eq!(after_patch(false, &[]), Wakeup::Idle);
        assert_eq!(after_patch(true, &[]), Wakeup::Idle);
        assert_eq!(after_patch(true, &[5.0, 0.0]), Wakeup::ByPatch);
        assert_eq!(
            after_patch(false, &[5.0, 2.5]),
            Wakeup::SleepThenTouch(Duration::from_millis(2500))
        );
        assert_eq!(
            after_patch(false, &[0.0]),
            Wakeup::SleepThenTouch(Duration::ZERO)
        );
        assert_eq!(
            after_patch(false, &[7200.0]),
            Wakeup::SleepThenTouch(WAITING_KEEPALIVE_INTERVAL)
        );
        let t =
            super::super::progress::parse_time("2026-11-30T03:32:52.000123+00:00").expect("time");
        assert_eq!(touch_value(t), "2026-11-30T03:32:52.000123+00:00");
        let t = super::super::progress::parse_time("2026-11-30T03:32:52+00:00").expect("time");
        assert_eq!(touch_value(t), "2026-11-30T03:32:52+00:00");
    }
}
