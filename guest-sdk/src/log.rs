//! Logging to the host (Kopf's `logger`): `kapsel::debug!`, `info!`, `warn!`, `error!`.

use crate::host;

pub use crate::host::Level;

/// Sends one log line to the host (the logging macros' target).
#[doc(hidden)]
pub fn log(level: Level, message: &str) {
    host::log(level, message);
}

/// Logs at debug level: `kapsel::debug!("seen {name}")`. The host attaches the
/// handler id and the object's reference.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Debug, &::std::format!($($arg)+)) };
}

/// Logs at info level: `kapsel::info!("created {name}")`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Info, &::std::format!($($arg)+)) };
}

/// Logs at warning level: `kapsel::warn!("odd spec: {spec}")`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Warning, &::std::format!($($arg)+)) };
}

/// Logs at error level: `kapsel::error!("cannot do {what}")`.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Error, &::std::format!($($arg)+)) };
}
