//! One handler registration as the host uses it ([`HandlerSpec`], read once from the
//! contract's registration), and a loaded guest's handler ([`Handler`]).

use super::filters::{Filters, Matcher};
use crate::cluster::{Choices, Selector};
use crate::limits::Limits;
use crate::runtime::{
    self, ErrorsMode, Guest, HandlerKind, Registration, SpawningOptions, Webhook,
};

/// A number of seconds, if it is one (absent, negative, zero or NaN: not set).
fn positive(seconds: Option<f64>) -> Option<f64> {
    seconds.filter(|s| s.is_finite() && *s > 0.0)
}

/// One registration, as the host uses it.
#[derive(Debug, Clone)]
pub(crate) struct HandlerSpec {
    pub(crate) id: String,
    pub(crate) kind: HandlerKind,
    pub(crate) selectors: Vec<Selector>,
    pub(crate) filters: Filters,
    pub(crate) has_when: bool,
    pub(crate) errors: Option<ErrorsMode>,
    /// Seconds to wait after an arbitrary failure before retrying.
    pub(crate) backoff_seconds: Option<f64>,
    /// Changing handlers: give up this long after the first attempt.
    pub(crate) timeout_seconds: Option<f64>,
    /// Changing handlers: at most this many attempts.
    pub(crate) retries: Option<u32>,
    /// on.delete: no finalizer is needed for this handler.
    pub(crate) optional: bool,
    /// on.resume: also resume objects that are being deleted.
    pub(crate) deleted: bool,
    /// on.update/on.field: the field's old value must match.
    pub(crate) old: Option<Matcher>,
    /// on.update/on.field: the field's new value must match.
    pub(crate) new: Option<Matcher>,
    /// JSON, passed back to the handler.
    pub(crate) param: Option<String>,
    /// Timers: when they run (KOPF.md §1.10); daemons: their initial delay.
    pub(crate) schedule: Schedule,
    /// Daemons: how they are stopped (KOPF.md §1.9).
    pub(crate) cancellation: Cancellation,
    /// The host's shortest retry delay, in seconds (`Limits::min_retry_delay`).
    pub(crate) min_retry_delay: f64,
    /// The delay after an arbitrary failure when `backoff_seconds` says nothing (Kopf's
    /// `execution.default_backoff`).
    pub(crate) default_backoff: f64,
}

/// Kopf's `settings.background.cancellation_polling`: how often a daemon still exiting
/// without a timeout is looked at again, in seconds.
const DEFAULT_CANCELLATION_POLLING: f64 = 60.0;

/// How a daemon is stopped once asked to (Kopf's `cancellation_*` options, in seconds):
/// given `backoff` to exit gracefully, then `timeout` to exit by force, then abandoned;
/// without a timeout, waited for (looked at again every `polling`). Timers have only the
/// polling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cancellation {
    pub(crate) backoff: Option<f64>,
    pub(crate) timeout: Option<f64>,
    pub(crate) polling: f64,
}

impl Default for Cancellation {
    fn default() -> Self {
        Cancellation {
            backoff: None,
            timeout: None,
            polling: DEFAULT_CANCELLATION_POLLING,
        }
    }
}

/// When a timer runs, in seconds (absent or not positive: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Schedule {
    pub(crate) interval: Option<f64>,
    pub(crate) initial_delay: Option<f64>,
    /// The guest computes the initial delay for each object (Kopf's callable
    /// `initial_delay`), which then replaces `initial_delay`.
    pub(crate) initial_delay_callback: bool,
    pub(crate) idle: Option<f64>,
    /// Ticks aligned to the first one (`interval - elapsed mod interval`).
    pub(crate) sharp: bool,
}

