//! [`SelfTriggers`]: spotting an object whose handlers re-trigger themselves through their
//! own patches (a handler that changes its object on every call, or fights the operator
//! over its finalizer), so that its handling is backed off instead of looping as fast as
//! the API server answers.
//!
//! An event is an echo when it arrives while the operator waits for its own last patch
//! to come back. A write made while handling an echo, quickly after the previous write
//! (within half the shortest retry delay), continues a streak; anything else ends it. A
//! handler retried after a delay is no loop: its writes alternate between quick (right
//! after an echo) and slow (when the delay is over). From the limit on, each echo waits
//! before it is handled, twice as long each time (up to [`MAX_BACKOFF`]).

use std::time::{Duration, Instant};

/// The longest wait before handling an echo of a looping object.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One object's recent writes, as far as loops are concerned.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct SelfTriggers {
    /// Writes in a row, each soon after the last and while handling its echo.
    streak: u32,
    /// When the operator last wrote the object.
    last_write: Option<Instant>,
    /// The streak reached the limit and was reported (reported once per streak).
    reported: bool,
}

/// What [`SelfTriggers::written`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streak {
    /// No loop (or not yet).
    Quiet,
    /// This write made the streak reach the limit: report it.
    Reached(u32),
    /// A reported streak ended: the object no longer loops.
    Ended,
}

impl SelfTriggers {
    /// The operator wrote the object at `now`, while handling an event that was (`echo`)
    /// or was not the echo of its previous write, after backing off for `waited` (which
    /// does not count: a loop stays a loop while it is backed off).
    pub(crate) fn written(
        &mut self,
        echo: bool,
        now: Instant,
        waited: Duration,
        quick: Duration,
        limit: u32,
    ) -> Streak {
        let soon = self
            .last_write
            .is_some_and(|last| now.saturating_duration_since(last).saturating_sub(waited) < quick);
        self.last_write = Some(now);
        if echo && soon {
            self.streak = self.streak.saturating_add(1);
            if self.streak >= limit && !self.reported {
                self.reported = true;
                return Streak::Reached(self.streak);
            }
            Streak::Quiet
        } else {
            self.settle()
        }
    }

    /// An event was handled without writing: any streak is over.
    pub(crate) fn settled(&mut self) -> Streak {
        self.settle()
    }

    fn settle(&mut self) -> Streak {
        let ended = self.reported;
        self.streak = 0;
        self.reported = false;
        if ended { Streak::Ended } else { Streak::Quiet }
    }

    /// How long to wait before handling an echo: nothing below the limit, then `base`
    /// doubled for each write past it, up to [`MAX_BACKOFF`].
    pub(crate) fn backoff(&self, base: Duration, limit: u32) -> Option<Duration> {
        let past = self.streak.checked_sub(limit)?;
        let factor = 2_u32.saturating_pow(past.min(16));
        Some(
            base.max(Duration::from_millis(100))
                .saturating_mul(factor)
                .min(MAX_BACKOFF),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK: Duration = Duration::from_secs(1);

    #[test]
    fn quick_echo_writes_build_a_streak_and_anything_else_ends_it() {
        let mut triggers = SelfTriggers::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(
            triggers.written(false, at(0), Duration::ZERO, QUICK, 3),
            Streak::Quiet
        );
        assert_eq!(triggers.backoff(QUICK, 3), None);
        assert_eq!(
            triggers.written(true, at(10), Duration::ZERO, QUICK, 3),
            Streak::Quiet
        );
        assert_eq!(
            triggers.written(true, at(20), Duration::ZERO, QUICK, 3),
            Streak::Quiet
        );
        assert_eq!(
            triggers.written(true, at(30), Duration::ZERO, QUICK, 3),
            Streak::Reached(3)
        );
        assert_eq!(triggers.backoff(QUICK, 3), Some(QUICK));
        assert_eq!(
            triggers.written(true, at(40), Duration::ZERO, QUICK, 3),
            Streak::Quiet
        );
        assert_eq!(triggers.backoff(QUICK, 3), Some(QUICK * 2));
        // A retry after a proper delay is no loop.
        assert_eq!(
            triggers.written(true, at(5000), Duration::ZERO, QUICK, 3),
            Streak::Ended
        );
        assert_eq!(triggers.backoff(QUICK, 3), None);
        // Nor are writes caused by someone else's changes.
        for ms in [5010, 5020, 5030, 5040] {
            assert_eq!(
                triggers.written(false, at(ms), Duration::ZERO, QUICK, 3),
                Streak::Quiet
            );
        }
        assert_eq!(triggers.settled(), Streak::Quiet);
    }

    #[test]
    fn the_backoff_doubles_up_to_a_minute() {
        let mut triggers = SelfTriggers::default();
        let now = Instant::now();
        for _ in 0..40 {
            triggers.written(true, now, Duration::ZERO, QUICK, 1);
        }
        assert_eq!(triggers.backoff(QUICK, 1), Some(MAX_BACKOFF));
        // Waiting out the backoff keeps the streak: the loop goes on.
        let later = now + MAX_BACKOFF + Duration::from_millis(10);
        assert_eq!(
            triggers.written(true, later, MAX_BACKOFF, QUICK, 1),
            Streak::Quiet
        );
        assert_eq!(triggers.backoff(QUICK, 1), Some(MAX_BACKOFF));
    }
}
