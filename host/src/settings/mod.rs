//! [`Settings`]: what Kopf's `settings` (`kopf.OperatorSettings`) lets an operator's
//! author change, as one model that the command line (`--setting KEY=VALUE`), the
//! embedding API (`Operator::settings`) and startup handlers (the WIT `settings`
//! interface, `kapsel::settings`) read and write; `SharedSettings`: the settings while
//! the operator runs, which startup handlers change before they are in force.
//! Kopf's persistence storages are the section `persistence` (a `Persistence`; on the
//! command line also `--prefix`, `--finalizer`, `--progress-storage`, ...).
//!
//! The names are Kopf's (`watching.server_timeout`); durations are seconds, as in Kopf.
//! Bounds on the guests are not settings but `Limits`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::persistence::Persistence;

mod error;
mod sections;

pub use error::SettingsError;
pub use sections::{
    Execution, Lifecycle, Networking, Peering, Posting, PostingLevel, Queueing, Scanning, Watching,
};

/// The operator's settings, with Kopf 1.45's defaults unless a field says otherwise.
/// Build one with [`Settings::default`] and change fields, or by key with
/// [`Settings::set`] (`"watching.server_timeout"`, `"60"`), or merge a JSON object
/// with [`Settings::merge`] (`{"queueing": {"exit_timeout": 5}}`): each checks names and
/// types and says what is wrong. The guests' startup handlers merge their changes the
/// same way (`kapsel::settings` in a guest) before the operator runs with them.
///
/// | key | default | what it does |
/// |---|---|---|
/// | `watching.server_timeout` | none | `timeoutSeconds` of watch requests (none: `inactivity_timeout` less 5 s) |
/// | `watching.inactivity_timeout` | 70 | a watch stream silent this long (bookmarks included) is reopened |
/// | `watching.chunk_size` | 500 (Kopf: none) | `limit` of the list pages (none: one page) |
/// | `watching.label_selectors` | none | a label selector (`app=web,tier!=db`) every watch sends: objects without it are not seen at all |
/// | `watching.field_selectors` | none | a field selector (`metadata.name!=skip`) every watch sends |
/// | `watching.shard_selectors` | none | a shard selector (`shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`, ranges joined by `\|\|`) every list and watch sends (Kubernetes 1.36+ with `ShardedListAndWatch`): the server sends only the objects whose uid (or namespace) hashes into the ranges, so operators with complementary ranges share the objects; a server without the feature ignores it (every object is seen) |
/// | `watching.initial_streaming` | false | list by watching (`sendInitialEvents`, Kubernetes 1.27+) instead of paged lists |
/// | `watching.client_timeout` | none | the longest a watch request may last, client-side (none: no limit); it is then reopened from where it was |
/// | `watching.connect_timeout` | none | how long a watch request may wait for its answer to start (none: `networking.connect_timeout`, else `networking.request_timeout`) |
/// | `watching.reconnect_backoff` | 0.1 | the pause before a stream lists again (after its watch history expired or its listing failed) |
/// | `networking.request_timeout` | 300 | the longest a request other than a watch may take, its answer read (none: no limit) |
/// | `networking.connect_timeout` | none | how long a request may wait for its answer to start: the connection, then the server's first byte (none: only `request_timeout`) |
/// | `networking.error_backoffs` | 1, 1, 2, 3, 5, 8, 13, 21 | the pauses between the attempts of the operator's own writes (patches, Events) that failed for a reason worth retrying (a connection error, a timeout, 5xx, 403, 429): one attempt more than pauses |
/// | `networking.enforce_retry_after` | false | after a 429, pause as long as the server's `retryAfterSeconds` says even when it is shorter than the backoff (else the longer of the two) |
/// | `execution.default_backoff` | 60 | seconds before a handler that failed with an arbitrary error (not a `TemporaryError` with its own delay) is retried, unless it declares its `backoff` |
/// | `execution.lifecycle` | `asap` | which of the due changing handlers (and sub-handlers) run in one cycle, each cycle ending with a patch: `asap` (one, the fewest retries first), `one_by_one` (the first declared), `all_at_once` (all), `randomized` (one at random), `shuffled` (all, in random order). Kopf: `kopf.operator(lifecycle=…)`, `kopf.set_default_lifecycle()` |
/// | `queueing.exit_timeout` | 2 | how long in-flight handlers may take to finish when stopping |
/// | `queueing.error_delays` | 1, 1, 2, 3, 5, … 610 | the pauses of an object whose processing keeps failing (Kopf's throttling) |
/// | `queueing.objects_in_flight` | 64 (Kapsel's) | how many objects of one watch stream are handled at once (Kopf: unbounded) |
/// | `queueing.worker_limit` | none | how many objects of all streams together are handled at once (none: no bound but `objects_in_flight`'s). Kopf's bounds the workers of one stream, idle ones included |
/// | `queueing.idle_timeout` | 5 | seconds an object's worker waits for its next event before it leaves (the next event starts a new one) |
/// | `queueing.batch_window` | — | accepted and ignored, with a warning, as Kopf 1.45 does (time-based batching was removed) |
/// | `batching.*` | — | Kopf's deprecated name of `queueing.*`: accepted as it, with a warning |
/// | `persistence.finalizer` | `kopf.zalando.org/KopfFinalizerMarker` | the finalizer that holds an object until its deletion handlers are done |
/// | `persistence.progress_storage` | `{smart: {}}` | where handlers' progress is kept: `{annotations: {prefix, touch_key, v1, verbose}}`, `{status: {field, touch_field}}`, `{smart: {annotations, status}}`, `{multi: [...]}` (a name alone, `status`, takes the defaults) |
/// | `persistence.diffbase_storage` | `{annotations: {}}` | where the last handled essence is kept: `{annotations: {prefix, key, v1, ignored_fields}}`, `{status: {field, ignored_fields}}`, `{multi: [...]}` |
/// | `persistence.consistency_timeout` | 5 | how long to wait for the operator's own patch to come back before going on |
/// | `posting.enabled` | true | post the Events handlers ask for (`kapsel::events`) |
/// | `posting.level` | `info` | the lowest level posted: `debug`, `info` (Normal Events), `warning`, `error` |
/// | `posting.loggers` | false | post what changing, timer and daemon handlers log, and the operator's line about how each of their calls ended, at `posting.level` or above, as Events too, with reason `Logging` and a type by level (`Debug`, `Normal`, `Warning`, `Error`); never for event and index handlers |
/// | `posting.reporting_component` | `kapsel` (Kopf: `kopf`) | the Events' `reportingComponent` and `source.component` (at most 128 characters) |
/// | `posting.reporting_instance` | `kapsel` (Kopf: `dev`) | the Events' `reportingInstance` (at most 128 characters) |
/// | `posting.event_name_prefix` | `kapsel-event-` (Kopf: `kopf-event-`) | the prefix of the Events' generated names (lowercase letters, digits, `-` and `.`) |
/// | `peering.stealth` | false | no debug line for each keep-alive |
/// | `scanning.disabled` | false | no watching of CRDs and namespaces while the operator runs: resources are discovered once, at start, and only the plainly named namespaces of `-n` are served (for an operator without cluster-wide list rights) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {
    /// Watch streams (Kopf's `settings.watching`).
    pub watching: Watching,
    /// Objects' processing (Kopf's `settings.queueing`).
    pub queueing: Queueing,
    /// Handlers' retries (Kopf's `settings.execution`).
    pub execution: Execution,
    /// The state kept on objects (Kopf's `settings.persistence`).
    pub persistence: Persistence,
    /// Events (Kopf's `settings.posting`).
    pub posting: Posting,
    /// Peering (Kopf's `settings.peering`; its name, priority and lifetime are set as
    /// the operator's peering, `Operator::peering`).
    pub peering: Peering,
    /// Following the cluster's CRDs and namespaces (Kopf's `settings.scanning`).
    pub scanning: Scanning,
    /// Requests to the API server (Kopf's `settings.networking`).
    pub networking: Networking,
}

