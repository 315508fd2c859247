//! The Kapsel host: runs Kubernetes operators whose handlers are sandboxed
//! WebAssembly components, with Kopf's programming model.
//!
//! Applications embed an operator with [`Operator`] (in their tokio runtime, or in a
//! thread of its own with [`Operator::spawn`]). The `kapsel` command (crate `kapsel-cli`)
//! is a thin shell over this library; with the `testing` feature, [`testing`] runs
//! operators on an in-memory cluster (and `kapsel test`'s case files and replays).
//!
//! ```no_run
//! # async fn demo() -> Result<(), kapsel_host::Error> {
//! let operator = kapsel_host::Operator::new(["handlers/"]).all_namespaces();
//! operator.run(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

mod activities;
mod admission;
mod clock;
mod cluster;
mod embedding;
mod error;
#[cfg(feature = "faults")]
mod faults;
mod handlers;
mod health;
mod journal;
mod limits;
mod metrics;
mod object_log;
mod peering;
mod persistence;
#[cfg(test)]
mod proptesting;
mod pyformat;
mod rate;
mod rbac;
mod reactor;
mod recording;
mod reloading;
mod running;
mod runtime;
pub mod settings;
pub mod sharding;
#[cfg(feature = "testing")]
pub mod testing;
mod tools;

// The embedding API (ARCHITECTURE.md lists it).
pub use admission::AdmissionServer;
pub use cluster::default_kube_client;
pub use embedding::{OperatorHandle, Readiness};
pub use error::Error;
pub use journal::{Journal, Record};
pub use limits::{Limits, LimitsError};
pub use peering::Freezer;
pub use persistence::{
    AnnotationsDiffBase, AnnotationsProgress, DiffBaseStorage, Persistence, PersistenceError,
    ProgressStorage, StatusDiffBase, StatusProgress,
};
pub use running::Operator;
pub use settings::{Settings, SettingsError};
pub use tools::{RbacRequest, inspect, rbac};

// Plumbing of the `kapsel` binary and the bench, not part of the embedding API: public
// only because those crates are apart from this one.
#[doc(hidden)]
pub use cluster::kube_client;
#[doc(hidden)]
pub use error::error_chain;
#[doc(hidden)]
pub use health::{Endpoint, EndpointError};
#[doc(hidden)]
pub use runtime::{CompileCommand, CompileError, INVALID_COMPONENT, compile_guest};
#[doc(hidden)]
pub use tools::{HandlerCall, HandlerReply};
