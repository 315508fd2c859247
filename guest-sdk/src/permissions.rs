//! The Kubernetes calls the guest declares with `permit!` (WIT `permission`), collected by
//! static constructors; the host checks every call against them, and so does the fake
//! host of native tests.

use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use crate::selector::Selector;

/// WIT `permission`: one `permit!`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Permission {
    /// The resource the calls may use.
    pub target: Selector,
    /// `get`, `list`, `watch`, `create`, `patch`, `delete` (or `*`).
    pub verbs: Vec<String>,
}

impl Permission {
    /// A permission to make calls with `verbs` on `target`.
    pub fn new(target: Selector, verbs: &[&str]) -> Self {
        Self {
            target,
            verbs: verbs.iter().map(|&verb| verb.to_owned()).collect(),
        }
    }
}

/// One registered `permit!`.
#[derive(Clone, Copy)]
pub struct PermissionEntry {
    /// Builds the permission (when the host asks, at `describe`).
    pub permission: fn() -> Permission,
    /// Where the macro is written: the declaration order, as for handlers.
    pub source: crate::declaration::Source,
}

static PERMISSIONS: Mutex<Vec<PermissionEntry>> = Mutex::new(Vec::new());

/// Adds one `permit!`; called by static constructors at start-up.
pub fn register_permission(entry: PermissionEntry) {
    PERMISSIONS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(entry);
}

/// Every declared permission, in declaration order (link order is not stable).
pub(crate) fn permissions() -> Vec<Permission> {
    let mut entries = PERMISSIONS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    crate::declaration::sort(&mut entries, |e| e.source);
    entries.iter().map(|entry| (entry.permission)()).collect()
}
