//! Admission webhooks (Kopf's `on.validate` and `on.mutate`): the reviews the webhook
//! server receives answered by the guests' admission handlers.
//!
//! `review` (the AdmissionReview read and answered) → `handlers` (the guests' admission
//! handlers, and which answer a review) → `dispatch` (the calls, and their outcomes made
//! one response).

mod dispatch;
mod handlers;
mod managed;
mod review;
