//! The WebAssembly side of the host: one engine, guests compiled once and instantiated per
//! call, every call bounded in time and memory, and the `host` interface guests call.
//!
//! Submodules, one job each: `engine` (the `Engine`, `Linker`, epoch ticker, [`Runtime`]),
//! `bindings` (the one `bindgen!`), `loader` (a file → a [`Guest`]), `library` (the
//! guests of the operator's paths, rescanned for hot reload), `cache` (compiled guests
//! kept on disk between starts), `compiler` (compiling here or in a helper process), `guest` ([`Guest`]),
//! `describe` (checking and rendering registrations), `invoke` (one bounded call), `state`
//! (per-call store data), `deadline` (a call's budget, paused while a daemon sleeps), `services` ([`HostServices`], what a call may use),
//! `host_api` (the `host` imports), `admission` (admission handlers: their declarations checked, the `admission` imports), `pipe` (captured stdout/stderr), `slots` (who may
//! run a call now: pools, fair shares), `turns` (which calls compute now).

mod admission;
mod bindings;
mod cache;
mod compiler;
mod deadline;
mod describe;
mod engine;
mod guest;
mod host_api;
mod invoke;
mod library;
mod loader;
mod pipe;
mod returned;
mod services;
mod slots;
mod state;
#[cfg(test)]
mod tests;
mod turns;

pub(crate) use admission::add_admissions_json;
pub(crate) use bindings::{
    AdmissionDeclaration, AdmissionRequest, Cause, Declaration, Due, ErrorsMode, EventType,
    HandlerKind, IndexOutcome, KubeError, Level, Matcher, MetaFilter, Outcome, Permission,
    Registration, Resource, ResourceInfo, ResourceName, Selector, SpawningOptions, Webhook,
};
pub use compiler::{CompileCommand, CompileError, INVALID_COMPONENT, compile_guest};
pub(crate) use describe::describe_json;
pub(crate) use engine::Runtime;
pub(crate) use guest::{Guest, ServedGuests};
pub(crate) use invoke::CallError;
pub(crate) use library::{Library, Refusal, Rescan};
pub(crate) use services::{
    CallContext, Caller, GuestEvent, HostServices, KubeRequest, NOT_CHANGING, NOT_STARTUP,
    NoServices, StopReasons, not_available,
};
pub(crate) use slots::{Pool, Slots};
pub(crate) use state::Admitted;