impl Settings {
    /// Sets one setting by its dotted key (`watching.server_timeout`); the value is read
    /// as YAML (`60`, `1.5`, `true`, `app=web`, `[1, 2, 3]`, `null`).
    ///
    /// # Errors
    /// An unknown key (the error lists the known ones) or a value that does not fit.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SettingsError> {
        let value: Value = serde_yaml::from_str(value)
            .map_err(|e| SettingsError(format!("{key}: {value:?} is not a value: {e}")))?;
        let mut change = value;
        for part in key.rsplit('.') {
            change = Value::Object([(part.to_owned(), change)].into_iter().collect());
        }
        self.merge(&change)
    }

    /// Merges a JSON object of changes into the settings, key by key
    /// (`{"watching": {"server_timeout": 60}}`): the keys not in it keep their values.
    ///
    /// # Errors
    /// An unknown key (the error lists the known ones) or a value that does not fit;
    /// the settings are then left as they were.
    pub fn merge(&mut self, changes: &Value) -> Result<(), SettingsError> {
        let changes = &without_deprecated(changes)?;
        let mut whole = serde_json::to_value(&*self)
            .map_err(|e| SettingsError(format!("the settings cannot be written: {e}")))?;
        merge_into(&mut whole, changes, "")?;
        let merged: Settings = serde_json::from_value(whole)
            .map_err(|e| SettingsError(format!("{e} (in {changes})")))?;
        merged.check()?;
        *self = merged;
        Ok(())
    }

    /// The settings as JSON, as a startup handler and `--help` show them.
    #[must_use]
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The ranges serde does not check.
    fn check(&self) -> Result<(), SettingsError> {
        let seconds = [
            (
                "watching.inactivity_timeout",
                Some(self.watching.inactivity_timeout),
            ),
            ("watching.server_timeout", self.watching.server_timeout),
            ("queueing.exit_timeout", Some(self.queueing.exit_timeout)),
            ("queueing.idle_timeout", Some(self.queueing.idle_timeout)),
            (
                "execution.default_backoff",
                Some(self.execution.default_backoff),
            ),
            (
                "persistence.consistency_timeout",
                Some(self.persistence.consistency_timeout),
            ),
            (
                "watching.reconnect_backoff",
                Some(self.watching.reconnect_backoff),
            ),
        ];
        let delays = self
            .queueing
            .error_delays
            .iter()
            .map(|d| ("queueing.error_delays", Some(*d)));
        let backoffs = self
            .networking
            .error_backoffs
            .iter()
            .map(|d| ("networking.error_backoffs", Some(*d)));
        // A limit of no time fails every request: only a positive one is a limit.
        let limits = [
            (
                "networking.request_timeout",
                self.networking.request_timeout,
            ),
            (
                "networking.connect_timeout",
                self.networking.connect_timeout,
            ),
            ("watching.client_timeout", self.watching.client_timeout),
            ("watching.connect_timeout", self.watching.connect_timeout),
        ];
        for (key, value) in limits {
            if let Some(value) = value
                && (value <= 0.0 || Duration::try_from_secs_f64(value).is_err())
            {
                return Err(SettingsError(format!(
                    "{key}: {value} is not a time limit (a number of seconds above 0, or null \
                     for none)"
                )));
            }
        }
        for (key, value) in seconds.into_iter().chain(delays).chain(backoffs) {
            if let Some(value) = value
                && Duration::try_from_secs_f64(value).is_err()
            {
                return Err(SettingsError(format!(
                    "{key}: {value} is not a number of seconds (0 or more)"
                )));
            }
        }
        self.persistence
            .check()
            .map_err(|e| SettingsError(format!("persistence: {e}")))?;
        if self.queueing.objects_in_flight == 0 {
            return Err(SettingsError(
                "queueing.objects_in_flight: at least 1 object must be handled at once".into(),
            ));
        }
        self.posting.check()?;
        if self
            .watching
            .shard_selectors
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            return Err(SettingsError(
                "watching.shard_selectors: an empty shard selector names no shard (the API \
                 server refuses a blank one); leave it unset (null) to see every object"
                    .into(),
            ));
        }
        if self.queueing.worker_limit == Some(0) {
            return Err(SettingsError(
                "queueing.worker_limit: at least 1 object must be handled at once \
                 (none: no bound)"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// `changes` without Kopf's deprecated names, each with a warning, as Kopf 1.45 warns:
/// `batching` is `queueing` (renamed in Kopf 1.29), and `queueing.batch_window` has no
/// effect (time-based batching was removed in Kopf 1.42). What `queueing` itself says
/// wins over what `batching` says.
fn without_deprecated(changes: &Value) -> Result<Value, SettingsError> {
    let mut changes = changes.clone();
    let Value::Object(groups) = &mut changes else {
        return Ok(changes);
    };
    if let Some(batching) = groups.remove("batching") {
        let Value::Object(batching) = batching else {
            return Err(SettingsError(
                "batching is a group of settings, not a value".into(),
            ));
        };
        for key in batching.keys() {
            tracing::warn!(
                "Batching settings are queueing settings now: batching.{key} is read as \
                 queueing.{key}; please rename it."
            );
        }
        let queueing = groups
            .entry("queueing")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        let Value::Object(queueing) = queueing else {
            return Err(SettingsError(
                "queueing is a group of settings, not a value".into(),
            ));
        };
        for (key, value) in batching {
            queueing.entry(key).or_insert(value);
        }
    }
    if let Some(Value::Object(queueing)) = groups.get_mut("queueing")
        && let Some(window) = queueing.remove("batch_window")
    {
        if window.as_f64().is_none_or(|w| !(w >= 0.0 && w.is_finite())) {
            return Err(SettingsError(format!(
                "queueing.batch_window: {window} is not a number of seconds (0 or more)"
            )));
        }
        tracing::warn!(
            "queueing.batch_window has no effect: time-based event batching was removed \
             (as in Kopf 1.45); please stop setting it."
        );
    }
    Ok(changes)
}

/// The operator's settings while it runs, shared by every handler call (cheap to clone):
/// open to startup handlers' changes while the operator starts, then in force (Kopf's
/// `settings` kwarg, changed in `@kopf.on.startup`; changes after that have no effect
/// there, and are refused here).
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedSettings(Arc<Mutex<Phase>>);

#[derive(Debug, Default)]
struct Phase {
    settings: Settings,
    /// Taken into the operator's parts: no change has an effect any more.
    in_force: bool,
}

impl SharedSettings {
    /// Starts over with `settings`, open to changes (the operator starts).
    pub(crate) fn start_with(&self, settings: Settings) {
        *self.lock() = Phase {
            settings,
            in_force: false,
        };
    }

    /// The settings as JSON, as a handler reads them.
    pub(crate) fn to_json(&self) -> Value {
        self.lock().settings.to_json()
    }

    /// What `read` reads of the settings as they are now (the HTTP client reads its
    /// timeouts at each request, so a startup handler's change applies to the next one).
    pub(crate) fn read<T>(&self, read: impl FnOnce(&Settings) -> T) -> T {
        read(&self.lock().settings)
    }

    /// Merges a startup handler's changes ([`Settings::merge`]).
    ///
    /// # Errors
    /// What is wrong with the changes, or that the settings are in force already.
    pub(crate) fn merge(&self, changes: &Value) -> Result<(), SettingsError> {
        let mut phase = self.lock();
        if phase.in_force {
            return Err(SettingsError(
                "the operator has started and its settings are in force: only the startup \
                 handlers that run before it starts may change them (in Kopf too, changes \
                 made later have no effect)"
                    .into(),
            ));
        }
        phase.settings.merge(changes)
    }

    /// The settings as they are now, from now on in force: later changes are refused.
    pub(crate) fn put_in_force(&self) -> Settings {
        let mut phase = self.lock();
        phase.in_force = true;
        phase.settings.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        // A panic while holding it leaves whole settings: every write replaces them whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The settings a change replaces rather than merges into: values of several shapes.
const REPLACED_WHOLE: [&str; 2] = [
    "persistence.progress_storage",
    "persistence.diffbase_storage",
];

/// Merges `changes` into `whole`, refusing keys `whole` does not have.
fn merge_into(whole: &mut Value, changes: &Value, at: &str) -> Result<(), SettingsError> {
    let (Value::Object(known), Value::Object(changes)) = (&mut *whole, changes) else {
        *whole = changes.clone();
        return Ok(());
    };
    for (key, change) in changes {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        let Some(slot) = known.get_mut(key) else {
            let names: Vec<String> = known
                .keys()
                .map(|k| {
                    if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    }
                })
                .collect();
            return Err(SettingsError(format!(
                "unknown setting {path} (known: {})",
                names.join(", ")
            )));
        };
        if REPLACED_WHOLE.contains(&path.as_str()) {
            // A storage is one of several shapes: a change names its shape, and the
            // fields it leaves out take that shape's defaults.
            *slot = change.clone();
            continue;
        }
        if slot.is_object() && !change.is_object() {
            return Err(SettingsError(format!(
                "{path} is a group of settings, not a value"
            )));
        }
        merge_into(slot, change, &path)?;
    }
    Ok(())
}

/// Seconds as a [`Duration`]; [`Settings::check`] refused what does not fit.
pub(crate) fn seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_are_set_by_key_and_merged_by_object() {
        let mut settings = Settings::default();
        settings.set("watching.server_timeout", "60").unwrap();
        settings.set("watching.label_selectors", "app=web").unwrap();
        settings.set("queueing.error_delays", "[1, 2.5]").unwrap();
        settings.set("posting.level", "warning").unwrap();
        settings
            .merge(&json!({"queueing": {"exit_timeout": 5}, "peering": {"stealth": true}}))
            .unwrap();
        assert_eq!(settings.watching.server_timeout, Some(60.0));
        assert_eq!(
            settings.watching.label_selectors.as_deref(),
            Some("app=web")
        );
        assert_eq!(settings.watching.inactivity_timeout, 70.0, "untouched");
        assert_eq!(settings.queueing.error_delays, [1.0, 2.5]);
        assert_eq!(settings.queueing.exit_timeout, 5.0);
        assert_eq!(settings.posting.level, PostingLevel::Warning);
        assert!(settings.peering.stealth);
        settings.set("watching.chunk_size", "null").unwrap();
        assert_eq!(settings.watching.chunk_size, None);
    }

    /// Kopf 1.45's `watching.shard_selectors`, kube's `shardSelector` text as it is (a
    /// YAML plain scalar, quotes and `||` in it), checked only for being there.
    #[test]
    fn a_shard_selector_is_a_setting() {
        let mut settings = Settings::default();
        assert_eq!(settings.watching.shard_selectors, None, "Kopf's default");
        let halves = "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') \
                      || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')";
        settings.set("watching.shard_selectors", halves).unwrap();
        assert_eq!(settings.watching.shard_selectors.as_deref(), Some(halves));
        assert_eq!(
            settings.to_json()["watching"]["shard_selectors"],
            json!(halves)
        );
        let refused = settings
            .set("watching.shard_selectors", "' '")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("watching.shard_selectors"), "{refused}");
        assert_eq!(
            settings.watching.shard_selectors.as_deref(),
            Some(halves),
            "kept"
        );
        settings
            .merge(&json!({"watching": {"shard_selectors": null}}))
            .unwrap();
        assert_eq!(settings.watching.shard_selectors, None);
    }

    #[test]
    fn shared_settings_take_changes_until_they_are_in_force() {
        let shared = SharedSettings::default();
        let mut given = Settings::default();
        given.posting.level = PostingLevel::Warning;
        shared.start_with(given);
        shared
            .merge(&json!({"watching": {"server_timeout": 60}}))
            .unwrap();
        let wrong = shared.merge(&json!({"watching": {"nonsense": 1}}));
        assert!(wrong.unwrap_err().to_string().contains("unknown setting"));
        let in_force = shared.put_in_force();
        assert_eq!(in_force.watching.server_timeout, Some(60.0));
        assert_eq!(in_force.posting.level, PostingLevel::Warning, "kept");
        let late = shared.merge(&json!({"peering": {"stealth": true}}));
        assert!(late.unwrap_err().to_string().contains("in force"));
        assert_eq!(shared.to_json()["peering"]["stealth"], json!(false));
        assert_eq!(shared.to_json()["watching"]["server_timeout"], json!(60.0));
    }

    #[test]
    fn wrong_settings_say_what_is_wrong_and_change_nothing() {
        let mut settings = Settings::default();
        let error = |result: Result<(), SettingsError>| result.unwrap_err().to_string();
        let unknown = error(settings.set("watching.server_timeut", "1"));
        assert!(
            unknown.contains("unknown setting watching.server_timeut")
                && unknown.contains("watching.server_timeout"),
            "{unknown}"
        );
        assert!(error(settings.set("nothing", "1")).contains("known: watching, queueing"));
        let typed = error(settings.set("watching.inactivity_timeout", "soon"));
        assert!(typed.contains("invalid type"), "{typed}");
        let negative = error(settings.set("queueing.exit_timeout", "-1"));
        assert!(negative.contains("queueing.exit_timeout: -1"), "{negative}");
        assert!(error(settings.set("queueing.objects_in_flight", "0")).contains("at least 1"));
        assert!(error(settings.set("posting.level", "loud")).contains("unknown variant"));
        assert!(error(settings.set("watching", "1")).contains("a group of settings"));
        let no_time = error(settings.set("networking.request_timeout", "0"));
        assert!(no_time.contains("not a time limit"), "{no_time}");
        assert!(error(settings.set("watching.client_timeout", "-5")).contains("-5"));
        assert!(error(settings.set("networking.error_backoffs", "[1, -1]")).contains("-1"));
        assert!(error(settings.set("watching.reconnect_backoff", "-0.1")).contains("-0.1"));
        assert!(error(settings.set("queueing.worker_limit", "0")).contains("at least 1"));
        let idle = error(settings.set("queueing.idle_timeout", "-5"));
        assert!(idle.contains("queueing.idle_timeout: -5"), "{idle}");
        let lifecycle = error(settings.set("execution.lifecycle", "sometimes"));
        assert!(
            lifecycle.contains("unknown variant `sometimes`") && lifecycle.contains("one_by_one"),
            "{lifecycle}"
        );
        let window = error(settings.set("queueing.batch_window", "soon"));
        assert!(window.contains("queueing.batch_window"), "{window}");
        assert!(error(settings.set("batching", "1")).contains("a group of settings"));
        assert!(error(settings.set("batching.nonsense", "1")).contains("unknown setting"));
        let prefix = error(settings.set("posting.event_name_prefix", "Kopf_Event-"));
        assert!(prefix.contains("posting.event_name_prefix"), "{prefix}");
        let long = "x".repeat(129);
        assert!(
            error(settings.set("posting.reporting_instance", &long)).contains("1 to 128"),
            "too long"
        );
        assert!(error(settings.set("posting.reporting_component", "''")).contains("1 to 128"));
        assert_eq!(settings, Settings::default());
        settings.set("networking.request_timeout", "null").unwrap();
        settings.set("networking.error_backoffs", "[]").unwrap();
        assert_eq!(settings.networking.request_timeout, None, "no limit");
    }

    #[test]
    fn lifecycles_queueing_and_loggers_are_settings() {
        let mut settings = Settings::default();
        assert_eq!(
            settings.execution.lifecycle,
            Lifecycle::Asap,
            "Kopf's default"
        );
        for (name, lifecycle) in [
            ("one_by_one", Lifecycle::OneByOne),
            ("all_at_once", Lifecycle::AllAtOnce),
            ("randomized", Lifecycle::Randomized),
            ("shuffled", Lifecycle::Shuffled),
            ("asap", Lifecycle::Asap),
        ] {
            settings.set("execution.lifecycle", name).unwrap();
            assert_eq!(settings.execution.lifecycle, lifecycle);
            assert_eq!(settings.to_json()["execution"]["lifecycle"], json!(name));
        }
        assert_eq!(
            settings.queueing.worker_limit, None,
            "Kopf's default: no bound"
        );
        settings.set("queueing.worker_limit", "3").unwrap();
        settings.set("queueing.idle_timeout", "0.5").unwrap();
        settings.set("posting.loggers", "true").unwrap();
        assert_eq!(settings.queueing.worker_limit, Some(3));
        assert_eq!(settings.queueing.idle_timeout, 0.5);
        assert!(settings.posting.loggers);
        settings.set("queueing.worker_limit", "null").unwrap();
        assert_eq!(settings.queueing.worker_limit, None);
        settings.set("posting.reporting_component", "kopf").unwrap();
        settings.set("posting.reporting_instance", "dev").unwrap();
        settings
            .set("posting.event_name_prefix", "kopf-event-")
            .unwrap();
        assert_eq!(
            (
                settings.posting.reporting_component.as_str(),
                settings.posting.reporting_instance.as_str(),
                settings.posting.event_name_prefix.as_str()
            ),
            ("kopf", "dev", "kopf-event-")
        );
    }

    /// The warnings logged while `f` runs.
    fn warnings(f: impl FnOnce()) -> Vec<String> {
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::layer::SubscriberExt;

        #[derive(Clone, Default)]
        struct Warnings(Arc<Mutex<Vec<String>>>);
        impl tracing::field::Visit for Warnings {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0.lock().unwrap().push(format!("{value:?}"));
                }
            }
        }
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                if *event.metadata().level() == tracing::Level::WARN {
                    event.record(&mut self.clone());
                }
            }
        }
        let seen = Warnings::default();
        let subscriber = tracing_subscriber::registry().with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            // Another test may have met these callsites first, without a subscriber, and
            // cached that nobody listens: ask again, now that this one does.
            tracing::callsite::rebuild_interest_cache();
            f();
        });
        seen.0.lock().unwrap().clone()
    }

    /// Kopf 1.45 warns (`DeprecationWarning`) at both names; so does Kapsel, in its log.
    #[test]
    fn kopfs_deprecated_names_are_warned_about() {
        let mut settings = Settings::default();
        let renamed = warnings(|| settings.set("batching.worker_limit", "2").unwrap());
        assert_eq!(
            renamed,
            [
                "Batching settings are queueing settings now: batching.worker_limit is read as \
              queueing.worker_limit; please rename it."
            ]
        );
        let ignored = warnings(|| settings.set("queueing.batch_window", "0.1").unwrap());
        assert_eq!(ignored.len(), 1);
        assert!(
            ignored[0].contains("batch_window has no effect"),
            "{ignored:?}"
        );
        assert!(warnings(|| settings.set("queueing.worker_limit", "3").unwrap()).is_empty());
    }

    #[test]
    fn kopfs_deprecated_batching_names_are_read_as_queueing() {
        let mut settings = Settings::default();
        settings.set("batching.worker_limit", "2").unwrap();
        settings.set("batching.idle_timeout", "1.5").unwrap();
        assert_eq!(settings.queueing.worker_limit, Some(2));
        assert_eq!(settings.queueing.idle_timeout, 1.5);
        let before = settings.clone();
        settings.set("queueing.batch_window", "0.3").unwrap();
        settings.set("batching.batch_window", "0.3").unwrap();
        assert_eq!(settings, before, "no effect");
        settings
            .merge(&json!({"batching": {"exit_timeout": 7, "idle_timeout": 9},
                           "queueing": {"idle_timeout": 3}}))
            .unwrap();
        assert_eq!(settings.queueing.exit_timeout, 7.0);
        assert_eq!(settings.queueing.idle_timeout, 3.0, "queueing's own wins");
        assert!(settings.to_json().get("batching").is_none());
    }

    #[test]
    fn storages_are_set_by_their_shape_or_name_and_replaced_whole() {
        use crate::persistence::{AnnotationsDiffBase, DiffBaseStorage, ProgressStorage};
        let mut settings = Settings::default();
        settings
            .set(
                "persistence.progress_storage",
                "{status: {field: status.op.progress}}",
            )
            .unwrap();
        let ProgressStorage::Status(status) = &settings.persistence.progress_storage else {
            panic!(
                "replaced whole: {:?}",
                settings.persistence.progress_storage
            );
        };
        assert_eq!(status.field, "status.op.progress");
        assert_eq!(
            status.touch_field, "status.kopf.dummy",
            "the shape's default"
        );
        settings
            .merge(
                &json!({"persistence": {"diffbase_storage": {"multi": ["annotations", "status"]}}}),
            )
            .unwrap();
        let DiffBaseStorage::Multi(storages) = &settings.persistence.diffbase_storage else {
            panic!("{:?}", settings.persistence.diffbase_storage);
        };
        assert_eq!(
            storages[0],
            DiffBaseStorage::Annotations(AnnotationsDiffBase::default())
        );
        assert_eq!(
            settings.to_json()["persistence"]["progress_storage"]["status"]["field"],
            json!("status.op.progress")
        );
        let before = settings.clone();
        let error = |result: Result<(), SettingsError>| result.unwrap_err().to_string();
        assert!(
            error(settings.set("persistence.progress_storage", "files"))
                .contains("unknown variant `files`")
        );
        assert!(
            error(settings.set("persistence.diffbase_storage", "{multi: []}"))
                .contains("a multi storage holds no storage")
        );
        assert!(
            error(settings.set(
                "persistence.progress_storage",
                "{annotations: {prefix: Not_DNS}}"
            ))
            .contains("Not_DNS")
        );
        assert_eq!(settings, before, "nothing changed");
    }
}
