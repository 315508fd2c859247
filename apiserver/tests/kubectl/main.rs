//! Drives the real `kubectl` against the embedded API server: plain
//! `kubectl apply` (kubectl's default validation, no `--validate=false`),
//! CRDs and their objects, short names, patches, the status subresource,
//! deletion with finalizers, watches, `kubectl run`, client-side and
//! server-side apply updates, `explain`, `api-resources` and `get all`.
//!
//! kubectl's typed `create` generators, which send protobuf bodies, are
//! covered one by one.
//!
//! kubectl must be installed (`/usr/bin/kubectl` or on `PATH`): without it
//! these tests fail, saying so, rather than pass without running. Every
//! kubectl call runs with a timeout, so a misbehaving server fails the test
//! instead of hanging it.

mod builtins;
mod cluster;
mod custom_resources;
mod generators;
mod rbac;
mod support;
