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
#[cfg(feature = "testing")]
pub mod testing;
mod tools;

pub use cluster::{default_kube_client, kube_client};
pub use embedding::{OperatorHandle, Readiness};
pub use error::{Error, error_chain};
pub use health::{Endpoint, EndpointError};
pub use journal::{Journal, Record};
pub use limits::Limits;
pub use peering::Freezer;
pub use running::Operator;
pub use runtime::{CompileCommand, INVALID_COMPONENT, compile_guest};
pub use tools::{HandlerCall, HandlerReply, RbacRequest, inspect, rbac};
