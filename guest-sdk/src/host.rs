//! The host imports, as the rest of the SDK calls them: the real host in the
//! wasm build, the thread-local fake host of `kapsel::testing` natively.

use crate::log::Level;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::Level;
    use crate::bindings::kapsel::operator::host;

    pub(super) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Debug => host::Level::Debug,
            Level::Info => host::Level::Info,
            Level::Warning => host::Level::Warning,
            Level::Error => host::Level::Error,
        };
        host::log(level, message);
    }

    pub(super) fn index_lookup(index: &str, key: &str) -> Option<Vec<String>> {
        host::index_lookup(index, key)
    }

    pub(super) fn index_keys(index: &str) -> Vec<String> {
        host::index_keys(index)
    }

    pub(super) fn post_event(object: Option<&str>, event_type: &str, reason: &str, message: &str) {
        host::post_event(object, event_type, reason, message);
    }

    pub(super) fn sleep_unless_stopped(seconds: f64) -> bool {
        host::sleep_unless_stopped(seconds)
    }
}

#[cfg(not(target_arch = "wasm32"))]
use crate::testing::fake as imp;

pub(crate) fn log(level: Level, message: &str) {
    imp::log(level, message);
}

pub(crate) fn index_lookup(index: &str, key: &str) -> Option<Vec<String>> {
    imp::index_lookup(index, key)
}

pub(crate) fn index_keys(index: &str) -> Vec<String> {
    imp::index_keys(index)
}

pub(crate) fn post_event(object: Option<&str>, event_type: &str, reason: &str, message: &str) {
    imp::post_event(object, event_type, reason, message);
}

pub(crate) fn sleep_unless_stopped(seconds: f64) -> bool {
    imp::sleep_unless_stopped(seconds)
}
