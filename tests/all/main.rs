//! Integration tests: real guests compiled to wasm32-wasip2, run by the real
//! host against the embedded API server over HTTP. One binary, one module per
//! capability.

mod events;
mod indexes;
mod loading;
mod sandbox;
mod streams;
