//! Admission webhooks (Kopf's `on.validate` and `on.mutate`), served by the host: the
//! reviews its HTTPS server receives answered by the guests' admission handlers, and the
//! webhook configurations pointing at it.
//!
//! `review` (the AdmissionReview read and answered) → `handlers` (the guests' admission
//! handlers, and which answer a review) → `dispatch` (the calls, and their outcomes made
//! one response); `certificates` (where the server's certificate comes from) → `server`
//! (HTTPS); `managed` (the configurations); `serving` ([`AdmissionServer`], all of it
//! started together).

mod certificates;
mod dispatch;
mod handlers;
mod managed;
mod review;
mod server;
mod serving;
#[cfg(test)]
mod tests;

pub use serving::AdmissionServer;
pub(crate) use serving::{Operator, Serving, serve};
