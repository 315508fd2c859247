//! [`GuestTraffic`]: each guest's Kubernetes requests and Events at its own paces (per
//! guest, one [`RateLimiter`] for its requests and one for its Events, each shared by all
//! its calls), counted per guest and verb for `/metrics`. The operator's own requests
//! (watches, patches, peering) never go through it, so a guest flooding the API server
//! cannot hold them up.
//!
//! A request waits for its turn inside the call. An Event never does: the guest's
//! [`EventPace`] goes with it to the poster, which posts it in the background when its
//! turn comes (as Kopf posts Events without holding the handler), folds identical ones
//! waiting, and drops what finds [`Limits::max_queued_events`] waiting; so a handler
//! posting an Event about each of a thousand objects is not slowed to the pace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::cluster::events::EventPace;
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::rate::RateLimiter;
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

    /// The Event budget of `guest`, which its Events take their turns from (a guest's
    /// Events and log lines posted as Events alike): its Event pace, how many may wait,
    /// and where they are counted.
    pub(crate) fn event_pace(&self, guest: &str) -> EventPace {
        let (limiter, _, _) = self.limiter(guest, Lane::Events);
        let max_queued = self.paces().max_queued_events;
        EventPace {
            guest: Arc::from(guest),
            limiter,
            max_queued: usize::try_from(max_queued).unwrap_or(usize::MAX),
            metrics: self.metrics.clone(),
        }
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

    /// A guest's Events have a budget of their own, shared by all its calls: the
    /// requests' pace spent leaves the Events' whole, and each guest has its own.
    #[tokio::test]
    async fn events_have_a_budget_of_their_own() {
        let limits = Limits {
            guest_api_rate: 1.0,
            guest_api_burst: 2,
            guest_event_rate: 0.001,
            guest_event_burst: 2,
            max_queued_events: 3,
            ..Limits::default()
        };
        let traffic = GuestTraffic::new(&limits, Metrics::default());
        let soon = Instant::now() + Duration::from_millis(20);
        for _ in 0..2 {
            traffic.admit("a", "get", soon).await.expect("the burst");
        }
        traffic.admit("a", "get", soon).await.expect_err("paced");
        let pace = traffic.event_pace("a");
        assert_eq!((&*pace.guest, pace.max_queued), ("a", 3));
        let zero = Some(Duration::ZERO);
        for _ in 0..2 {
            assert_eq!(pace.limiter.reserve_within(zero), Ok(Duration::ZERO));
        }
        let again = traffic.event_pace("a");
        assert!(again.limiter.reserve_within(zero).is_err(), "one bucket");
        let other = traffic.event_pace("b");
        assert!(other.limiter.reserve_within(zero).is_ok(), "a bucket each");
    }
}
