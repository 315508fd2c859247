//! [`GuestTraffic`]: each guest's Kubernetes requests and Events at its own paces (per
//! guest, one [`RateLimiter`] for its requests and one for its Events, each shared by all
//! its calls), counted per guest and verb for `/metrics`. The operator's own requests
//! (watches, patches, peering) never go through it, so a guest flooding the API server
//! cannot hold them up.
//!
//! A request waits for its turn inside the call. An Event does not: it is given its
//! turn and posted in the background when the turn comes (as Kopf posts Events without
//! holding the handler), so a handler posting an Event about each of a thousand objects
//! is not slowed to the pace. Only when [`Limits::max_queued_events`] of the guest's
//! Events are already waiting does posting one wait, and fail the call at its deadline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::rate::{RateLimiter, TooLate};
use crate::runtime::KubeError;

/// The guests' request rates and counts; shared by every call (cheap to clone: all
/// clones share the paces).
#[derive(Clone)]
pub(crate) struct GuestTraffic {
    paces: Arc<Mutex<Paces>>,
    metrics: Metrics,
}

/// The paces every guest gets (rate, burst) for its requests and its Events, and each
/// guest's limiters.
struct Paces {
    requests: (f64, u32),
    events: (f64, u32),
    max_queued_events: u32,
    /// The size of a list answer handed to a guest.
    max_list_bytes: usize,
    limiters: HashMap<(String, Lane), Arc<RateLimiter>>,
}

/// What a limiter paces: a guest's requests and its Events do not wait for each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lane {
    Requests,
    Events,
}

impl std::fmt::Debug for GuestTraffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestTraffic").finish_non_exhaustive()
    }
}

impl GuestTraffic {
    /// Each guest's requests at `limits.guest_api_rate` per second,
    /// `limits.guest_api_burst` at once, and its Events at `limits.guest_event_rate` and
    /// `limits.guest_event_burst`.
    pub(crate) fn new(limits: &Limits, metrics: Metrics) -> GuestTraffic {
        GuestTraffic {
            paces: Arc::new(Mutex::new(Paces {
                requests: (limits.guest_api_rate, limits.guest_api_burst),
                events: (limits.guest_event_rate, limits.guest_event_burst),
                max_queued_events: limits.max_queued_events,
                max_list_bytes: limits.max_list_bytes,
                limiters: HashMap::new(),
            })),
            metrics,
        }
    }

    /// From now on, every clone paces guests by these limits (the operator's, once it
    /// runs; every guest starts afresh).
    pub(crate) fn set_pace(&self, limits: &Limits) {
        let mut paces = self.paces();
        paces.requests = (limits.guest_api_rate, limits.guest_api_burst);
        paces.events = (limits.guest_event_rate, limits.guest_event_burst);
        paces.max_queued_events = limits.max_queued_events;
        paces.max_list_bytes = limits.max_list_bytes;
        paces.limiters.clear();
    }

    /// The size of a list answer a guest may be handed (`Limits::max_list_bytes`).
    pub(crate) fn max_list_bytes(&self) -> usize {
        self.paces().max_list_bytes
    }

    fn paces(&self) -> std::sync::MutexGuard<'_, Paces> {
        // Each change is one assignment or insertion: a panic cannot leave it torn.
        self.paces.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn limiter(&self, guest: &str, lane: Lane) -> (Arc<RateLimiter>, f64, u32) {
        let mut paces = self.paces();
        let (rate, burst) = match lane {
            Lane::Requests => paces.requests,
            Lane::Events => paces.events,
        };
        let limiter = Arc::clone(
            paces
                .limiters
                .entry((guest.to_owned(), lane))
                .or_insert_with(|| Arc::new(RateLimiter::new(rate, burst))),
        );
        (limiter, rate, burst)
    }

