//! A guest's Events at its pace, never waited for: each guest has a [`Lane`], a bounded
//! queue of its Events in the order it posted them, which its Event budget ([`EventPace`],
//! a token bucket) lets out one at a time. An Event that finds the budget there and
//! nothing waiting goes out at once; one identical to an Event still waiting (same
//! object, type, reason and message) is folded into it, which then goes out once with a
//! count (client-go's EventCorrelator); one that finds `--max-queued-events` others
//! waiting is dropped. Drops and folds are counted in `/metrics`, and drops logged at
//! most once per [`DROPS_LOGGED_EVERY`] while they go on (and once when the queue has
//! emptied), never once per Event.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::{PostedEvent, Seen};
use crate::metrics::Metrics;
use crate::rate::RateLimiter;
use crate::settings::Posting;

/// At most one warning about a guest's dropped Events per this long.
const DROPS_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// Why an Event was dropped (the `reason` of `kapsel_events_dropped_total`): its queue
/// was full.
pub(super) const QUEUE_FULL: &str = "queue_full";

/// A guest's Event budget, handed out with each of its Events by its traffic: the token
/// bucket of its Event pace, how many distinct Events may wait for it, and where its
/// Events are counted. Cheap to clone.
#[derive(Clone)]
pub(crate) struct EventPace {
    pub(crate) guest: Arc<str>,
    pub(crate) limiter: Arc<RateLimiter>,
    /// Distinct Events that may wait for the pace (`--max-queued-events`).
    pub(crate) max_queued: usize,
    pub(crate) metrics: Metrics,
}

impl std::fmt::Debug for EventPace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventPace")
            .field("guest", &self.guest)
            .field("max_queued", &self.max_queued)
            .finish_non_exhaustive()
    }
}

/// An Event in a lane: what it is, how often it was posted, the names it goes out with,
/// whose it is.
pub(super) struct Waiting {
    pub(super) guest: Arc<str>,
    pub(super) event: PostedEvent,
    pub(super) seen: Seen,
    pub(super) posting: Arc<Posting>,
}

/// What became of an Event offered to its lane.
pub(super) enum Offered {
    /// The budget was there and nothing waited: to be posted now.
    Now(Box<Waiting>),
    /// Waits for its turn; the lane has no task pacing it yet: start one.
    QueuedFirst,
    /// Waits for its turn behind others.
    Queued,
    /// Folded into the identical Event waiting.
    Folded,
    /// Dropped: the queue is full.
    Dropped,
}

/// Dropped Events not logged yet, and when drops were last logged: a warning at most
/// once per [`DROPS_LOGGED_EVERY`], saying how many.
#[derive(Debug, Default)]
pub(super) struct Drops {
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl Drops {
    /// One more dropped: how many to log now, if a warning is due.
    pub(super) fn one(&mut self) -> Option<u64> {
        self.unlogged += 1;
        self.due()
    }

    /// How many to log now, if some were not logged and the interval has passed.
    pub(super) fn due(&mut self) -> Option<u64> {
        let recent = self
            .logged_at
            .is_some_and(|logged| logged.elapsed() < DROPS_LOGGED_EVERY);
        if recent { None } else { self.all() }
    }

    /// How many to log now, if some were not logged, whenever they were.
    pub(super) fn all(&mut self) -> Option<u64> {
        if self.unlogged == 0 {
            return None;
        }
        self.logged_at = Some(Instant::now());
        Some(std::mem::take(&mut self.unlogged))
    }
}

/// An Event as its lane holds it: shared with the lane's index of where it is, so that
/// a waiting Event is kept once.
struct Held {
    event: Arc<PostedEvent>,
    seen: Seen,
    posting: Arc<Posting>,
}

/// One guest's Events waiting for its pace.
pub(super) struct Lane {
    pace: EventPace,
    queue: VecDeque<Held>,
    /// Where each waiting Event is, counted from the first ever queued.
    positions: HashMap<Arc<PostedEvent>, u64>,
    /// How many have left the queue: the position of its front.
    left: u64,
    /// Whether a task lets its Events out (the task ends once the queue is empty).
    paced: bool,
    drops: Drops,
}

impl Lane {
    pub(super) fn new(pace: EventPace) -> Lane {
        Lane {
            pace,
            queue: VecDeque::new(),
            positions: HashMap::new(),
            left: 0,
            paced: false,
            drops: Drops::default(),
        }
    }

