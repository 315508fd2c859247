//! Time as the operator's handler logic sees it: "now" for progress records, retries and
//! timeouts, and the sleeps before delayed handlers run again.
//!
//! Production uses the system clock. `kapsel test` swaps in a clock it can advance, so a
//! 60-second retry delay takes no wall time; everything that decides on handler time goes
//! through this trait, never through `Utc::now()` or `tokio::time::sleep` directly.
//! (API-level timing — request backoffs, consistency waits, watch timeouts — stays on real
//! time: it is about the server, not about the handlers.)

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// The longest wait handler time knows, a year: a guest's retry delay or a daemon's sleep
/// longer than this means "not soon" and is cut to it (beyond some thousands of years it
/// would not fit a timestamp at all).
pub(crate) const LONGEST_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// The time `delay` after `time`; the end of time when that is no time (never).
pub(crate) fn after(time: DateTime<Utc>, delay: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(delay)
        .ok()
        .and_then(|delta| time.checked_add_signed(delta))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The time `seconds` after `time`; the end of time when that is no time (never),
/// negative and NaN seconds included.
pub(crate) fn after_seconds(time: DateTime<Utc>, seconds: f64) -> DateTime<Utc> {
    Duration::try_from_secs_f64(seconds)
        .map_or(DateTime::<Utc>::MAX_UTC, |delay| after(time, delay))
}

/// A sleep that a clock hands out.
pub(crate) type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The source of handler time.
pub(crate) trait Clock: fmt::Debug + Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;

    /// A future that completes once this clock reaches `deadline`. Deadlines are
    /// absolute so that a manual clock advanced between computing a delay and starting
    /// the sleep still wakes it.
    fn sleep_until(&self, deadline: DateTime<Utc>) -> Sleep;
}

/// The system clock and tokio's timers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> Sleep {
        let remaining = (deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        Box::pin(tokio::time::sleep(remaining))
    }
}

#[cfg(any(test, feature = "testing"))]
/// A clock that moves only when told to (`kapsel test`'s `advance` step): sleeps end
/// as soon as the clock has been advanced past their deadline, without waiting.
#[derive(Debug, Clone)]
pub(crate) struct ManualClock {
    start: DateTime<Utc>,
    /// How far the clock has been advanced.
    offset: tokio::sync::watch::Sender<Duration>,
}

#[cfg(any(test, feature = "testing"))]
impl ManualClock {
    /// A clock that starts at the current system time.
    pub(crate) fn new() -> ManualClock {
        ManualClock::starting_at(Utc::now())
    }

    /// A clock that starts at `start` (a replay starts where its recording started).
    pub(crate) fn starting_at(start: DateTime<Utc>) -> ManualClock {
        ManualClock {
            start,
            offset: tokio::sync::watch::Sender::new(Duration::ZERO),
        }
    }

    /// How far the clock has been advanced.
    #[cfg(feature = "testing")]
    pub(crate) fn elapsed(&self) -> Duration {
        *self.offset.borrow()
    }

    /// Whether anything sleeps on this clock now (a retry's delay, a daemon's sleep).
    #[cfg(feature = "testing")]
    pub(crate) fn is_slept_on(&self) -> bool {
        self.offset.receiver_count() > 0
    }

    /// Moves the clock forward, ending the sleeps that are due.
    pub(crate) fn advance(&self, by: Duration) {
        self.offset.send_modify(|offset| *offset += by);
    }
}

#[cfg(any(test, feature = "testing"))]
impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = *self.offset.borrow();
        chrono::TimeDelta::from_std(offset)
            .ok()
            .and_then(|delta| self.start.checked_add_signed(delta))
            .unwrap_or(self.start)
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> Sleep {
        let mut offset = self.offset.subscribe();
        let due = (deadline - self.start).to_std().unwrap_or(Duration::ZERO);
        Box::pin(async move {
            // The sender lives as long as the clock; if it is gone, nothing will wake us.
            if offset.wait_for(|now| *now >= due).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_delay_or_never() {
        let now = Utc::now();
        assert_eq!(
            after(now, Duration::from_secs(2)) - now,
            TimeDelta::seconds(2)
        );
        assert_eq!(after_seconds(now, 1.5) - now, TimeDelta::milliseconds(1500));
        for never in [f64::NAN, -1.0, f64::INFINITY, 1e300] {
            assert_eq!(
                after_seconds(now, never),
                DateTime::<Utc>::MAX_UTC,
                "{never}"
            );
        }
        assert_eq!(after(now, Duration::MAX), DateTime::<Utc>::MAX_UTC);
    }

    #[tokio::test]
    async fn manual_sleeps_end_when_the_clock_is_advanced() {
        let clock = ManualClock::new();
        let before = clock.now();
        let mut sleep = clock.sleep_until(before + chrono::TimeDelta::seconds(60));
        clock.advance(Duration::from_secs(30));
        // A look at the sleep itself: it is not over, and no time needs to pass to tell.
        assert!(
            futures::poll!(&mut sleep).is_pending(),
            "30 of 60 seconds passed"
        );
        clock.advance(Duration::from_secs(30));
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .expect("the sleep ends at once");
        assert_eq!(clock.now() - before, chrono::TimeDelta::seconds(60));
    }
}
