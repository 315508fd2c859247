//! [`Limits`]: every bound the host puts on its guests, in one place — time and memory of
//! a call, the call slots and how guests and handlers share them, the size of everything
//! a guest hands the host, the pace of its Kubernetes requests, and the shortest delays
//! it may ask for. The runtime, the reactor and the services all read this one struct;
//! SECURITY.md lists each field with its default and its `kapsel run` flag.

use std::time::Duration;

/// The call slots reserved for activities (probes, startup and cleanup handlers) and for
/// calling `describe` at load, at least: few run at once, and a busy operator must still
/// answer its liveness probe. (More when the largest memory cap needs more.)
const ACTIVITY_SLOTS: u32 = 4;

/// `percent` of `size` slots, at least one.
pub(crate) fn share(size: u32, percent: u32) -> u32 {
    (u64::from(size) * u64::from(percent.min(100)) / 100)
        .try_into()
        .unwrap_or(size)
        .max(1)
}

/// Why [`Limits::check`] refused a set of limits: the setting that is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// A duration that must be positive is zero (the call deadline, the maximum call
    /// deadline, starved-after).
    #[error("{0} must be positive")]
    ZeroDuration(&'static str),
    /// The default call deadline (or admission deadline) is above the maximum a handler
    /// may declare.
    #[error("the call deadline of {deadline_ms} ms is above the maximum of {maximum_ms} ms")]
    DeadlineAboveMaximum {
        /// The default call deadline (`--call-deadline-ms`).
        deadline_ms: u128,
        /// The maximum call deadline (`--max-call-deadline-ms`).
        maximum_ms: u128,
    },
    /// The default memory cap is zero or above the maximum.
    #[error("the call memory cap {mib} MiB must be between 1 and the maximum {maximum_mib} MiB")]
    MemoryCapOutOfRange {
        /// The default memory cap (`--call-memory-mib`).
        mib: u32,
        /// The maximum memory cap (`--max-call-memory-mib`).
        maximum_mib: u32,
    },
    /// The maximum memory cap is more than a 32-bit guest can address.
    #[error("the maximum call memory cap {0} MiB is above the 4096 MiB a 32-bit guest can address")]
    MaximumMemoryCapTooLarge(u32),
    /// A slot count or the guest threads are zero.
    #[error("the call slots, background slots, admission slots and guest threads must be positive")]
    NoSlots,
    /// The pools hold more than 10,000 slots in all.
    #[error("more than 10000 call slots in all")]
    TooManySlots,
    /// A share of the call slots (the guest share, the handler share) is not a percentage.
    #[error("the {0} must be between 1 and 100 percent")]
    ShareOutOfRange(&'static str),
    /// A guest's request or Event rate is not a positive number.
    #[error("the guest API and Event rates must be positive numbers")]
    RatesNotPositive,
    /// A burst, the Events per call or the queued Events are zero.
    #[error(
        "the guest API and Event bursts, the Events per call and the queued Events must be positive"
    )]
    EventBoundsNotPositive,
    /// The self-trigger limit is zero.
    #[error("the self-trigger limit must be positive")]
    SelfTriggerLimitZero,
}

