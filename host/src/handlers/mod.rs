//! What guests declare and how one call of a handler goes: each registration as the host
//! uses it (`spec`, with its data `filters`), which handlers serve which resource
//! (`registry`), the stores index handlers fill (`indexes`), what a guest may use during
//! a call (`services`), and one attempt turned into an outcome (`execution`, Kopf's
//! `execute_handler_once`, for every kind of handler).

pub(crate) mod execution;
mod filters;
mod indexes;
mod journaling;
mod memo;
mod registry;
mod services;
mod spec;

pub(crate) use filters::Matcher;
pub(crate) use indexes::{IndexUpdate, Indexes, ObjectKey};
pub(crate) use journaling::{About, Ended};
pub(crate) use memo::OperatorMemo;
pub(crate) use registry::{Registry, ResourceHandlers, declaration, undeclared};
pub(crate) use services::{
    DaemonSleeps, GuestServices, SettingsAccess, SharedProgress, Stopper, Subhandling,
    TaskProgress, set_progress,
};
pub(crate) use spec::{Cancellation, Handler, HandlerSpec, Schedule};