    /// Takes one Event posted `at`, paced by `pace` (the guest's latest). Never waits.
    pub(super) fn offer(
        &mut self,
        pace: EventPace,
        event: PostedEvent,
        posting: &Arc<Posting>,
        at: DateTime<Utc>,
    ) -> Offered {
        self.pace = pace;
        let offered = self.place(event, posting, at);
        let metrics = &self.pace.metrics;
        let now = matches!(offered, Offered::Now(_));
        metrics.guest_request(&self.pace.guest, "event", !now);
        match offered {
            Offered::Folded => metrics.event_folded(&self.pace.guest),
            Offered::Dropped => {
                metrics.event_dropped(&self.pace.guest, QUEUE_FULL);
                let due = self.drops.one();
                self.log_drops(due);
            }
            _ => {}
        }
        offered
    }

    fn place(&mut self, event: PostedEvent, posting: &Arc<Posting>, at: DateTime<Utc>) -> Offered {
        if let Some(position) = self.positions.get(&event) {
            // Its position is in the queue: positions leave the map as they leave it.
            let index = usize::try_from(position - self.left).unwrap_or(usize::MAX);
            if let Some(waiting) = self.queue.get_mut(index) {
                waiting.seen.again(at);
                return Offered::Folded;
            }
        }
        if self.queue.is_empty()
            && self
                .pace
                .limiter
                .reserve_within(Some(Duration::ZERO))
                .is_ok()
        {
            return Offered::Now(Box::new(Waiting {
                guest: Arc::clone(&self.pace.guest),
                event,
                seen: Seen::once(at),
                posting: Arc::clone(posting),
            }));
        }
        if self.queue.len() >= self.pace.max_queued {
            return Offered::Dropped;
        }
        let position = self.left + self.queue.len() as u64;
        let event = Arc::new(event);
        self.positions.insert(Arc::clone(&event), position);
        self.queue.push_back(Held {
            event,
            seen: Seen::once(at),
            posting: Arc::clone(posting),
        });
        if self.paced {
            Offered::Queued
        } else {
            self.paced = true;
            Offered::QueuedFirst
        }
    }

    /// The bucket the next waiting Event takes its turn from; `None` once nothing waits,
    /// and the lane's task then ends (drops not yet logged are logged).
    pub(super) fn next_turn(&mut self) -> Option<Arc<RateLimiter>> {
        if self.queue.is_empty() {
            self.paced = false;
            let due = self.drops.all();
            self.log_drops(due);
            return None;
        }
        Some(Arc::clone(&self.pace.limiter))
    }

    /// The first waiting Event, whose turn came.
    pub(super) fn pop(&mut self) -> Option<Waiting> {
        let held = self.queue.pop_front()?;
        self.positions.remove(&*held.event);
        self.left += 1;
        let due = self.drops.due();
        self.log_drops(due);
        Some(self.release(held))
    }

    /// Everything waiting, to go out at once (the operator stops).
    pub(super) fn drain(&mut self) -> Vec<Waiting> {
        self.positions.clear();
        self.left += self.queue.len() as u64;
        let due = self.drops.all();
        self.log_drops(due);
        let held: Vec<Held> = self.queue.drain(..).collect();
        held.into_iter().map(|held| self.release(held)).collect()
    }

    /// A held Event as it leaves, once its position is forgotten (its only holder then).
    fn release(&self, held: Held) -> Waiting {
        Waiting {
            guest: Arc::clone(&self.pace.guest),
            event: Arc::try_unwrap(held.event).unwrap_or_else(|shared| (*shared).clone()),
            seen: held.seen,
            posting: held.posting,
        }
    }

