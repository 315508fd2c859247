//! The pure core of Kopf's change handling (KOPF.md §1.6, §3, §4, §5).
//!
//! No I/O, no guests, no clock: every function takes the body, the handlers and `now`
//! and returns decisions and patches, so the per-object pipeline can drive it and the
//! tests (and `kapsel test`) can step it with a fake clock. The formats are Kopf's
//! byte for byte, so objects migrate between Kopf and Kapsel in both directions.
//!
//! One cycle, as the integration drives it:
//! 1. [`DiffBaseStorage::essences`] → old/new essences;
//!    [`detect_cause`]; [`select_handlers`] (then `when` in the guest);
//! 2. [`finalizers::decide`] (add/remove the finalizer and stop there, or go on);
//! 3. [`lifecycle::begin`] → plan; per planned handler `execution::precheck`, else
//!    invoke the guest and turn the result into an outcome with `execution::decide`;
//!    the sub-handlers it declares during its call are planned and decided by
//!    [`Children`], their records and results stored with the cycle's;
//! 4. [`lifecycle::finish`]; if deleting and nothing pending, [`finalizers::release_on_deletion`];
//! 5. [`Patch::finalize`], send [`Patch::merge_patches`] and [`Patch::finalizer_json_patch`];
//!    then [`lifecycle::after_patch`] decides the sleep and the `touch-dummy` patch.

mod causes;
mod deletion;
mod diff;
mod essence;
mod finalizers;
mod keys;
mod lifecycle;
mod oversized;
mod patch;
mod progress;
mod stanzas;
mod subhandlers;
#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::persistence::{DiffBaseStorage, Persistence, ProgressStorage};
pub(crate) use causes::{
    CallbackSlot, ChangingCause, ChangingHandler, Criterion, Reason, capitalize, detect_cause,
    handler_view, is_stealth, prematch, select_handlers, title,
};
pub(crate) use deletion::{is_deletion_blocked, is_deletion_ongoing};
pub(crate) use diff::diff;
pub(crate) use finalizers::{
    FinalizerDecision, changing_requires_finalizer, finalizer_decision, release_on_deletion,
};
pub(crate) use keys::long_prefixes;
pub(crate) use lifecycle::{
    CycleContext, Lifecycle, Wakeup, after_patch, begin, finish, touch_value,
};
pub(crate) use patch::{FinalizerChange, Patch, inconsistencies};
pub(crate) use progress::{format_time, seconds};
pub(crate) use subhandlers::Children;

/// Kopf's persistence settings, with Kopf's defaults.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChangeSettings {
    /// The storages and the finalizer (the public settings).
    pub(crate) persistence: Persistence,
    /// How long to wait for our own patch to come back before going on.
    pub(crate) consistency_timeout: Duration,
    /// Which of the due handlers and sub-handlers run in one cycle.
    pub(crate) lifecycle: Lifecycle,
}

impl Default for ChangeSettings {
    fn default() -> Self {
        ChangeSettings {
            persistence: Persistence::default(),
            consistency_timeout: crate::settings::seconds(
                Persistence::default().consistency_timeout,
            ),
            lifecycle: Lifecycle::default(),
        }
    }
}

impl ChangeSettings {
    pub(crate) fn progress(&self) -> &ProgressStorage {
        &self.persistence.progress_storage
    }

    pub(crate) fn diffbase(&self) -> &DiffBaseStorage {
        &self.persistence.diffbase_storage
    }

    pub(crate) fn finalizer(&self) -> &str {
        &self.persistence.finalizer
    }

    /// Drop what the storages keep (their records, markers and diff-bases) from an
    /// essence-shaped value.
    pub(crate) fn strip_bookkeeping(
        &self,
        essence: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        self.progress().clear_map(essence);
        self.diffbase().strip_own(essence);
    }
}
