//! The timer and daemon tasks of one object (part of its memory): which run, which
//! daemons exited for good, and when the object last changed for `idle`.
//!
//! Tasks are told apart by handler *and* guest load ([`Handler::same_as`]): when a reload
//! replaces a guest, its running tasks are the old version's, stopped and started anew
//! with the new one; and a daemon that exited for good in the old version runs again in
//! the new one, as after a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::ObjectEvent;
use crate::handlers::{Handler, SharedProgress, Stopper};
use crate::runtime::StopReasons;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::watch;

/// The timers and daemons of one object; part of the object's memory. Its state exists
/// once the object has had a timer or daemon (most objects of most operators never do,
/// and every object known keeps its memory: 16 bytes here rather than 184).
#[derive(Debug, Default)]
pub(crate) struct ObjectTasks(Mutex<Option<Box<State>>>);

#[derive(Debug, Default)]
struct State {
    /// By handler identity (guest, id).
    running: HashMap<Identity, RunningTask>,
    /// Daemons that have exited for good for this object (success or final failure), with
    /// the guest load they ran in: not started again, and no longer needing the finalizer.
    exited: HashMap<Identity, u64>,
    /// What resets `idle` when it changes: spec, labels, annotations, status.
    fingerprint: Option<Value>,
    /// When the fingerprint last changed (handler time); the tasks wait on it.
    changed: Option<watch::Sender<DateTime<Utc>>>,
}

/// One running task, as the object's memory keeps it.
#[derive(Debug)]
pub(crate) struct RunningTask {
    /// The handler it runs (of one load of its guest).
    pub(crate) handler: Arc<Handler>,
    /// Stopped, with why, to stop the task (its sleeps end at once).
    pub(crate) stop: Stopper,
    /// The object's event as last seen: calls get the freshest body (Kopf's live
    /// kwargs), its text whole.
    pub(crate) latest: watch::Sender<ObjectEvent>,
    /// Where the task is, for `kapsel test`'s "settled".
    #[cfg_attr(
        not(any(test, feature = "testing")),
        expect(
            dead_code,
            reason = "read by `kapsel test`'s settling (feature `testing`)"
        )
    )]
    pub(crate) progress: SharedProgress,
    pub(crate) task: tokio::task::JoinHandle<()>,
}

