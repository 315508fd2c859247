//! The Kapsel guest SDK.