impl HandlerSpec {
    /// The spec of a registration, as the contract carries it, within the host's limits:
    /// a timer runs no more often than `min_timer_interval` (its interval and idle time
    /// are at least that), and no handler is retried
    /// sooner than `min_retry_delay`.
    pub(crate) fn of(reg: &Registration, limits: &Limits) -> HandlerSpec {
        let matcher = |m: &runtime::Matcher| match m {
            runtime::Matcher::Equals(v) => Matcher::Equals(v.clone()),
            runtime::Matcher::Present => Matcher::Present,
            runtime::Matcher::Absent => Matcher::Absent,
        };
        let meta = |filters: &[runtime::MetaFilter]| {
            filters
                .iter()
                .map(|f| (f.key.clone(), matcher(&f.matcher)))
                .collect()
        };
        HandlerSpec {
            id: reg.id.clone(),
            kind: reg.kind,
            selectors: reg.selectors.iter().map(Selector::from_wit).collect(),
            filters: Filters {
                labels: meta(&reg.labels),
                annotations: meta(&reg.annotations),
                field: reg.field.as_ref().map(|f| {
                    f.split('.')
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect()
                }),
                value: reg.value.as_ref().map(matcher),
            },
            has_when: reg.has_when,
            errors: reg.errors,
            backoff_seconds: reg.backoff_seconds,
            timeout_seconds: reg.timeout_seconds,
            retries: reg.retries,
            optional: reg.optional,
            deleted: reg.deleted,
            old: reg.old_value.as_ref().map(matcher),
            new: reg.new_value.as_ref().map(matcher),
            param: reg.param.clone(),
            schedule: Schedule {
                interval: positive(reg.interval_seconds)
                    .map(|interval| interval.max(limits.min_timer_interval.as_secs_f64())),
                initial_delay: positive(reg.initial_delay_seconds),
                // A timer that patches its object changes it: its idle wait is bounded too.
                idle: positive(reg.idle_seconds)
                    .map(|idle| idle.max(limits.min_timer_interval.as_secs_f64())),
                sharp: reg.sharp,
                initial_delay_callback: false,
            },
            cancellation: Cancellation::default(),
            min_retry_delay: limits.min_retry_delay.as_secs_f64(),
            default_backoff: crate::settings::Execution::DEFAULT_BACKOFF,
        }
    }

    /// With the operator's default backoff (`execution.default_backoff`).
    pub(crate) fn with_default_backoff(mut self, seconds: f64) -> HandlerSpec {
        self.default_backoff = seconds;
        self
    }

    /// Selecting every resource (Kopf's `kopf.EVERYTHING`) when `everything`, in place of
    /// the registration's selectors (it has none).
    pub(crate) fn selecting_everything(mut self, everything: bool) -> HandlerSpec {
        if everything {
            self.selectors = vec![Selector::everything()];
        }
        self
    }

    /// Selecting the resources its guest chooses (Kopf's callable selector) when
    /// `chosen`, in place of the registration's selectors (it has none).
    pub(crate) fn choosing_resources(mut self, chosen: bool) -> HandlerSpec {
        if chosen {
            self.selectors = vec![Selector::chosen(Choices::default())];
        }
        self
    }

    /// What its guest answered about which resources it selects, if it chooses them.
    pub(crate) fn choices(&self) -> Option<&Choices> {
        self.selectors.iter().find_map(Selector::choices)
    }

    /// With the further options the guest declared for this timer or daemon, if any.
    pub(crate) fn with_spawning(mut self, options: Option<&SpawningOptions>) -> HandlerSpec {
        if let Some(options) = options {
            self.schedule.initial_delay_callback = options.initial_delay_callback;
            if self.kind == HandlerKind::Daemon {
                self.cancellation = Cancellation {
                    backoff: positive(options.cancellation_backoff_seconds),
                    timeout: options
                        .cancellation_timeout_seconds
                        .filter(|s| s.is_finite() && *s >= 0.0),
                    polling: positive(options.cancellation_polling_seconds)
                        .unwrap_or(DEFAULT_CANCELLATION_POLLING),
                };
            }
        }
        self
    }

    /// Whether this is a changing handler (KOPF.md §1.6): it takes part in change
    /// detection.
    pub(crate) fn is_changing(&self) -> bool {
        matches!(
            self.kind,
            HandlerKind::Create
                | HandlerKind::Update
                | HandlerKind::Delete
                | HandlerKind::Resume
                | HandlerKind::Field
        )
    }
}

/// A registration of a loaded guest.
#[derive(Debug)]
pub(crate) struct Handler {
    pub(crate) guest: Guest,
    pub(crate) spec: HandlerSpec,
}

impl Handler {
    /// Its kind as records and metrics name it: the WIT's, `login` for a login handler (a
    /// startup registration on the wire), `validate` or `mutate` for an admission handler
    /// (an event registration on the wire).
    pub(crate) fn kind_name(&self) -> &'static str {
        let id = &self.spec.id;
        match self.spec.kind {
            HandlerKind::Startup if self.guest.is_login(id) => "login",
            HandlerKind::Event => match self.guest.admissions().iter().find(|d| &d.id == id) {
                Some(declared) if declared.webhook == Webhook::Mutating => "mutate",
                Some(_) => "validate",
                None => "event",
            },
            kind => kind.as_str(),
        }
    }

    /// Handlers are deduplicated per call by guest and id (KOPF.md §1.4).
    pub(crate) fn identity(&self) -> (String, String) {
        (self.guest.name().to_owned(), self.spec.id.clone())
    }

    /// Whether both are the same handler of the same load of its guest: a reload that
    /// replaced the guest makes its handlers others, even where their ids stay.
    pub(crate) fn same_as(&self, other: &Handler) -> bool {
        self.spec.id == other.spec.id && self.guest.same_load(&other.guest)
    }
}
