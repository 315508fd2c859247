//! The tests of the `kapsel` binary, as one test binary: a binary per file linked the
//! host (wasmtime and all) once each. A module per subject; `support` is what the
//! modules share, `deploy` has a stage of its own.
//!
//! The tests run at once on threads of one process, so none changes what the process
//! shares (its environment, its current directory, its signal handlers): each works in
//! scratch folders named after its module, and its clusters and operators are child
//! processes on ports the system picks.

mod bad_input;
mod cli;
mod commands;
mod crash;
mod deploy;
mod freeze;
mod image;
mod logging;
mod new_guest;
mod signals;
mod soak;
mod support;
