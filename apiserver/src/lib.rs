//! An in-memory Kubernetes API server, served over HTTP on loopback.

mod openapi;
mod registry;
