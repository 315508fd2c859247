//! [`SettingsError`]: why a setting cannot be set.

/// A setting that cannot be set: an unknown key, a value of the wrong type, or out of
/// range. Its text says which and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub(super) String);
