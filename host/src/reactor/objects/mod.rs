//! Objects between their events: one event as the stages see it (`events`), the
//! per-object queues that keep each object's events in order (`queue`), and what the
//! operator remembers of each object (`memory`, with its timer and daemon `tasks`, and
//! its handlers re-triggering themselves: `self_triggers`).

mod events;
mod memory;
mod queue;
mod self_triggers;
mod tasks;

pub(crate) use events::{EventType, KeyFields, ObjectEvent, QueuedEvent, key_from, object_ref};
pub(crate) use memory::{Memories, ObjectMemory, TurnPermit, Turns, turns};
pub(crate) use queue::Router;
pub(crate) use self_triggers::Streak;
pub(crate) use tasks::RunningTask;
