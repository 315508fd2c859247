//! The operator's metrics, in Prometheus' text exposition format (version 0.0.4).
//!
//! Kopf has none; these are what controller-runtime and shell-operator users look for:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `kapsel_handler_invocations_total` | counter | guest, handler, kind |
//! | `kapsel_handler_failures_total` (final, retried or ignored) | counter | guest, handler, kind |
//! | `kapsel_handler_retries_total` (failures that will be retried) | counter | guest, handler, kind |
//! | `kapsel_handler_duration_seconds` | histogram | guest, handler, kind |
//! | `kapsel_sandbox_faults_total` | counter | guest, handler, kind, fault (`trap`, `timeout`, `memory`, `limit`) |
//! | `kapsel_call_slots`, `_busy`, `_waiting` (slots of a pool, held, calls waiting) | gauge | pool |
//! | `kapsel_guest_api_requests_total` (Kubernetes requests and Events of guests) | counter | guest, verb |
//! | `kapsel_guest_api_throttled_total` (of those, delayed or refused by the guest's rate) | counter | guest |
//! | `kapsel_events_aggregated_total` (guests' Events folded into an identical one waiting for the guest's pace) | counter | guest |
//! | `kapsel_events_dropped_total` (Events not posted, a guest's or the operator's own (`guest=""`); `queue_full`: past `--max-queued-events` waiting for the guest's pace, or 10,000 waiting to be sent; `failed`: refused, or out of retries) | counter | guest, reason |
//! | `kapsel_filter_calls_total` (`when` filters called in the guest: `pass`, `skip`, or `error`) | counter | guest, handler, result |
//! | `kapsel_self_trigger_backoffs_total` (objects backed off for re-triggering themselves) | counter | resource |
//! | `kapsel_watch_stream_restarts_total` | counter | resource |
//! | `kapsel_queue_objects` (objects with events queued or in progress) | gauge | resource |
//! | `kapsel_objects_remembered` (objects the operator keeps state for) | gauge | |
//! | `kapsel_paused` (1 while peering pauses the operator) | gauge | |
//! | `kapsel_guest_reloads_total` (guests changed while running) | counter | guest, result (`added`, `replaced`, `removed`, `refused`) |
//!
//! Handler figures, reloads and the paused state come from the journal
//! ([`Record::HandlerFinished`], [`Record::GuestReloaded`], [`Record::GuestRefused`],
//! [`Record::Paused`], [`Record::Resumed`]); the streams and queues report directly
//! through a [`Metrics`] handle.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::journal::Record;
use exposition::{Exposition, Histogram};

mod exposition;