    /// Logs `dropped` Events, if any.
    fn log_drops(&self, dropped: Option<u64>) {
        let Some(dropped) = dropped else { return };
        let guest = &self.pace.guest;
        tracing::warn!(
            guest = %guest,
            "Guest '{guest}' posts Events faster than its Event pace: {dropped} Event(s) \
             not posted, {queued} others waiting for their turn \
             (--guest-event-rate, --guest-event-burst, --max-queued-events).",
            queued = self.queue.len(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{event, pod_ref};
    use super::*;

    fn pace(metrics: &Metrics, rate: f64, burst: u32, max_queued: usize) -> EventPace {
        EventPace {
            guest: Arc::from("g"),
            limiter: Arc::new(RateLimiter::new(rate, burst)),
            max_queued,
            metrics: metrics.clone(),
        }
    }

    /// Drops are logged at once, then at most once per interval, then all that is left.
    #[test]
    fn drops_are_logged_once_per_interval() {
        let mut drops = Drops::default();
        assert_eq!(drops.due(), None, "none dropped");
        assert_eq!(drops.one(), Some(1), "the first at once");
        assert_eq!(drops.one(), None);
        assert_eq!(drops.one(), None);
        assert_eq!(drops.due(), None, "within the interval");
        assert_eq!(drops.all(), Some(2), "what is left, when asked");
        assert_eq!(drops.all(), None);
        drops.logged_at = Instant::now().checked_sub(DROPS_LOGGED_EVERY);
        assert_eq!(drops.one(), Some(1), "the interval has passed");
    }

    fn kind(offered: &Offered) -> &'static str {
        match offered {
            Offered::Now(_) => "now",
            Offered::QueuedFirst => "first",
            Offered::Queued => "queued",
            Offered::Folded => "folded",
            Offered::Dropped => "dropped",
        }
    }

    /// The burst goes at once; then identical Events fold into the one waiting, others
    /// queue up to the bound, and the rest are dropped and counted.
    #[test]
    fn a_burst_then_folds_queues_and_drops() {
        let metrics = Metrics::default();
        // A pace this slow never refills during the test.
        let pace = pace(&metrics, 0.0001, 2, 2);
        let mut lane = Lane::new(pace.clone());
        let posting = Arc::new(Posting::default());
        let offer = |lane: &mut Lane, reason: &str, message: &str| {
            let posted = event(pod_ref(), reason, message);
            kind(&lane.offer(pace.clone(), posted, &posting, Utc::now()))
        };
        let kinds: Vec<_> = [
            ("Same", "same"),
            ("Same", "same"),
            ("Same", "same"),
            ("Same", "same"),
            ("Same", "other message"),
            ("Same", "same"),
            ("Other", "same"),
            ("Same", "other message"),
        ]
        .iter()
        .map(|(reason, message)| offer(&mut lane, reason, message))
        .collect();
        assert_eq!(
            kinds,
            [
                "now", "now", "first", "folded", "queued", "folded", "dropped", "folded"
            ]
        );
        let first = lane.pop().expect("the first waiting");
        assert_eq!(first.event.message, "same");
        assert_eq!(first.seen.count, 3);
        assert!(first.seen.first <= first.seen.last);
        // Once it left, the same Event queues anew (behind the other).
        assert_eq!(offer(&mut lane, "Same", "same"), "queued");
        let rest: Vec<_> = lane.drain().into_iter().map(|w| w.seen.count).collect();
        assert_eq!(rest, [2, 1]);
        assert!(lane.next_turn().is_none(), "nothing waits");
        assert_eq!(
            offer(&mut lane, "Same", "same"),
            "first",
            "a new task paces it"
        );
        let text = metrics.render();
        for line in [
            "kapsel_guest_api_requests_total{guest=\"g\",verb=\"event\"} 10\n",
            "kapsel_guest_api_throttled_total{guest=\"g\"} 8\n",
            "kapsel_events_aggregated_total{guest=\"g\"} 3\n",
            "kapsel_events_dropped_total{guest=\"g\",reason=\"queue_full\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