/// A handler's identity: its guest and id.
pub(crate) type Identity = (String, String);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ObjectTasks {
    /// No task is busy, and none waits for a time that has come.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn settled(&self, now: DateTime<Utc>) -> bool {
        let state = lock(&self.0);
        let Some(state) = state.as_ref() else {
            return true;
        };
        state.running.values().all(|r| {
            let progress = *lock(&r.progress);
            r.task.is_finished() || (!progress.busy && progress.due.is_none_or(|due| due > now))
        })
    }

    /// Whether a task of this handler is running (or stopping).
    pub(crate) fn is_running(&self, identity: &Identity) -> bool {
        lock(&self.0).as_ref().is_some_and(|state| {
            state
                .running
                .get(identity)
                .is_some_and(|r| !r.task.is_finished())
        })
    }

    /// Notes the object as seen now: a change of what `idle` watches restarts it. The
    /// operator's own bookkeeping (what `bookkeeping` strips: progress records, the
    /// diff-base, touch-dummy) is no change of the object; results in `status` are.
    pub(crate) fn observe(
        &self,
        event: &ObjectEvent,
        bookkeeping: impl Fn(&mut serde_json::Map<String, Value>),
        now: DateTime<Utc>,
    ) -> watch::Receiver<DateTime<Utc>> {
        let body = &event.body;
        let mut fingerprint = serde_json::Map::new();
        for (key, value) in [("spec", body.get("spec")), ("status", body.get("status"))] {
            fingerprint.insert(key.into(), value.cloned().unwrap_or_default());
        }
        fingerprint.insert(
            "metadata".into(),
            serde_json::json!({
                "labels": body.pointer("/metadata/labels"),
                "annotations": body.pointer("/metadata/annotations"),
            }),
        );
        bookkeeping(&mut fingerprint);
        let fingerprint = Value::Object(fingerprint);
        let mut state = lock(&self.0);
        let state = state.get_or_insert_default();
        let changed = state
            .changed
            .get_or_insert_with(|| watch::Sender::new(now))
            .clone();
        if state.fingerprint.as_ref() != Some(&fingerprint) {
            if state.fingerprint.is_some() {
                changed.send_replace(now);
            }
            state.fingerprint = Some(fingerprint);
        }
        changed.subscribe()
    }

    /// Whether no task runs (or stops) for the object.
    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.0)
            .as_ref()
            .is_none_or(|state| state.running.is_empty())
    }

    /// The object as seen now: the timers and daemons running get it as their latest body.
    pub(crate) fn refresh(&self, event: &ObjectEvent) {
        if let Some(state) = lock(&self.0).as_ref() {
            for running in state.running.values() {
                running.latest.send_replace(event.clone());
            }
        }
    }

    /// Stops the tasks whose handler `keep` rejects, for `reason`, and waits until they
    /// have ended (or, for daemons with a cancellation timeout, been abandoned).
    pub(crate) async fn stop_where(&self, keep: impl Fn(&Handler) -> bool, reason: StopReasons) {
        let stopping: Vec<RunningTask> = {
            let mut state = lock(&self.0);
            let Some(state) = state.as_mut() else {
                return;
            };
            let ids: Vec<Identity> = state
                .running
                .iter()
                .filter(|(_, task)| !keep(&task.handler))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter()
                .filter_map(|id| state.running.remove(id))
                .collect()
        };
        for running in &stopping {
            running.stop.stop(reason);
        }
        // All at once: each takes its own time to exit (Kopf stops them in parallel too).
        // A task that panicked is gone as well.
        futures::future::join_all(stopping.into_iter().map(|running| running.task)).await;
    }

    /// Whether this daemon (of this guest load) has exited for good.
    pub(crate) fn has_exited(&self, handler: &Handler) -> bool {
        lock(&self.0).as_ref().is_some_and(|state| {
            state
                .exited
                .get(&handler.identity())
                .is_some_and(|load| *load == handler.guest.load())
        })
    }

    /// Notes that this daemon exited for good: it is not started again for the object.
    pub(crate) fn mark_exited(&self, handler: &Handler) {
        lock(&self.0)
            .get_or_insert_default()
            .exited
            .insert(handler.identity(), handler.guest.load());
    }

    /// Keeps a task that was just started.
    pub(crate) fn insert(&self, task: RunningTask) {
        lock(&self.0)
            .get_or_insert_default()
            .running
            .insert(task.handler.identity(), task);
    }

    /// Stops every timer and daemon of the object, for `reason`, and waits until they
    /// have ended.
    pub(crate) async fn stop_all(&self, reason: StopReasons) {
        self.stop_where(|_| false, reason).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    use crate::persistence::{AnnotationsProgress, Persistence, ProgressStorage};
    use crate::reactor::changes::ChangeSettings;
    use crate::reactor::objects::EventType;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::seconds(seconds)
    }

    fn event(body: serde_json::Value) -> ObjectEvent {
        ObjectEvent::of(EventType::Modified, "uid".to_owned(), Arc::new(body))
    }

    #[test]
    fn idle_restarts_on_changes_of_what_users_change() {
        let timers = ObjectTasks::default();
        let seen = |spec: i64, version: &str| {
            event(serde_json::json!({
                "metadata": {"resourceVersion": version, "labels": {"a": "b"}},
                "spec": {"size": spec},
            }))
        };
        // The operator's storages under the prefix `p`.
        let settings = ChangeSettings {
            persistence: Persistence {
                progress_storage: ProgressStorage::Annotations(AnnotationsProgress {
                    prefix: "p".into(),
                    ..AnnotationsProgress::default()
                }),
                ..Persistence::default()
            },
            ..ChangeSettings::default()
        };
        let own = |fingerprint: &mut serde_json::Map<String, Value>| {
            settings.strip_bookkeeping(fingerprint);
        };
        let changed = timers.observe(&seen(1, "1"), own, at(0));
        assert_eq!(*changed.borrow(), at(0));
        // Only the resourceVersion moved: not a change.
        timers.observe(&seen(1, "2"), own, at(5));
        assert_eq!(*changed.borrow(), at(0));
        // The operator's own records are not a change either.
        let mut recorded = (*seen(1, "3").body).clone();
        recorded["metadata"]["annotations"] = serde_json::json!({"p/tick": "{}"});
        timers.observe(&event(recorded), own, at(6));
        assert_eq!(*changed.borrow(), at(0));
        timers.observe(&seen(2, "4"), own, at(7));
        assert_eq!(*changed.borrow(), at(7));
        assert!(timers.settled(at(100)), "no timer runs");
    }

    #[tokio::test]
    async fn an_object_without_timers_or_daemons_keeps_no_task_state() {
        let tasks = ObjectTasks::default();
        let identity: Identity = ("guest".into(), "handler".into());
        assert!(!tasks.is_running(&identity));
        assert!(tasks.is_empty());
        assert!(tasks.settled(at(0)));
        tasks.stop_all(StopReasons::RESOURCE_DELETED).await;
        assert!(lock(&tasks.0).is_none(), "asking allocates nothing");
        tasks.observe(&event(serde_json::json!({"spec": {}})), |_| {}, at(0));
        assert!(lock(&tasks.0).is_some(), "observing keeps the fingerprint");
    }
}
