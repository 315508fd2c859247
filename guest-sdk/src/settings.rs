//! The operator's settings (Kopf's `settings` kwarg, `kopf.OperatorSettings`): every
//! handler may read them; a startup handler may change them before the operator starts,
//! as a Kopf operator does in `@kopf.on.startup`.
//!
//! ```
//! // Kopf:
//! // @kopf.on.startup()
//! // def configure(settings: kopf.OperatorSettings, **_):
//! //     settings.watching.server_timeout = 60
//! //     settings.posting.level = logging.WARNING
//! #[kapsel::on::startup]
//! fn configure() -> kapsel::Result<()> {
//!     kapsel::settings::set("watching.server_timeout", 60)?;
//!     kapsel::settings::merge(kapsel::json!({"posting": {"level": "warning"}}))?;
//!     Ok(())
//! }
//! # kapsel::testing::reset();
//! # configure().unwrap();
//! # assert_eq!(kapsel::testing::settings()["watching"]["server_timeout"], 60);
//! ```
//!
//! The names are Kopf's (`watching.label_selectors`, `queueing.exit_timeout`, ...);
//! durations are seconds; the host's documentation lists the settings it has (`kapsel run
//! --help`, `kapsel_host::Settings`). Unlike Kopf, which accepts any attribute and value,
//! the host checks each change: an unknown name or a value that does not fit is refused
//! with what is wrong, as a [`PermanentError`], so that `?` fails
//! the startup handler for good (a wrong setting does not fix itself on a retry), and with
//! it the operator's start. A change from any other handler, or from a startup handler of
//! a guest reloaded while the operator runs, is refused the same way: the settings are in
//! force then (in Kopf such a change has no effect).
//!
//! In native tests (`kapsel::testing`), the fake host keeps the settings a test gives it
//! (`testing::set_settings`; an empty object otherwise) and merges changes into them
//! unchecked; `testing::settings()` returns them.

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, PermanentError, Result};
use crate::host;

/// The operator's settings as a JSON object of sections (`watching`, `queueing`,
/// `persistence`, `posting`, `peering`), every key with its value: for a startup handler,
/// with the changes made so far; for any other handler, the settings in force.
///
/// # Errors
/// Never with the host; an error would mean that its answer is not JSON.
pub fn get() -> Result<Value> {
    serde_json::from_str(&host::settings()).map_err(|e| Error::msg(format!("the settings: {e}")))
}

/// Changes one setting by its dotted key (`"watching.server_timeout"`) to `value` (`60`,
/// `"app=web"`, `None` for none): Kopf's `settings.watching.server_timeout = 60`.
///
/// # Errors
/// A [`PermanentError`]: an unknown key, a value that does not
/// fit, or not a startup handler (see the module's documentation).
pub fn set(key: &str, value: impl Serialize) -> Result<()> {
    let value = serde_json::to_value(value)
        .map_err(|e| PermanentError::new(format!("{key}: the value is not JSON: {e}")))?;
    let change = key.rsplit('.').fold(value, |change, part| {
        Value::Object([(part.to_owned(), change)].into_iter().collect())
    });
    merge(change)
}

/// Merges a JSON object of changes into the settings, key by key
/// (`json!({"watching": {"server_timeout": 60}, "queueing": {"exit_timeout": 5}})`); the
/// keys not in it keep their values. All or nothing: a refused change changes nothing.
///
/// # Errors
/// A [`PermanentError`]: an unknown key, a value that does not
/// fit, or not a startup handler (see the module's documentation).
pub fn merge(changes: Value) -> Result<()> {
    host::merge_settings(&changes.to_string())
        .map_err(|refused| Error::from(PermanentError::new(refused)))
}