/// The bounds on guests. `Limits::default()` is what `kapsel run` uses without flags.
///
/// Every field has a sane default; [`Limits::check`] refuses combinations that cannot
/// work (a zero slot count, a default above its maximum).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// The wall-clock budget of a call whose handler declares none (`--call-deadline-ms`).
    pub call_deadline: Duration,
    /// The longest budget a handler may declare (`deadline_ms`); a guest asking for more
    /// is refused at load (`--max-call-deadline-ms`).
    pub max_call_deadline: Duration,
    /// The memory cap of a call whose handler declares none (`--call-memory-mib`).
    pub call_memory_mib: u32,
    /// The largest memory cap a handler may declare (`memory_mib`); a guest asking for
    /// more is refused at load (`--max-call-memory-mib`).
    pub max_call_memory_mib: u32,
    /// Slots for calls of event, changing, index and `when` handlers (`--call-slots`).
    /// A slot holds one call of up to [`Limits::call_memory_mib`]; a call that declares
    /// more memory takes as many slots as its cap needs, so the sum of the declared
    /// memory caps of running calls never exceeds slots × the default cap.
    pub call_slots: u32,
    /// The wall-clock budget of an admission call whose handler declares none
    /// (`--admission-deadline-ms`): shorter than other calls', since a write of the cluster
    /// waits for it, and below the webhooks' `timeoutSeconds`.
    pub admission_deadline: Duration,
    /// Slots for admission calls, apart from the others so that watch handling never
    /// starves a write waiting for its review (`--admission-slots`).
    pub admission_slots: u32,
    /// Slots for timers and daemons, apart from the others so that long-running calls
    /// never starve short ones; a daemon holds its slot while it runs
    /// (`--background-slots`).
    pub background_slots: u32,
    /// The share of each pool's slots one guest may hold, in percent (`--guest-share`).
    pub guest_share_percent: u32,
    /// The share of each pool's slots one handler may hold, in percent (`--handler-share`).
    pub handler_share_percent: u32,
    /// Calls are starved when some wait for a handler slot and none was handed out for
    /// this long; liveness then fails (`--starved-after-s`).
    pub starved_after: Duration,
    /// How many guest calls compute at once; the others wait for their turn (given in
    /// 10 ms slices, short calls first). Fewer than the executor's threads keeps a thread
    /// for the host's own work however many guests spin (`--guest-threads`; default: the
    /// CPUs less one, at least one).
    pub guest_threads: u32,
    /// The longest log line a guest may write (`--max-log-line-bytes`); a handler's error
    /// message is cut to it.
    pub max_log_line_bytes: usize,
    /// What a guest may log in one call, in total (`--max-log-bytes-per-call`).
    pub max_log_bytes_per_call: usize,
    /// Events a guest may post in one call (`--max-events-per-call`).
    pub max_events_per_call: u32,
    /// The size of one Event a guest posts: reason, message and object reference
    /// together (`--max-event-bytes`). Messages are then cut to Kopf's 1024 characters.
    pub max_event_bytes: usize,
    /// The size of the memo a handler leaves for the object (`--max-memo-bytes`).
    pub max_memo_bytes: usize,
    /// The size of what an index handler returns for one object, keys and values
    /// together (`--max-index-bytes`).
    pub max_index_bytes: usize,
    /// The size of a handler's result, stored in the object's status
    /// (`--max-result-bytes`).
    pub max_result_bytes: usize,
    /// The size of a handler's patch of its object, and of the body of a Kubernetes
    /// request a guest makes (`--max-patch-bytes`).
    pub max_patch_bytes: usize,
    /// The size of a list answer handed to a guest (`--max-list-bytes`): the host reads
    /// the list page by page and refuses one that grows past this.
    pub max_list_bytes: usize,
    /// The random bytes one WASI `get-random-bytes` call may ask for
    /// (`--max-random-bytes`).
    pub max_random_bytes: u64,
    /// The sustained pace of one guest's Kubernetes requests, per second
    /// (`--guest-api-rate`).
    pub guest_api_rate: f64,
    /// How many requests a guest may make at once before the pace applies
    /// (`--guest-api-burst`).
    pub guest_api_burst: u32,
    /// The sustained pace of one guest's Events, per second (`--guest-event-rate`): a
    /// pace of their own, since an Event is posted for every object in bulk (Kopf posts
    /// one per handler call, unpaced).
    pub guest_event_rate: f64,
    /// How many Events a guest may post at once before their pace applies
    /// (`--guest-event-burst`).
    pub guest_event_burst: u32,
    /// How many of a guest's Events may wait for its pace: Events are posted in the
    /// background, so a call never waits for them; identical ones waiting are folded
    /// into one with a count, and past this many waiting, others are dropped (counted
    /// in `kapsel_events_dropped_total`) (`--max-queued-events`).
    pub max_queued_events: u32,
    /// The shortest interval a timer may run at; shorter ones run at this
    /// (`--min-timer-interval-ms`).
    pub min_timer_interval: Duration,
    /// The shortest delay before a failed handler is retried; shorter ones wait this
    /// long (`--min-retry-delay-ms`).
    pub min_retry_delay: Duration,
    /// After this many patches in a row, each caused by the object's own previous patch
    /// within half of [`Limits::min_retry_delay`], the object's handling is backed off
    /// and reported (`--self-trigger-limit`).
    pub self_trigger_limit: u32,
    /// The sub-handlers one handler call may declare, at every level together
    /// (`--max-subhandlers`): each keeps a progress record on the object.
    pub max_subhandlers: u32,
    /// The compiled-guest cache (`--cache-dir`) keeps the entries of the guests served
    /// and, of the others, the most recently used while they add up to at most this
    /// many MiB; the rest is removed at start and after each reload
    /// (`--max-cache-mib`; 0: only the guests served).
    pub max_cache_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_deadline: Duration::from_secs(5),
            max_call_deadline: Duration::from_secs(60),
            call_memory_mib: 64,
            max_call_memory_mib: 512,
            call_slots: 16,
            background_slots: 32,
            admission_deadline: Duration::from_secs(2),
            admission_slots: 16,
            guest_share_percent: 75,
            handler_share_percent: 50,
            starved_after: Duration::from_secs(120),
            guest_threads: std::thread::available_parallelism()
                .map_or(1, |cpus| u32::try_from(cpus.get()).unwrap_or(u32::MAX))
                .saturating_sub(1)
                .max(1),
            max_log_line_bytes: 16 << 10,
            max_log_bytes_per_call: 256 << 10,
            max_events_per_call: 100,
            max_event_bytes: 64 << 10,
            max_memo_bytes: 256 << 10,
            max_index_bytes: 256 << 10,
            max_result_bytes: 256 << 10,
            max_patch_bytes: 1 << 20,
            max_list_bytes: 8 << 20,
            max_random_bytes: 64 << 10,
            guest_api_rate: 20.0,
            guest_api_burst: 40,
            guest_event_rate: 100.0,
            guest_event_burst: 200,
            max_queued_events: 1000,
            min_timer_interval: Duration::from_secs(1),
            min_retry_delay: Duration::from_secs(1),
            self_trigger_limit: 10,
            max_subhandlers: 100,
            max_cache_mib: 64,
        }
    }
}

