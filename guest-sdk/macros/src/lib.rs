//! Attribute macros of `kapsel-sdk`.
