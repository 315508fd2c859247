//! The sections of the settings (Kopf's `settings.watching`, `queueing`, ...), each with
//! Kopf's defaults and the checks serde does not make.

use serde::{Deserialize, Serialize};

use super::error::SettingsError;

/// Requests to the API server (Kopf's `settings.networking`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Networking {
    /// Seconds a request other than a watch may take, its answer read; `None`: no limit.
    pub request_timeout: Option<f64>,
    /// Seconds a request may wait for its answer to start (the connection, then the
    /// server's first byte); `None`: only `request_timeout` bounds it.
    pub connect_timeout: Option<f64>,
    /// Seconds between the attempts of the operator's own writes that failed for a
    /// reason worth retrying; one attempt more than there are pauses.
    pub error_backoffs: Vec<f64>,
    /// After a 429, pause as long as the server says even when that is shorter than the
    /// backoff (else the longer of the two).
    pub enforce_retry_after: bool,
}

impl Default for Networking {
    fn default() -> Self {
        Networking {
            request_timeout: Some(300.0),
            connect_timeout: None,
            error_backoffs: [1, 1, 2, 3, 5, 8, 13, 21].map(f64::from).to_vec(),
            enforce_retry_after: false,
        }
    }
}

/// Following the cluster's CRDs and namespaces (Kopf's `settings.scanning`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Scanning {
    /// No watching of CRDs and namespaces: the resources the cluster serves are
    /// discovered once, at start, and of `-n`'s patterns only the plain names are served,
    /// assumed to exist. For an operator that may not list CRDs or namespaces.
    pub disabled: bool,
}

/// Watch streams (Kopf's `settings.watching`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Watching {
    /// `timeoutSeconds` of the watch requests; `None`: `inactivity_timeout` less 5 s.
    pub server_timeout: Option<f64>,
    /// Seconds of silence (bookmarks included) after which a stream is reopened.
    pub inactivity_timeout: f64,
    /// The `limit` of list pages; `None`: one page.
    pub chunk_size: Option<u32>,
    /// A label selector sent with every list and watch.
    pub label_selectors: Option<String>,
    /// A field selector sent with every list and watch.
    pub field_selectors: Option<String>,
    /// A shard selector (`shardSelector`, Kubernetes' sharded lists and watches) sent
    /// with every list and watch.
    pub shard_selectors: Option<String>,
    /// List by watching (`sendInitialEvents=true`), not by paged lists.
    pub initial_streaming: bool,
    /// Seconds a watch request may last, client-side; `None`: no limit.
    pub client_timeout: Option<f64>,
    /// Seconds a watch request may wait for its answer to start; `None`:
    /// `networking.connect_timeout`, else `networking.request_timeout`.
    pub connect_timeout: Option<f64>,
    /// Seconds to pause before a stream lists again.
    pub reconnect_backoff: f64,
}

impl Default for Watching {
    fn default() -> Self {
        Watching {
            server_timeout: None,
            inactivity_timeout: 70.0,
            chunk_size: Some(500),
            label_selectors: None,
            field_selectors: None,
            shard_selectors: None,
            initial_streaming: false,
            client_timeout: None,
            connect_timeout: None,
            reconnect_backoff: 0.1,
        }
    }
}

/// Objects' processing (Kopf's `settings.queueing`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Queueing {
    /// Seconds in-flight handlers may take to finish when the operator stops.
    pub exit_timeout: f64,
    /// Seconds between attempts at an object whose processing keeps failing (an API
    /// error, say); the last one repeats; none: no pause.
    pub error_delays: Vec<f64>,
    /// How many objects of one watch stream are handled at once (Kapsel's bound on
    /// memory; Kopf's is unbounded). At least 1.
    pub objects_in_flight: u32,
    /// How many objects of all the streams together are handled at once; `None`: no
    /// bound beside `objects_in_flight`. At least 1.
    pub worker_limit: Option<u32>,
    /// Seconds an object's worker waits for the object's next event before it leaves.
    pub idle_timeout: f64,
}

impl Default for Queueing {
    fn default() -> Self {
        Queueing {
            exit_timeout: 2.0,
            error_delays: [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610]
                .map(f64::from)
                .to_vec(),
            objects_in_flight: 64,
            worker_limit: None,
            idle_timeout: 5.0,
        }
    }
}

