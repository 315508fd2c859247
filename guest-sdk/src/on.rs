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
//! | [`validate`], [`mutate`] | `@kopf.on.validate`, `@kopf.on.mutate` | `operations`, `subresource`, `persistent`, `side_effects`, `ignore_failures` (no `errors`/`timeout`/`retries`/`backoff`) |
//!
//! A login handler is called before anything touches the cluster (before the startup
//! handlers, which may call the cluster through it), and again whenever the API server
//! refuses its credentials (401) or they expire; it has no cluster access itself (its
//! Kubernetes calls answer `NotAvailable`: the client it would use is the one being made).
//! When any guest declares one, login handlers are the operator's only way in; without
//! them, the operator uses the kubeconfig, the in-cluster account, or the client it was
//! given.
//!
//! An admission handler is called by the host's admission webhook for each write of a
//! matching object, before the API server stores it: a validating one allows the write by
//! returning successfully and refuses it by failing (with a
//! [`kapsel::AdmissionError`](crate::AdmissionError) for its message and HTTP code, 500
//! otherwise, as Kopf); a mutating one changes the object through [`Cause::patch`](crate::Cause::patch).
//! Its cause's reason is [`Reason::Validating`](crate::Reason::Validating) or
//! [`Reason::Mutating`](crate::Reason::Mutating), its body the object written (the old one
//! on `DELETE`), `old()` and `new()` the review's old object and object; the request
//! (operation, user, dry run) is [`Cause::admission`](crate::Cause::admission). It is
//! called once per review, never retried; its filters select the objects as for any
//! handler. See [`kapsel::admission`](crate::admission).

pub use kapsel_sdk_macros::{
    cleanup, create, daemon, delete, event, field, login, mutate, probe, resume, startup, timer,
    update, validate,
};
