//! How handler calls are recorded in the journal (which feeds the metrics, `--record`
//! and `kapsel test`): called, failed, finished — the same records for every kind.

use super::execution::Verdict;
use super::spec::Handler;
use crate::journal::{Journal, Record};

/// What a call was about: an object of a resource (with the raw event's type), or
/// nothing (activities).
#[derive(Debug, Clone, Copy)]
pub(crate) struct About<'a> {
    /// `plural.version.group`; empty for activities.
    pub(crate) resource: &'a str,
    /// `namespace/name`, or `name`; `None` for activities.
    pub(crate) object: Option<&'a str>,
    /// Kopf's raw event type (`None` for listings, timers and activities).
    pub(crate) event_type: Option<&'a str>,
}

impl About<'_> {
    /// A call about no object.
    pub(crate) const NOTHING: About<'static> = About {
        resource: "",
        object: None,
        event_type: None,
    };
}

/// How a call ended: how long it took, the verdict, what the sandbox stopped, and the
/// line logged for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ended<'a> {
    pub(crate) elapsed: std::time::Duration,
    pub(crate) verdict: Verdict,
    pub(crate) fault: Option<&'a str>,
    pub(crate) line: &'a str,
}

impl Handler {
    /// The guest's name and the handler id, as records carry them.
    fn names(&self) -> (String, String) {
        (self.guest.name().to_owned(), self.spec.id.clone())
    }

    /// Records that the handler is being called.
    pub(crate) fn record_called(&self, journal: &Journal, about: About<'_>) {
        let (guest, handler) = self.names();
        journal.push(Record::HandlerCalled {
            guest,
            handler,
            kind: self.kind_name().to_owned(),
            resource: about.resource.to_owned(),
            object: about.object.unwrap_or_default().to_owned(),
            event_type: about.event_type.map(str::to_owned),
        });
    }

    /// Records a failed attempt, with the line logged for it.
    pub(crate) fn record_failed(&self, journal: &Journal, about: About<'_>, error: &str) {
        let (guest, handler) = self.names();
        journal.push(Record::HandlerFailed {
            guest,
            handler,
            object: about.object.unwrap_or_default().to_owned(),
            error: error.to_owned(),
        });
    }

    /// Records that the handler was given up on before another attempt (a failure, with
    /// Kopf's line: its timeout or retry limit was reached).
    pub(crate) fn record_gave_up(&self, journal: &Journal, about: About<'_>, line: &str) {
        self.record_failed(journal, about, line);
        let (guest, handler) = self.names();
        journal.push(Record::HandlerGaveUp {
            guest,
            handler,
            object: about.object.unwrap_or_default().to_owned(),
            message: line.to_owned(),
        });
    }

    /// Records how a call ended, with the line logged for it.
    pub(crate) fn record_finished(&self, journal: &Journal, about: About<'_>, ended: Ended<'_>) {
        let Ended {
            elapsed,
            verdict,
            fault,
            line,
        } = ended;
        let (guest, handler) = self.names();
        journal.push(Record::HandlerFinished {
            guest,
            handler,
            kind: self.kind_name().to_owned(),
            object: about.object.map(str::to_owned),
            seconds: elapsed.as_secs_f64(),
            outcome: verdict.as_str().to_owned(),
            fault: fault.map(str::to_owned),
            message: line.to_owned(),
        });
    }
}
