//! [`Guest`]: a guest loaded and checked, ready to be called (see `loader` and `invoke`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bindings::{DescribeOutput, GuestWorldPre};
use super::engine::Runtime;
use super::state::HostState;

/// A guest loaded and checked: compiled once, linked, and described. Each call instantiates
/// it afresh, so a guest that trapped, timed out or ran out of memory is as good as new for
/// the next call, and no state leaks between objects.
///
/// Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub(crate) struct Guest {
    pub(super) inner: Arc<GuestInner>,
}

pub(super) struct GuestInner {
    /// The file stem, used in logs and as the guest's identity.
    pub(super) name: Arc<str>,
    pub(super) path: PathBuf,
    /// Compiled and linked; instantiating it is the only per-call work.
    pub(super) pre: GuestWorldPre<HostState>,
    /// What `describe()` answered at load (already checked).
    pub(super) describe: DescribeOutput,
    /// Keeps the engine's epoch ticker alive while the guest may be called.
    pub(super) runtime: Runtime,
}

impl fmt::Debug for Guest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.inner.name)
            .field("path", &self.inner.path)
            .field("handlers", &self.inner.describe.handlers.len())
            .finish_non_exhaustive()
    }
}

impl Guest {
    /// The guest's name: its file stem.
    pub(crate) fn name(&self) -> &str {
        &self.inner.name
    }

    /// The file the guest was loaded from.
    pub(crate) fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What the guest declared at load.
    pub(crate) fn describe(&self) -> &DescribeOutput {
        &self.inner.describe
    }

    /// The runtime the guest was loaded into (every guest of an operator shares one).
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    pub(super) fn shared_name(&self) -> &Arc<str> {
        &self.inner.name
    }

    pub(super) fn pre(&self) -> &GuestWorldPre<HostState> {
        &self.inner.pre
    }
}