/// The `Content-Type` of [`Metrics::render`]'s output.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds (seconds) of the handler duration buckets. A fresh sandboxed call takes
/// well under a millisecond and the default deadline is 5 s, so the buckets start finer
/// and end later than Prometheus' defaults.
const DURATION_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How busy one pool of call slots is (see `runtime::Pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotLoad {
    pub(crate) pool: &'static str,
    /// Slots in the pool.
    pub(crate) size: u32,
    /// Slots held by running calls.
    pub(crate) busy: u32,
    /// Calls waiting for slots.
    pub(crate) waiting: usize,
}

/// Where the slot figures come from (the runtime, once it runs).
type SlotSource = Arc<dyn Fn() -> Vec<SlotLoad> + Send + Sync>;

/// The operator's metrics; cheap to clone (all clones share the figures).
#[derive(Clone, Default)]
pub(crate) struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    paused: AtomicBool,
}

#[derive(Default)]
struct State {
    handlers: BTreeMap<HandlerLabels, HandlerStats>,
    faults: BTreeMap<(HandlerLabels, String), u64>,
    restarts: BTreeMap<String, u64>,
    /// Shared with every queue of the resource (one per namespace).
    queues: BTreeMap<String, Arc<AtomicI64>>,
    /// Shared with the objects' memories.
    remembered: Arc<AtomicI64>,
    /// Operator loops that ended in a panic; liveness fails while any is listed.
    dead_loops: BTreeSet<String>,
    /// Guest reloads by (guest, result).
    reloads: BTreeMap<(String, String), u64>,
    slots: Option<SlotSource>,
    /// Guests' Kubernetes requests and Events, by guest and verb.
    guest_requests: BTreeMap<(String, String), u64>,
    /// Of those, the ones the guest's rate delayed or refused, by guest.
    guest_throttled: BTreeMap<String, u64>,
    /// Guests' Events folded into an identical waiting one, by guest.
    events_folded: BTreeMap<String, u64>,
    /// Guests' Events dropped, by guest and reason.
    events_dropped: BTreeMap<(String, String), u64>,
    /// Objects backed off for re-triggering their handlers with their own patches.
    self_triggers: BTreeMap<String, u64>,
    /// `when` filter calls, by guest, handler and result.
    filters: BTreeMap<(String, String, &'static str), u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct HandlerLabels {
    guest: String,
    handler: String,
    kind: String,
}

/// Reads one counter of a handler's figures.
type Count = fn(&HandlerStats) -> u64;

#[derive(Debug)]
struct HandlerStats {
    invocations: u64,
    failures: u64,
    retries: u64,
    duration: Histogram,
}

impl Metrics {
    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts what a journal record tells (handler calls; the paused state).
    pub(crate) fn observe(&self, record: &Record) {
        match record {
            Record::HandlerFinished {
                guest,
                handler,
                kind,
                seconds,
                outcome,
                fault,
                ..
            } => {
                let labels = HandlerLabels {
                    guest: guest.clone(),
                    handler: handler.clone(),
                    kind: kind.clone(),
                };
                let mut state = self.state();
                if let Some(fault) = fault {
                    *state
                        .faults
                        .entry((labels.clone(), fault.clone()))
                        .or_default() += 1;
                }
                let stats = state
                    .handlers
                    .entry(labels)
                    .or_insert_with(|| HandlerStats {
                        invocations: 0,
                        failures: 0,
                        retries: 0,
                        duration: Histogram::new(&DURATION_BUCKETS),
                    });
                stats.invocations += 1;
                stats.failures += u64::from(outcome != "success");
                stats.retries += u64::from(outcome == "retry");
                stats.duration.observe(*seconds);
            }
            Record::GuestReloaded { guest, change, .. } => {
                *self
                    .state()
                    .reloads
                    .entry((guest.clone(), change.clone()))
                    .or_default() += 1;
            }
            Record::GuestRefused { guest, .. } => {
                *self
                    .state()
                    .reloads
                    .entry((guest.clone(), "refused".to_owned()))
                    .or_default() += 1;
            }
            Record::Paused { .. } => self.set_paused(true),
            Record::Resumed => self.set_paused(false),
            _ => {}
        }
    }

    /// The operator was paused (`true`) or resumed (`false`) by peering.
    fn set_paused(&self, paused: bool) {
        self.inner.paused.store(paused, Ordering::Relaxed);
    }

    /// A watch stream of `resource` broke and is being reopened.
    pub(crate) fn stream_restarted(&self, resource: &str) {
        *self
            .state()
            .restarts
            .entry(resource.to_owned())
            .or_default() += 1;
    }

    /// Reads the call slots' figures from `source` when rendering.
    pub(crate) fn report_slots(&self, source: impl Fn() -> Vec<SlotLoad> + Send + Sync + 'static) {
        self.state().slots = Some(Arc::new(source));
    }

    /// A guest made a Kubernetes request (`verb`) or posted an Event (`event`); `throttled`
    /// when its rate delayed or refused it.
    pub(crate) fn guest_request(&self, guest: &str, verb: &str, throttled: bool) {
        let mut state = self.state();
        *state
            .guest_requests
            .entry((guest.to_owned(), verb.to_owned()))
            .or_default() += 1;
        if throttled {
            *state.guest_throttled.entry(guest.to_owned()).or_default() += 1;
        }
    }

    /// A handler's `when` filter was called in its guest: it passed, skipped the handler,
    /// or failed (`pass`, `skip`, `error`).
    pub(crate) fn filter_called(&self, guest: &str, handler: &str, result: &'static str) {
        *self
            .state()
            .filters
            .entry((guest.to_owned(), handler.to_owned(), result))
            .or_default() += 1;
    }

    /// An Event of `guest` was folded into an identical one waiting for its pace.
    pub(crate) fn event_folded(&self, guest: &str) {
        *self
            .state()
            .events_folded
            .entry(guest.to_owned())
            .or_default() += 1;
    }

    /// An Event of `guest` was dropped, for `reason`.
    pub(crate) fn event_dropped(&self, guest: &str, reason: &str) {
        *self
            .state()
            .events_dropped
            .entry((guest.to_owned(), reason.to_owned()))
            .or_default() += 1;
    }

    /// An object of `resource` was backed off: its handlers re-trigger themselves.
    pub(crate) fn self_trigger_backoff(&self, resource: &str) {
        *self
            .state()
            .self_triggers
            .entry(resource.to_owned())
            .or_default() += 1;
    }

    /// The gauge of objects in the queues of `resource`.
    /// The gauge of objects the operator keeps state for (it forgets deleted ones).
    pub(crate) fn remembered_objects(&self) -> Gauge {
        Gauge(self.state().remembered.clone())
    }

    pub(crate) fn queue(&self, resource: &str) -> Gauge {
        Gauge(
            self.state()
                .queues
                .entry(resource.to_owned())
                .or_default()
                .clone(),
        )
    }

    /// A guard for a loop of the operator: if the loop ends by panicking (a host bug),
    /// the guard marks it dead, and the liveness endpoint fails from then on.
    /// Ending normally, or being cancelled, is fine.
    pub(crate) fn loop_watch(&self, name: impl Into<String>) -> LoopWatch {
        LoopWatch {
            metrics: self.clone(),
            name: name.into(),
        }
    }

    /// The loops that died, by name.
    pub(crate) fn dead_loops(&self) -> Vec<String> {
        self.state().dead_loops.iter().cloned().collect()
    }

    /// Every metric, in the text exposition format.
    pub(crate) fn render(&self) -> String {
        let state = self.state();
        let mut out = Exposition::default();
        render_handlers(&state, &mut out);
        render_objects(&state, &mut out);
        render_containment(&state, &mut out);
        out.family(
            "kapsel_guest_reloads_total",
            "Guests changed while the operator ran, by result: added, replaced, removed, or refused (the version before keeps serving).",
            "counter",
        );
        for ((guest, result), count) in &state.reloads {
            out.sample(
                "kapsel_guest_reloads_total",
                &[("guest", guest.clone()), ("result", result.clone())],
                *count,
            );
        }
        out.family(
            "kapsel_paused",
            "1 while peering pauses the operator, else 0.",
            "gauge",
        );
        out.sample(
            "kapsel_paused",
            &[],
            u8::from(self.inner.paused.load(Ordering::Relaxed)),
        );
        out.text
    }
}

/// The labels of a handler's samples.
fn handler_labels(l: &HandlerLabels) -> Vec<(&'static str, String)> {
    vec![
        ("guest", l.guest.clone()),
        ("handler", l.handler.clone()),
        ("kind", l.kind.clone()),
    ]
}

/// The handlers' calls: counts, durations, and what the sandbox stopped.
fn render_handlers(state: &State, out: &mut Exposition) {
    let counters: [(&str, &str, Count); 3] = [
        ("kapsel_handler_invocations_total", "Handler calls.", |s| {
            s.invocations
        }),
        (
            "kapsel_handler_failures_total",
            "Handler calls that failed (for good, to be retried, or ignored).",
            |s| s.failures,
        ),
        (
            "kapsel_handler_retries_total",
            "Handler calls that failed and will be retried.",
            |s| s.retries,
        ),
    ];
    for (name, help, value) in counters {
        out.family(name, help, "counter");
        for (labels, stats) in &state.handlers {
            out.sample(name, &handler_labels(labels), value(stats));
        }
    }
    out.family(
        "kapsel_handler_duration_seconds",
        "How long handler calls took.",
        "histogram",
    );
    for (labels, stats) in &state.handlers {
        stats.duration.render(
            out,
            "kapsel_handler_duration_seconds",
            &handler_labels(labels),
        );
    }
    out.family(
        "kapsel_sandbox_faults_total",
        "Handler calls the sandbox stopped: trap, timeout (deadline) or memory (cap).",
        "counter",
    );
    for ((labels, fault), count) in &state.faults {
        let mut labels = handler_labels(labels);
        labels.push(("fault", fault.clone()));
        out.sample("kapsel_sandbox_faults_total", &labels, *count);
    }
}

/// The watch streams and the objects they bring: restarts, queues, memories.
fn render_objects(state: &State, out: &mut Exposition) {
    out.family(
        "kapsel_watch_stream_restarts_total",
        "Watch streams that broke and were reopened.",
        "counter",
    );
    for (resource, count) in &state.restarts {
        out.sample(
            "kapsel_watch_stream_restarts_total",
            &[("resource", resource.clone())],
            *count,
        );
    }
    out.family(
        "kapsel_queue_objects",
        "Objects with events queued or being processed.",
        "gauge",
    );
    for (resource, gauge) in &state.queues {
        out.sample(
            "kapsel_queue_objects",
            &[("resource", resource.clone())],
            gauge.load(Ordering::Relaxed).max(0),
        );
    }
    out.family(
        "kapsel_objects_remembered",
        "Objects the operator keeps state for (deleted ones are forgotten).",
        "gauge",
    );
    out.sample(
        "kapsel_objects_remembered",
        &[],
        state.remembered.load(Ordering::Relaxed).max(0),
    );
}

/// A gauge of the call slots: its name, its help, and its value for one pool.
type SlotGauge = (&'static str, &'static str, fn(&SlotLoad) -> u64);

/// The call slots, the guests' requests, and the self-trigger back-offs.
fn render_containment(state: &State, out: &mut Exposition) {
    let load = state
        .slots
        .as_ref()
        .map(|source| source())
        .unwrap_or_default();
    let gauges: [SlotGauge; 3] = [
        ("kapsel_call_slots", "Call slots of a pool.", |l| {
            u64::from(l.size)
        }),
        (
            "kapsel_call_slots_busy",
            "Call slots held by running guest calls.",
            |l| u64::from(l.busy),
        ),
        (
            "kapsel_call_slots_waiting",
            "Guest calls waiting for call slots.",
            |l| l.waiting as u64,
        ),
    ];
    for (name, help, value) in gauges {
        out.family(name, help, "gauge");
        for pool in &load {
            out.sample(name, &[("pool", pool.pool.to_owned())], value(pool));
        }
    }
    out.family(
        "kapsel_guest_api_requests_total",
        "Kubernetes requests and Events (verb `event`) of guests.",
        "counter",
    );
    for ((guest, verb), count) in &state.guest_requests {
        out.sample(
            "kapsel_guest_api_requests_total",
            &[("guest", guest.clone()), ("verb", verb.clone())],
            *count,
        );
    }
    out.family(
        "kapsel_guest_api_throttled_total",
        "Guest requests and Events delayed or refused by the guest's API rate.",
        "counter",
    );
    for (guest, count) in &state.guest_throttled {
        out.sample(
            "kapsel_guest_api_throttled_total",
            &[("guest", guest.clone())],
            *count,
        );
    }
    render_guest_events(state, out);
    out.family(
        "kapsel_filter_calls_total",
        "Handlers' `when` filters called in their guests, by result (pass, skip, error).",
        "counter",
    );
    for ((guest, handler, result), count) in &state.filters {
        let labels = [
            ("guest", guest.clone()),
            ("handler", handler.clone()),
            ("result", (*result).to_owned()),
        ];
        out.sample("kapsel_filter_calls_total", &labels, *count);
    }
    out.family(
        "kapsel_self_trigger_backoffs_total",
        "Objects backed off because their handlers re-trigger themselves with their own patches.",
        "counter",
    );
    for (resource, count) in &state.self_triggers {
        out.sample(
            "kapsel_self_trigger_backoffs_total",
            &[("resource", resource.clone())],
            *count,
        );
    }
}

/// What became of the guests' Events past their pace.
fn render_guest_events(state: &State, out: &mut Exposition) {
    out.family(
        "kapsel_events_aggregated_total",
        "Guest Events folded into an identical one waiting for the guest's Event pace.",
        "counter",
    );
    for (guest, count) in &state.events_folded {
        out.sample(
            "kapsel_events_aggregated_total",
            &[("guest", guest.clone())],
            *count,
        );
    }
    out.family(
        "kapsel_events_dropped_total",
        "Events not posted (queue_full: too many waiting; failed: refused or out of retries).",
        "counter",
    );
    for ((guest, reason), count) in &state.events_dropped {
        out.sample(
            "kapsel_events_dropped_total",
            &[("guest", guest.clone()), ("reason", reason.clone())],
            *count,
        );
    }
}

/// A count others move up and down (objects with work in a resource's queues,
/// objects remembered).
#[derive(Debug, Clone, Default)]
pub(crate) struct Gauge(Arc<AtomicI64>);

impl Gauge {
    pub(crate) fn increment(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn decrement(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// See [`Metrics::loop_watch`].
#[derive(Debug)]
pub(crate) struct LoopWatch {
    metrics: Metrics,
    name: String,
}

impl Drop for LoopWatch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.metrics
                .state()
                .dead_loops
                .insert(std::mem::take(&mut self.name));
        }
    }
}

#[cfg(test)]
mod tests;