    /// Lets one request (`verb`) of `guest` go, at the guest's pace: waits for its
    /// turn, or answers 429 at once when the turn would come after `until` (the end of
    /// the call's budget).
    pub(crate) async fn admit(
        &self,
        guest: &str,
        verb: &str,
        until: Instant,
    ) -> Result<(), KubeError> {
        let (limiter, rate, burst) = self.limiter(guest, Lane::Requests);
        match limiter.take(Some(until)).await {
            Ok(waited) => {
                self.metrics.guest_request(guest, verb, waited);
                Ok(())
            }
            Err(too_late) => {
                self.metrics.guest_request(guest, verb, true);
                Err(too_many_requests(format!(
                    "guest '{guest}' is over its API rate ({} requests per second, {} at \
                         once): its turn would come in {:.1} s, after the call's deadline \
                         (--guest-api-rate, --guest-api-burst)",
                    rate,
                    burst,
                    too_late.0.as_secs_f64()
                )))
            }
        }
    }

    /// Gives one Event of `guest` its turn at the guest's Event pace: how long until it
    /// may be posted. Waits only while the guest's queue of waiting Events is full, and
    /// answers 429 when it would still be full at `until` (the end of the call's budget).
    pub(crate) async fn admit_event(
        &self,
        guest: &str,
        until: Instant,
    ) -> Result<Duration, KubeError> {
        let (limiter, rate, burst) = self.limiter(guest, Lane::Events);
        let queued = self.paces().max_queued_events;
        // The queue is full when the next turn is more than this far ahead.
        let horizon = Duration::from_secs_f64(f64::from(queued) / rate);
        loop {
            match limiter.reserve_within(Some(horizon)) {
                Ok(wait) => {
                    self.metrics.guest_request(guest, "event", !wait.is_zero());
                    return Ok(wait);
                }
                Err(TooLate(wait)) => {
                    let room_in = wait.saturating_sub(horizon);
                    if Instant::now() + room_in > until {
                        self.metrics.guest_request(guest, "event", true);
                        return Err(too_many_requests(format!(
                            "guest '{guest}' has {queued} Events waiting for its pace \
                                 ({rate} per second, {burst} at once) and no room for \
                                 another before the call's deadline (--max-queued-events, \
                                 --guest-event-rate, --guest-event-burst)",
                        )));
                    }
                    tokio::time::sleep(room_in).await;
                }
            }
        }
    }

    /// Gives an Event made of one of `guest`'s log lines (`posting.loggers`) its turn at
    /// the guest's Event pace, without waiting: `None` when the guest's queue of waiting
    /// Events is full, and the line is then not posted (a log line never holds up the
    /// call, and Kopf drops what it fails to post of them too).
    pub(crate) fn admit_logged_event(&self, guest: &str) -> Option<Duration> {
        let (limiter, rate, _) = self.limiter(guest, Lane::Events);
        let queued = self.paces().max_queued_events;
        let horizon = Duration::from_secs_f64(f64::from(queued) / rate);
        let turn = limiter.reserve_within(Some(horizon)).ok();
        let waits = turn.is_none_or(|wait| !wait.is_zero());
        self.metrics.guest_request(guest, "event", waits);
        turn
    }
}

