//! The errors that stop an operator, and how the `kapsel` command prints them.

use std::path::PathBuf;

/// Errors that stop an operator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No Kubernetes connection could be configured (no in-cluster account, no kubeconfig).
    #[error("cannot find a Kubernetes cluster to connect to")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The persistence settings are out of range (`Persistence::check`'s
    /// `PersistenceError`).
    #[error("bad persistence settings")]
    Persistence(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The WebAssembly engine could not start.
    #[error("the WebAssembly runtime could not start")]
    Runtime(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// None of the given guests could be loaded (each reason was logged).
    #[error("no guest could be loaded: {}", .0.join("; "))]
    NoGuests(Vec<String>),
    /// Logging in with the guests' login handlers failed for good (a handler failed, or
    /// none gave usable credentials), at start or when logging in again.
    #[error("cannot log in to the cluster: {0}")]
    Login(String),
    /// A startup handler failed for good, so the operator did not start.
    #[error("startup handlers failed: {0}")]
    Startup(String),
    /// The operator failed while running.
    #[error("the operator failed")]
    Operator(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The liveness or metrics endpoint cannot be served (a bad URL, a port in use).
    #[error("the liveness or metrics endpoint cannot be served")]
    Endpoint(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The admission webhooks cannot be served (their certificate cannot be loaded or
    /// generated, their address cannot be bound).
    #[error("the admission webhooks cannot be served")]
    Admission(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A peer record could not be written (`freeze`, `resume`).
    #[error("the peer record could not be written")]
    Peering(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The recording file (`--record`) cannot be written.
    #[error("cannot write the recording {path}")]
    Recording {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// An error and its sources on one line (`a: b: c`), as the `kapsel` command prints them;
/// a source whose text the line already holds (errors that repeat their cause in their
/// own message) is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
