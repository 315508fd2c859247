//! [`StopReasons`]: why a timer or daemon must stop (Kopf's `DaemonStoppingReason`), as
//! a handler reads them from the host (`Cause::stop_reasons`).

use std::fmt;

/// Why a timer or daemon must stop: several reasons at once, none while it may go on
/// (Kopf's `stopped.reason`, a `DaemonStoppingReason` flag set).
///
/// ```
/// use kapsel::StopReasons;
/// let reasons = StopReasons::RESOURCE_DELETED | StopReasons::DAEMON_SIGNALLED;
/// assert!(reasons.contains(StopReasons::RESOURCE_DELETED));
/// assert_eq!(reasons.to_string(), "RESOURCE_DELETED|DAEMON_SIGNALLED");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StopReasons(u8);

impl StopReasons {
    /// Its task has ended (set last: no call of the task runs by then, so a handler
    /// never reads it).
    pub const DONE: StopReasons = StopReasons(1);
    /// The object no longer matches the handler's filters.
    pub const FILTERS_MISMATCH: StopReasons = StopReasons(1 << 1);
    /// The object is being deleted, or is gone.
    pub const RESOURCE_DELETED: StopReasons = StopReasons(1 << 2);
    /// The operator pauses (a peer of higher priority, a freeze).
    pub const OPERATOR_PAUSING: StopReasons = StopReasons(1 << 3);
    /// The operator exits, or no longer serves the object's resource.
    pub const OPERATOR_EXITING: StopReasons = StopReasons(1 << 4);
    /// The daemon's `cancellation_backoff` runs: it is asked to exit gracefully.
    pub const DAEMON_SIGNALLED: StopReasons = StopReasons(1 << 5);
    /// The daemon's `cancellation_timeout` runs: it is asked to exit by force; once the
    /// timeout is over, its call is abandoned.
    pub const DAEMON_CANCELLED: StopReasons = StopReasons(1 << 6);
    /// The daemon's call is abandoned.
    pub const DAEMON_ABANDONED: StopReasons = StopReasons(1 << 7);

    /// Kopf's names, in its order.
    const NAMES: [(StopReasons, &'static str); 8] = [
        (StopReasons::DONE, "DONE"),
        (StopReasons::FILTERS_MISMATCH, "FILTERS_MISMATCH"),
        (StopReasons::RESOURCE_DELETED, "RESOURCE_DELETED"),
        (StopReasons::OPERATOR_PAUSING, "OPERATOR_PAUSING"),
        (StopReasons::OPERATOR_EXITING, "OPERATOR_EXITING"),
        (StopReasons::DAEMON_SIGNALLED, "DAEMON_SIGNALLED"),
        (StopReasons::DAEMON_CANCELLED, "DAEMON_CANCELLED"),
        (StopReasons::DAEMON_ABANDONED, "DAEMON_ABANDONED"),
    ];

    /// No reason: the timer or daemon may go on.
    pub const fn empty() -> StopReasons {
        StopReasons(0)
    }

    /// Whether there is no reason: the timer or daemon may go on.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every reason of `other` is among these.
    pub const fn contains(self, other: StopReasons) -> bool {
        self.0 & other.0 == other.0
    }

    /// Kopf's names of the reasons (`RESOURCE_DELETED`, ...), in Kopf's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        StopReasons::NAMES
            .into_iter()
            .filter(move |(reason, _)| self.contains(*reason))
            .map(|(_, name)| name)
    }
}

impl std::ops::BitOr for StopReasons {
    type Output = StopReasons;

    fn bitor(self, other: StopReasons) -> StopReasons {
        StopReasons(self.0 | other.0)
    }
}

impl std::ops::BitOrAssign for StopReasons {
    fn bitor_assign(&mut self, other: StopReasons) {
        self.0 |= other.0;
    }
}

/// The names joined with `|`, as Python shows a flag set; `none` when empty.
impl fmt::Display for StopReasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&self.names().collect::<Vec<_>>().join("|"))
    }
}

#[cfg(test)]
mod tests {
    use super::StopReasons;

    #[test]
    fn reasons_combine_and_read_as_kopf_names_them() {
        let mut reasons = StopReasons::empty();
        assert!(reasons.is_empty());
        assert_eq!(reasons.to_string(), "none");
        reasons |= StopReasons::DAEMON_CANCELLED;
        reasons |= StopReasons::FILTERS_MISMATCH;
        assert!(reasons.contains(StopReasons::FILTERS_MISMATCH));
        assert!(!reasons.contains(StopReasons::FILTERS_MISMATCH | StopReasons::DONE));
        assert_eq!(reasons.to_string(), "FILTERS_MISMATCH|DAEMON_CANCELLED");
    }
}