impl Limits {
    /// Refuses limits the host cannot work with, saying which and why.
    ///
    /// # Errors
    /// The setting that is out of range.
    pub fn check(&self) -> Result<(), LimitsError> {
        let positive_durations = [
            ("the call deadline", self.call_deadline),
            ("the maximum call deadline", self.max_call_deadline),
            ("the admission deadline", self.admission_deadline),
            ("starved-after", self.starved_after),
        ];
        for (name, value) in positive_durations {
            if value.is_zero() {
                return Err(LimitsError::ZeroDuration(name));
            }
        }
        if self.call_deadline > self.max_call_deadline {
            return Err(LimitsError::DeadlineAboveMaximum {
                deadline_ms: self.call_deadline.as_millis(),
                maximum_ms: self.max_call_deadline.as_millis(),
            });
        }
        if self.admission_deadline > self.max_call_deadline {
            return Err(LimitsError::DeadlineAboveMaximum {
                deadline_ms: self.admission_deadline.as_millis(),
                maximum_ms: self.max_call_deadline.as_millis(),
            });
        }
        if self.call_memory_mib == 0 || self.call_memory_mib > self.max_call_memory_mib {
            return Err(LimitsError::MemoryCapOutOfRange {
                mib: self.call_memory_mib,
                maximum_mib: self.max_call_memory_mib,
            });
        }
        if self.max_call_memory_mib > 4096 {
            return Err(LimitsError::MaximumMemoryCapTooLarge(
                self.max_call_memory_mib,
            ));
        }
        if self.call_slots == 0
            || self.background_slots == 0
            || self.admission_slots == 0
            || self.guest_threads == 0
        {
            return Err(LimitsError::NoSlots);
        }
        if self.total_slots() > 10_000 {
            return Err(LimitsError::TooManySlots);
        }
        for (name, percent) in [
            ("guest share", self.guest_share_percent),
            ("handler share", self.handler_share_percent),
        ] {
            if !(1..=100).contains(&percent) {
                return Err(LimitsError::ShareOutOfRange(name));
            }
        }
        let positive = |rate: f64| rate.is_finite() && rate > 0.0;
        if !positive(self.guest_api_rate) || !positive(self.guest_event_rate) {
            return Err(LimitsError::RatesNotPositive);
        }
        if self.guest_api_burst == 0
            || self.guest_event_burst == 0
            || self.max_events_per_call == 0
            || self.max_queued_events == 0
        {
            return Err(LimitsError::EventBoundsNotPositive);
        }
        if self.self_trigger_limit == 0 {
            return Err(LimitsError::SelfTriggerLimitZero);
        }
        Ok(())
    }

