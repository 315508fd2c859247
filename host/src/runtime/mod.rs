//! The WebAssembly side of the host: one engine, guests compiled once and instantiated per
//! call, every call bounded in time and memory, and the `host` interface guests call.
//!
//! Submodules, one job each: `engine` (the `Engine`, `Linker`, epoch ticker, [`Runtime`]),
//! `bindings` (the one `bindgen!`), `loader` (files → [`Guest`]s), `describe` (checking and
//! rendering registrations), `invoke` (one bounded call), `state` (per-call store data),
//! `host_api` (the `host` imports and [`HostServices`]), `pipe` (captured stdout/stderr).

mod bindings;
mod describe;
mod engine;
mod host_api;
mod invoke;
mod loader;
mod pipe;
mod state;
#[cfg(test)]
mod tests;

/// A registration for tests: `id`, `kind`, on pods, nothing else set.
#[cfg(test)]
pub(crate) use describe::tests::registration;

// The runtime's API for the operator. Parts of it (Kubernetes calls, Events) are not wired
// yet, hence the `allow`s.
#[allow(
    unused_imports,
    reason = "the curated API, used by the operator as it grows"
)]
pub(crate) use bindings::{
    Cause, DescribeOutput, ErrorsMode, EventType, HandlerKind, IndexOutcome, KubeError, Level,
    Matcher, MetaFilter, Outcome, Permission, Registration, Reply, Resource, ResourceName,
    Selector,
};
#[allow(
    unused_imports,
    reason = "the curated API, used by the operator as it grows"
)]
pub(crate) use describe::describe_json;
#[allow(
    unused_imports,
    reason = "the curated API, used by the operator as it grows"
)]
pub(crate) use engine::{Runtime, RuntimeConfig, RuntimeError};
#[allow(
    unused_imports,
    reason = "the curated API, used by the operator as it grows"
)]
pub(crate) use host_api::{
    BoxFuture, CallContext, Caller, GUEST_LOG_TARGET, GuestEvent, HostServices, KubeRequest,
    NoServices, not_available,
};
#[allow(
    unused_imports,
    reason = "the curated API, used by the operator as it grows"
)]
pub(crate) use invoke::CallError;
#[allow(
    unused_imports,
    reason = "the curated API, used by the operator as it grows"
)]
pub(crate) use loader::{Guest, LoadError};
