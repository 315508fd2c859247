//! Handler attributes, as Kopf's `@kopf.on.*` decorators.
//!
//! Each takes a resource selector in any form of Kopf's (KOPF.md §2.1) and the
//! options of its kind; several may be stacked on one function. See the crate
//! documentation for the full syntax.
//!
//! | attribute | Kopf | extra options |
//! |---|---|---|
//! | [`event`] | `@kopf.on.event` | (no `errors`/`timeout`/`retries`/`backoff`) |
//! | [`create`] | `@kopf.on.create` | |
//! | [`update`] | `@kopf.on.update` | `old`, `new` |
//! | [`delete`] | `@kopf.on.delete` | `optional` |
//! | [`resume`] | `@kopf.on.resume` | `deleted` |
//! | [`field`] | `@kopf.on.field` | `field` (required), `old`, `new` |
//! | [`timer`] | `@kopf.timer` | `interval`, `initial_delay`, `idle`, `sharp` |
//! | [`daemon`] | `@kopf.daemon` | `initial_delay`, `cancellation_backoff`, `cancellation_timeout`, `cancellation_polling` |
//! | [`probe`], [`startup`], [`cleanup`] | `@kopf.on.probe`, `.startup`, `.cleanup` | no selector, no filters |
//! | [`login`] | `@kopf.on.login` | no selector, no filters; returns a [`ConnectionInfo`](crate::ConnectionInfo) |
//!
//! A login handler is called before anything touches the cluster (before the startup
//! handlers, which may call the cluster through it), and again whenever the API server
//! refuses its credentials (401) or they expire; it has no cluster access itself (its
//! Kubernetes calls answer `NotAvailable`: the client it would use is the one being made).
//! When any guest declares one, login handlers are the operator's only way in; without
//! them, the operator uses the kubeconfig, the in-cluster account, or the client it was
//! given.

pub use kapsel_sdk_macros::{
    cleanup, create, daemon, delete, event, field, login, probe, resume, startup, timer, update,
};
