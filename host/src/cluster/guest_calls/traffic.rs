//! [`GuestTraffic`]: each guest's Kubernetes requests and Events at its own pace (one
//! [`RateLimiter`] per guest, shared by all its calls), counted per guest and verb for
//! `/metrics`. The operator's own requests (watches, patches, peering) never go through
//! it, so a guest flooding the API server cannot hold them up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

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

/// The pace every guest gets, and each guest's limiter.
struct Paces {
    rate: f64,
    burst: u32,
    limiters: HashMap<String, Arc<RateLimiter>>,
}

impl std::fmt::Debug for GuestTraffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestTraffic").finish_non_exhaustive()
    }
}

impl GuestTraffic {
    /// Each guest at `limits.guest_api_rate` per second, `limits.guest_api_burst` at once.
    pub(crate) fn new(limits: &Limits, metrics: Metrics) -> GuestTraffic {
        GuestTraffic {
            paces: Arc::new(Mutex::new(Paces {
                rate: limits.guest_api_rate,
                burst: limits.guest_api_burst,
                limiters: HashMap::new(),
            })),
            metrics,
        }
    }

    /// From now on, every clone paces guests by these limits (the operator's, once it
    /// runs; every guest starts afresh).
    pub(crate) fn set_pace(&self, limits: &Limits) {
        let mut paces = self.paces();
        paces.rate = limits.guest_api_rate;
        paces.burst = limits.guest_api_burst;
        paces.limiters.clear();
    }

    fn paces(&self) -> std::sync::MutexGuard<'_, Paces> {
        // Each change is one assignment or insertion: a panic cannot leave it torn.
        self.paces.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn limiter(&self, guest: &str) -> (Arc<RateLimiter>, f64, u32) {
        let mut paces = self.paces();
        let (rate, burst) = (paces.rate, paces.burst);
        let limiter = Arc::clone(
            paces
                .limiters
                .entry(guest.to_owned())
                .or_insert_with(|| Arc::new(RateLimiter::new(rate, burst))),
        );
        (limiter, rate, burst)
    }

    /// Lets one request (`verb`; `event` for an Event) of `guest` go, at the guest's
    /// pace: waits for its turn, or answers 429 at once when the turn would come after
    /// `until` (the end of the call's budget).
    pub(crate) async fn admit(
        &self,
        guest: &str,
        verb: &str,
        until: Instant,
    ) -> Result<(), KubeError> {
        let (limiter, rate, burst) = self.limiter(guest);
        match limiter.take(Some(until)).await {
            Ok(waited) => {
                self.metrics.guest_request(guest, verb, waited);
                Ok(())
            }
            Err(too_late) => {
                self.metrics.guest_request(guest, verb, true);
                Err(KubeError {
                    code: 429,
                    reason: "TooManyRequests".to_owned(),
                    message: format!(
                        "guest '{guest}' is over its API rate ({} requests per second, {} at \
                         once): its turn would come in {:.1} s, after the call's deadline \
                         (--guest-api-rate, --guest-api-burst)",
                        rate,
                        burst,
                        too_late.0.as_secs_f64()
                    ),
                })
            }
        }
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
}