    /// The slots of the activities' pool: enough for a call of the largest memory cap.
    pub(crate) fn activity_slots(&self) -> u32 {
        ACTIVITY_SLOTS.max(self.slots_for(self.max_call_memory_mib))
    }

    /// Every slot of every pool: the size of the instance pool.
    pub(crate) fn total_slots(&self) -> u32 {
        self.call_slots
            .saturating_add(self.background_slots)
            .saturating_add(self.admission_slots)
            .saturating_add(self.activity_slots())
    }

    /// The most memory (MiB) the guest calls running at once may declare in all: every
    /// slot holds at most the default cap.
    pub(crate) fn memory_budget_mib(&self) -> u64 {
        u64::from(self.total_slots()) * u64::from(self.call_memory_mib)
    }

    /// The largest memory cap a handler may declare for a pool of `slots`: its calls must
    /// fit in one handler's share of the pool (else the slots would not bound the sum of
    /// the caps), and never above [`Limits::max_call_memory_mib`].
    pub(crate) fn largest_memory_mib(&self, slots: u32) -> u32 {
        let share = share(slots, self.handler_share_percent);
        self.max_call_memory_mib
            .min(share.saturating_mul(self.call_memory_mib))
    }

    /// The slots a call with this memory cap takes: its cap in default caps, rounded up.
    pub(crate) fn slots_for(&self, memory_mib: u32) -> u32 {
        memory_mib.div_ceil(self.call_memory_mib.max(1)).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_hold_and_bad_values_are_named() {
        assert_eq!(Limits::default().check(), Ok(()));
        let bad = |change: fn(&mut Limits)| {
            let mut limits = Limits::default();
            change(&mut limits);
            limits.check().expect_err("refused").to_string()
        };
        assert_eq!(
            bad(|l| l.call_deadline = Duration::from_secs(61)),
            "the call deadline of 61000 ms is above the maximum of 60000 ms"
        );
        assert!(bad(|l| l.call_memory_mib = 0).contains("memory cap"));
        assert!(bad(|l| l.max_call_memory_mib = 8192).contains("32-bit"));
        assert!(bad(|l| l.call_slots = 0).contains("slots"));
        assert!(bad(|l| l.handler_share_percent = 0).contains("handler share"));
        assert!(bad(|l| l.guest_api_rate = f64::NAN).contains("rate"));
        assert!(bad(|l| l.guest_event_rate = 0.0).contains("rate"));
        assert!(bad(|l| l.guest_event_burst = 0).contains("burst"));
    }

    #[test]
    fn memory_counts_in_slots() {
        let mut limits = Limits::default();
        assert_eq!(limits.largest_memory_mib(limits.call_slots), 512);
        limits.call_memory_mib = 32;
        assert_eq!(limits.largest_memory_mib(limits.call_slots), 256);
        let limits = Limits::default();
        assert_eq!(limits.slots_for(1), 1);
        assert_eq!(limits.slots_for(64), 1);
        assert_eq!(limits.slots_for(65), 2);
        assert_eq!(limits.slots_for(512), 8);
        assert_eq!(limits.activity_slots(), 8);
        assert_eq!(limits.memory_budget_mib(), (16 + 32 + 16 + 8) * 64);
    }
}