/// A guest's request or Event refused for its pace.
fn too_many_requests(message: String) -> KubeError {
    KubeError {
        code: 429,
        reason: "TooManyRequests".to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn guests_have_a_pace_each_and_are_counted() {
        let limits = Limits {
            guest_api_rate: 1.0,
            guest_api_burst: 2,
            ..Limits::default()
        };
        let metrics = Metrics::default();
        let traffic = GuestTraffic::new(&Limits::default(), metrics.clone());
        traffic.clone().set_pace(&limits);
        let soon = Instant::now() + Duration::from_millis(100);
        for _ in 0..2 {
            traffic.admit("a", "get", soon).await.expect("the burst");
        }
        let refused = traffic.admit("a", "get", soon).await.expect_err("paced");
        assert_eq!(
            (refused.code, refused.reason.as_str()),
            (429, "TooManyRequests")
        );
        assert!(refused.message.contains("guest 'a'"), "{}", refused.message);
        traffic
            .admit("b", "event", soon)
            .await
            .expect("another guest's own pace");
        let text = metrics.render();
        assert!(text.contains("kapsel_guest_api_requests_total{guest=\"a\",verb=\"get\"} 3\n"));
        assert!(text.contains("kapsel_guest_api_throttled_total{guest=\"a\"} 1\n"));
        assert!(text.contains("kapsel_guest_api_requests_total{guest=\"b\",verb=\"event\"} 1\n"));
    }

    /// Events made of log lines (`posting.loggers`) take turns at the guest's Event pace,
    /// and are dropped, at once, when its queue is full.
    #[tokio::test]
    async fn logged_events_take_turns_or_are_dropped() {
        let limits = Limits {
            guest_event_rate: 2.0,
            guest_event_burst: 2,
            max_queued_events: 3,
            ..Limits::default()
        };
        let metrics = Metrics::default();
        let traffic = GuestTraffic::new(&limits, metrics.clone());
        for _ in 0..2 {
            assert_eq!(traffic.admit_logged_event("a"), Some(Duration::ZERO));
        }
        for _ in 0..3 {
            assert!(
                traffic
                    .admit_logged_event("a")
                    .is_some_and(|t| t > Duration::ZERO)
            );
        }
        assert_eq!(traffic.admit_logged_event("a"), None, "the queue is full");
        assert_eq!(traffic.admit_logged_event("b"), Some(Duration::ZERO));
        let text = metrics.render();
        assert!(text.contains("kapsel_guest_api_requests_total{guest=\"a\",verb=\"event\"} 6\n"));
        assert!(text.contains("kapsel_guest_api_throttled_total{guest=\"a\"} 4\n"));
    }

    /// Events have a pace of their own, are given turns ahead instead of waiting, and
    /// wait only for room in a full queue, failing at the deadline.
    #[tokio::test]
    async fn events_take_turns_ahead_until_the_queue_is_full() {
        let limits = Limits {
            guest_api_rate: 1.0,
            guest_api_burst: 2,
            guest_event_rate: 2.0,
            guest_event_burst: 2,
            max_queued_events: 3,
            ..Limits::default()
        };
        let metrics = Metrics::default();
        let traffic = GuestTraffic::new(&limits, metrics.clone());
        let soon = Instant::now() + Duration::from_millis(20);
        for _ in 0..2 {
            traffic.admit("a", "get", soon).await.expect("the burst");
        }
        traffic.admit("a", "get", soon).await.expect_err("paced");
        // The requests' pace is spent; the Events' is not.
        for _ in 0..2 {
            let turn = traffic.admit_event("a", soon).await.expect("the burst");
            assert_eq!(turn, Duration::ZERO);
        }
        let asked = Instant::now();
        let mut last = Duration::ZERO;
        for _ in 0..3 {
            // Given ahead (a turn to come), not waited for (which would leave none).
            let turn = traffic.admit_event("a", soon).await.expect("queued");
            assert!(turn > last, "later turns for later Events: {turn:?}");
            last = turn;
        }
        assert!(last <= Duration::from_millis(1500), "{last:?}");
        // Full: room comes as the first queued one's turn comes.
        let refused = traffic.admit_event("a", soon).await.expect_err("full");
        assert_eq!(refused.code, 429);
        assert!(
            refused.message.contains("--max-queued-events"),
            "{}",
            refused.message
        );
        let later = Instant::now() + Duration::from_secs(2);
        let turn = traffic.admit_event("a", later).await.expect("room made");
        assert!(
            asked.elapsed() >= Duration::from_millis(250),
            "waited for room"
        );
        assert!(turn <= Duration::from_millis(1500), "{turn:?}");
        let text = metrics.render();
        assert!(
            text.contains("kapsel_guest_api_requests_total{guest=\"a\",verb=\"event\"} 7\n"),
            "{text}"
        );
    }
}
