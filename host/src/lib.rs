//! The Kapsel host.
