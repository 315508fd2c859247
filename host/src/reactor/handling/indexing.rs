//! [`Indexing`]: the index handlers of an object's event (KOPF.md §7), which run first,
//! and the [`Readiness`] gate that holds back every other handler until the indexes are
//! complete.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use super::EventContext;
use super::calls::{Attempting, Calls, Success};
use crate::clock;
use crate::handlers::execution::{IndexEntries, Retrying, Verdict};
use crate::handlers::{IndexUpdate, ObjectKey};
use crate::reactor::objects::EventType;

/// The index stage.
#[derive(Clone)]
pub(crate) struct Indexing {
    pub(super) calls: Calls,
    pub(super) readiness: Readiness,
}

impl Indexing {
    /// Runs every index handler of the object's resource once per (guest, id): what each
    /// returns replaces the object's entries; filters that no longer match take the
    /// object out.
    pub(super) async fn run(&self, ctx: &EventContext<'_>) {
        let indexes = self.calls.indexes();
        let key = &ctx.event.key;
        let mut done: HashSet<(String, String)> = HashSet::new();
        for handler in &ctx.handlers.resource.index {
            let (guest, id) = handler.identity();
            if ctx.event.event_type == EventType::Deleted
                || !done.insert((guest.clone(), id.clone()))
            {
                continue;
            }
            if !handler.spec.filters.matches_body(&ctx.event.body)
                || !self.calls.passes_when(handler, ctx, None).await
            {
                indexes.remove(&guest, &id, key);
                continue;
            }
            if indexes.is_excluded(&guest, &id, key, self.calls.now()) {
                continue;
            }
            let how = Attempting {
                details: None,
                standing: None,
                retrying: Retrying::Later,
                success: Success::Silent,
                subhandlers: None,
            };
            let decision = self.calls.attempt_index(handler, ctx, how).await;
            // Kopf (§7): explicit temporary and permanent errors take the object out of
            // the index; arbitrary failures follow the errors mode (default: ignored,
            // keeping the stale values).
            let update = match (&decision.outcome.result, decision.verdict) {
                (Some(IndexEntries::Entries(entries)), _) => IndexUpdate::Entries(entries.clone()),
                (_, Verdict::Retry | Verdict::Pending) => IndexUpdate::ExcludeUntil(clock::after(
                    self.calls.now(),
                    delay(decision.outcome.delay),
                )),
                (_, Verdict::Failure) => IndexUpdate::ExcludeForever,
                (_, Verdict::Ignored) => IndexUpdate::Ignored,
                (_, Verdict::Success) => IndexUpdate::Keep,
            };
            indexes.apply(&guest, &id, key, update);
        }
        if ctx.event.event_type == EventType::Deleted {
            indexes.forget(key);
        }
        if !ctx.handlers.resource.index.is_empty() {
            self.readiness.indexed(&ctx.stream.id, key);
        }
    }
}

/// A retry delay in seconds as a duration (an unusable one: at once).
fn delay(seconds: Option<f64>) -> Duration {
    seconds
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(Duration::ZERO)
}

/// Holds back every non-index handler until the indexes are complete: every
/// indexed stream has finished its initial listing and every object seen in
/// those listings has been indexed once (KOPF.md §7). Once open, it stays
/// open: later streams and objects no longer block.
#[derive(Debug, Clone)]
pub(crate) struct Readiness {
    state: Arc<Mutex<ReadinessState>>,
    open: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct ReadinessState {
    unlisted_streams: HashSet<String>,
    unindexed_objects: HashSet<(String, ObjectKey)>,
    opened: bool,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            state: Arc::default(),
            open: watch::Sender::new(false),
        }
    }
}

impl Readiness {
    fn lock(&self) -> MutexGuard<'_, ReadinessState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers an indexed stream before it starts, so the gate waits for it.
    pub(crate) fn expect_stream(&self, stream: &str) {
        let mut s = self.lock();
        if !s.opened {
            s.unlisted_streams.insert(stream.to_owned());
        }
    }

    /// An indexed stream listed an object: the gate waits until it is indexed.
    pub(crate) fn listed_object(&self, stream: &str, object: &str) {
        let mut s = self.lock();
        if !s.opened {
            s.unindexed_objects
                .insert((stream.to_owned(), object.to_owned()));
        }
    }

    /// An indexed stream finished its initial listing.
    pub(crate) fn stream_listed(&self, stream: &str) {
        let mut s = self.lock();
        s.unlisted_streams.remove(stream);
        self.maybe_open(&mut s);
    }

    /// A stream went away (its resource vanished) without completing.
    pub(crate) fn stream_gone(&self, stream: &str) {
        let mut s = self.lock();
        s.unlisted_streams.remove(stream);
        s.unindexed_objects.retain(|(st, _)| st != stream);
        self.maybe_open(&mut s);
    }

    /// An object was indexed (by every index handler of its resource).
    pub(crate) fn indexed(&self, stream: &str, object: &str) {
        let mut s = self.lock();
        s.unindexed_objects
            .remove(&(stream.to_owned(), object.to_owned()));
        self.maybe_open(&mut s);
    }

    /// Opens the gate if nothing is pending; called once all streams are registered.
    pub(crate) fn check(&self) {
        let mut s = self.lock();
        self.maybe_open(&mut s);
    }

    fn maybe_open(&self, s: &mut ReadinessState) {
        if !s.opened && s.unlisted_streams.is_empty() && s.unindexed_objects.is_empty() {
            s.opened = true;
            self.open.send_replace(true);
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Waits until the gate is open.
    pub(crate) async fn wait(&self) {
        let mut rx = self.open.subscribe();
        // The sender lives in self, so this only fails if self is gone.
        let _ = rx.wait_for(|open| *open).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readiness_waits_for_listings_and_objects() {
        let r = Readiness::default();
        r.expect_stream("pods");
        r.listed_object("pods", "o1");
        r.stream_listed("pods");
        assert!(!r.is_open());
        r.indexed("pods", "o1");
        assert!(r.is_open());
        r.wait().await;
        r.expect_stream("later");
        assert!(r.is_open(), "once open it stays open");
    }
}
