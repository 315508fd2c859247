//! The fake Kubernetes API behind [`kapsel::api`](crate::api) in native tests:
//! an in-memory store of objects, per thread, that answers as an API server and
//! the real host would.
//!
//! - Seed objects with [`insert`], read them back with [`get`] and [`objects`];
//!   check the calls a handler made with [`calls`]; script a failure with
//!   [`fail_next`].
//! - Calls outside the crate's `permit!` declarations are refused with 403
//!   `Forbidden` (all of them when the crate declares none), as the host does.
//! - Missing objects answer 404 `NotFound`; creating a taken name 409
//!   `AlreadyExists`. `create` fills `metadata.uid` and `metadata.resourceVersion`
//!   (a counter); `patch` is a JSON merge patch and bumps the resourceVersion;
//!   `list` filters by namespace and equality-based label selectors (`a=b`,
//!   `a==b`, `a!=b`, `a`, `!a`; others answer 400 `BadRequest`).
//! - A resource is found by its kind (any case), its lowercased kind (singular)
//!   or its plural (the lowercased kind plus `s`, `es` after `s`/`x`/`ch`/`sh`,
//!   `-y` → `-ies`); the fake knows no short names or categories. A type is known
//!   once an object of it was inserted or created (`create` of an unknown type
//!   needs the body's `apiVersion` and `kind`); listing an unknown type answers
//!   no items.
//! - A type is namespaced when its first object has a namespace (when created
//!   without one: unless its kind is a well-known cluster-scoped one such as
//!   `Namespace` or `Node`). Calls without a namespace on a namespaced type act in
//!   the current object's namespace: the namespace of the last
//!   [`cause()`](super::cause) built on this thread, or [`set_current_namespace`];
//!   without one, in `default`, as in the host.
//!
//! [`reset`](super::reset) forgets everything.

pub use crate::host::fake::api::{
    Call, calls, fail_next, get, insert, objects, set_current_namespace,
};
