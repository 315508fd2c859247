//! [`Deadline`]: when a call's wall-clock budget runs out, paused while a daemon sleeps.

use std::sync::Arc;
use std::time::Instant;

/// A call's deadline, shared with the host's own bound on the call: a daemon's sleeps
/// (`sleep-unless-stopped`) do not count against its budget. While the guest sleeps the
/// deadline is paused (it moves on with the clock, so nothing times the call out in the
/// middle of a sleep); when the sleep ends it has moved on by the time slept.
#[derive(Debug, Clone)]
pub(crate) struct Deadline(Arc<std::sync::Mutex<DeadlineState>>);

#[derive(Debug)]
struct DeadlineState {
    at: Instant,
    /// Since when the guest sleeps, if it does.
    paused_since: Option<Instant>,
}

impl Deadline {
    pub(crate) fn new(at: Instant) -> Deadline {
        Deadline(Arc::new(std::sync::Mutex::new(DeadlineState {
            at,
            paused_since: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DeadlineState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When the call's budget runs out, as things stand now.
    pub(crate) fn get(&self) -> Instant {
        let state = self.lock();
        match state.paused_since {
            Some(since) => state.at.checked_add(since.elapsed()).unwrap_or(state.at),
            None => state.at,
        }
    }

    /// The guest starts sleeping: its budget stops running.
    pub(crate) fn pause(&self) {
        self.lock().paused_since.get_or_insert_with(Instant::now);
    }

    /// The guest woke up: the deadline has moved on by the time slept.
    pub(crate) fn resume(&self) {
        let mut state = self.lock();
        if let Some(since) = state.paused_since.take() {
            state.at = state.at.checked_add(since.elapsed()).unwrap_or(state.at);
        }
    }
}