/// Handlers' retries (Kopf's `settings.execution`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Execution {
    /// Seconds before a handler that failed with an arbitrary error is retried, unless
    /// it declares its own `backoff`.
    pub default_backoff: f64,
    /// Which of the due changing handlers and sub-handlers run in one cycle.
    pub lifecycle: Lifecycle,
}

/// Which of the due changing handlers (or sub-handlers of one handler) run in one
/// processing cycle, each cycle ending with a patch (Kopf's `kopf.lifecycles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Lifecycle {
    /// One handler, the one with the fewest retries, ties in declaration order (Kopf's
    /// default): a failing handler does not hold up the next.
    #[default]
    Asap,
    /// One handler, the first declared.
    OneByOne,
    /// Every due handler, in declaration order.
    AllAtOnce,
    /// One handler chosen at random.
    Randomized,
    /// Every due handler, in a random order.
    Shuffled,
}

impl Execution {
    /// Kopf's default backoff, 60 s.
    pub const DEFAULT_BACKOFF: f64 = 60.0;
}

impl Default for Execution {
    fn default() -> Self {
        Execution {
            default_backoff: Execution::DEFAULT_BACKOFF,
            lifecycle: Lifecycle::Asap,
        }
    }
}

/// Events (Kopf's `settings.posting`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Posting {
    /// Post the Events handlers ask for.
    pub enabled: bool,
    /// The lowest level posted: Normal Events are `info`, Warning ones `warning`, Kopf's
    /// `exception` ones `error`.
    pub level: PostingLevel,
    /// Post what changing, timer and daemon handlers log, and the operator's line about
    /// how each of their calls ended, at `level` or above, as Events with reason `Logging`
    /// (Kopf 1.44's default: no).
    pub loggers: bool,
    /// The Events' `reportingComponent` and `source.component` (Kopf's: `kopf`).
    pub reporting_component: String,
    /// The Events' `reportingInstance` (Kopf's: `dev`).
    pub reporting_instance: String,
    /// The prefix of the Events' generated names (Kopf's: `kopf-event-`).
    pub event_name_prefix: String,
}

impl Default for Posting {
    fn default() -> Self {
        Posting {
            enabled: true,
            level: PostingLevel::Info,
            loggers: false,
            // Kapsel names itself where Kopf does (`cluster::events` says why).
            reporting_component: "kapsel".to_owned(),
            reporting_instance: "kapsel".to_owned(),
            event_name_prefix: "kapsel-event-".to_owned(),
        }
    }
}

impl Posting {
    /// The longest `reportingComponent` and `reportingInstance` the API server takes
    /// (events.k8s.io's limits on `reportingController` and `reportingInstance`).
    const MAX_REPORTING_CHARS: usize = 128;

    /// The names the API server would refuse, in every Event.
    pub(super) fn check(&self) -> Result<(), SettingsError> {
        for (key, value) in [
            ("posting.reporting_component", &self.reporting_component),
            ("posting.reporting_instance", &self.reporting_instance),
        ] {
            if value.is_empty() || value.chars().count() > Posting::MAX_REPORTING_CHARS {
                return Err(SettingsError(format!(
                    "{key}: {value:?} must have 1 to {} characters",
                    Posting::MAX_REPORTING_CHARS
                )));
            }
        }
        let prefix = &self.event_name_prefix;
        // A generated name is the prefix and 5 characters, and must be a DNS subdomain.
        let valid = prefix.len() <= 253 - 5
            && prefix.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !valid {
            return Err(SettingsError(format!(
                "posting.event_name_prefix: {prefix:?} cannot start an Event's name: it takes \
                 lowercase letters, digits, '-' and '.', starts with a letter or digit, and \
                 has at most 248 characters"
            )));
        }
        Ok(())
    }
}

/// A level of Events (Kopf's `posting.level`, a logging level there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PostingLevel {
    /// Everything.
    Debug,
    /// Normal Events and above.
    Info,
    /// Warning Events and above.
    Warning,
    /// Only errors (Kopf's `exception`).
    Error,
}

/// Peering (Kopf's `settings.peering`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Peering {
    /// No debug line for each keep-alive.
    pub stealth: bool,
}
