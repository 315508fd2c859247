//! [`RateLimiter`]: a token bucket — a sustained pace with a burst allowance. The one
//! rate limiter of the host: each guest's Kubernetes requests and Events go through one
//! (so that the operator's own requests always get through), and anything else that must
//! not outpace the API server should use it too.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A token bucket: `burst` tokens at most, refilled at `rate` per second. Waiters reserve
/// their token at once (the bucket may go negative) and sleep until it is theirs, so
/// they are served in the order they came.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    rate: f64,
    burst: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens available as of `at`; negative while waiters hold reservations.
    tokens: f64,
    at: Instant,
}

/// A token that would come too late: it would be free only after the given wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLate(pub(crate) Duration);

impl RateLimiter {
    /// A full bucket of `burst` tokens refilled at `rate` per second (both at least
    /// tiny positive numbers, so that the bucket always refills).
    pub(crate) fn new(rate: f64, burst: u32) -> RateLimiter {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            1.0
        };
        let burst = f64::from(burst.max(1));
        RateLimiter {
            rate,
            burst,
            bucket: Mutex::new(Bucket {
                tokens: burst,
                at: Instant::now(),
            }),
        }
    }

    /// Reserves a token: how long to wait for it (zero when one is there), or
    /// [`TooLate`] (reserving nothing) when it would come after `until`.
    pub(crate) fn reserve(&self, until: Option<Instant>) -> Result<Duration, TooLate> {
        self.reserve_within(until.map(|until| until.saturating_duration_since(Instant::now())))
    }

    /// Reserves a token due within `at_most` (any wait when `None`): how long to wait for
    /// it, or [`TooLate`] (reserving nothing) when it would be free only later.
    pub(crate) fn reserve_within(&self, at_most: Option<Duration>) -> Result<Duration, TooLate> {
        // Only numbers are inside: a panic cannot leave them torn.
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() * self.rate;
        bucket.tokens = (bucket.tokens + refilled).min(self.burst);
        bucket.at = now;
        let wait = if bucket.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate)
        };
        if let Some(at_most) = at_most
            && wait > at_most
        {
            return Err(TooLate(wait));
        }
        bucket.tokens -= 1.0;
        Ok(wait)
    }

    /// Waits for a token; [`TooLate`] at once when it would come after `until`.
    /// Returns whether it had to wait.
    pub(crate) async fn take(&self, until: Option<Instant>) -> Result<bool, TooLate> {
        let wait = self.reserve(until)?;
        if wait.is_zero() {
            return Ok(false);
        }
        tokio::time::sleep(wait).await;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_pace() {
        let limiter = RateLimiter::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(limiter.reserve(None), Ok(Duration::ZERO));
        }
        let wait = limiter.reserve(None).expect("reserved");
        assert!(
            wait > Duration::from_millis(50) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        let next = limiter.reserve(None).expect("reserved");
        assert!(next > wait, "later waiters wait longer: {next:?}");
        let soon = Some(Instant::now() + Duration::from_millis(10));
        assert!(matches!(limiter.reserve(soon), Err(TooLate(_))));
        // A refusal reserves nothing: the next one waits no longer than before.
        let again = limiter.reserve(None).expect("reserved");
        assert!(again < next + Duration::from_millis(150), "{again:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn taking_waits_for_the_token() {
        let limiter = RateLimiter::new(2.0, 1);
        assert_eq!(limiter.take(None).await, Ok(false));
        let started = tokio::time::Instant::now();
        assert_eq!(limiter.take(None).await, Ok(true));
        assert!(started.elapsed() >= Duration::from_millis(400));
    }
}
