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

pub use kapsel_sdk_macros::{
    cleanup, create, daemon, delete, event, field, probe, resume, startup, timer, update,
};
