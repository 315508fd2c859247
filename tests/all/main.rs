//! Integration tests: real guests compiled to wasm32-wasip2, run by the real
//! host against the embedded API server over HTTP. One binary, one module per
//! capability.

mod activities;
mod architecture;
mod caching;
mod cases;
mod changes;
mod containment;
mod daemons;
mod embedding;
mod events;
mod faults;
mod filters;
mod finalizers;
mod guest_api;
mod health;
mod indexes;
mod loading;
mod login;
mod memo;
mod migration;
mod networking;
mod parity;
mod peering;
mod rbac;
mod reloading;
mod replay;
mod resumes;
mod retries;
mod sandbox;
mod schemas;
mod settings;
mod storages;
mod streams;
mod subhandlers;
mod timers;
