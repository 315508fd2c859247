//! The common tail of PUT and every PATCH: kube's update rules applied to the client's new
//! version of a stored object (what it may not change, status subresources, finalizers of
//! an object being deleted, generation, managed fields), then the write, or none when
//! nothing changed.

use std::sync::Arc;

use super::presented::{differs_outside, is_presented, present_owned};
use super::validation::{check_body, check_object};
use super::{Fields, Scope, apply_defaults, is_csr};
use crate::meta::{meta_mut, now};
use crate::status::ApiError;
use crate::store::{CRDS, ObjKey, ResKey, Store, meta_str};
use serde_json::{Map, Value, json};

/// The members that are not the spec: what `generation` does not track.
const NOT_SPEC: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];

/// The metadata a client cannot change with an update: the stored version's stays.
const SERVER_METADATA: [&str; 8] = [
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
];

/// The common tail of PUT and PATCH: applies kube's update rules to the client's `new`
/// version of `old` and stores the result. `status_only` for the `/status` subresource.
/// Returns the object as written (the stored one itself; for a dry run or an object that
/// went away, what it would be), which the answer writes out with
/// [`Presented`](super::Presented).
pub(crate) fn commit_update(
    store: &mut Store,
    scope: &Scope,
    name: &str,
    mut new: Value,
    status_only: bool,
    dry_run: bool,
    fields: Fields<'_>,
) -> Result<Arc<Value>, ApiError> {
    let res = scope.res();
    let key = scope.key(name);
    // The stored version itself, not a copy: the store replaces it, it does not change it.
    let old = store
        .shared(&res, &key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    check_body(scope, &new)?;
    // The client's managed fields, taken out (the object is stored with the ones worked
    // out below; with a patch, they are the stored ones, patched).
    let applied = new
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|meta| meta.remove("managedFields"));
    check_same_object(scope, name, &new, &old)?;
    let mut result = if status_only {
        status_update(scope, &old, &new, fields.subresource())?
    } else {
        main_update(scope, name, new, &old)?
    };
    record_fields(scope, &old, &mut result, fields, applied);
    if let Some(user) = fields.user() {
        crate::rbac::check_write(store, user, (&res.0, &res.1), &result, Some(&old))?;
    }
    // A write that changes nothing is not a write: no new resourceVersion, no event.
    // (Objects compare as maps, whatever their members' order.)
    if result == *old || is_presented(&scope.rt, &result, &old) {
        return Ok(old);
    }
    if dry_run {
        return Ok(Arc::new(result));
    }
    Ok(store_updated(store, &res, &key, result))
}

/// The new version names the object of the URL, at its current resourceVersion when it
/// gives one (else 409 Conflict).
fn check_same_object(scope: &Scope, name: &str, new: &Value, old: &Value) -> Result<(), ApiError> {
    let new_name = meta_str(new, "name");
    if !new_name.is_empty() && new_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    let given_rv = meta_str(new, "resourceVersion");
    if !given_rv.is_empty() && given_rv != meta_str(old, "resourceVersion") {
        return Err(ApiError::conflict(scope.target(name)));
    }
    Ok(())
}

/// Sets the object's `status` to `status`, or removes it when there is none.
fn set_status(obj: &mut Value, status: Option<&Value>) {
    match status {
        Some(s) => obj["status"] = s.clone(),
        None => {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
    }
}

/// An update of the status subresource: it changes only `status`; the rest of the request
/// is ignored. A CertificateSigningRequest's `status` (not its `approval`, which checks
/// its own) keeps its approval and its certificate as kube's strategy keeps them.
fn status_update(
    scope: &Scope,
    old: &Value,
    new: &Value,
    subresource: Option<&str>,
) -> Result<Value, ApiError> {
    let mut result = Value::clone(old);
    set_status(&mut result, new.get("status"));
    if is_csr(&scope.rt) && subresource != Some("approval") {
        let causes = super::csr::check_status_update(&mut result, old, &now());
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                scope.target(meta_str(old, "name")),
                "CertificateSigningRequest.certificates.k8s.io",
                &causes,
            ));
        }
    }
    apply_defaults(scope, &mut result);
    check_object(scope, &result)?;
    Ok(result)
}

/// An update of the object itself (PUT, or a patch of it): the new version, with what the
/// client may not change kept from the stored one.
fn main_update(scope: &Scope, name: &str, new: Value, old: &Value) -> Result<Value, ApiError> {
    let mut result = present_owned(&scope.rt, new);
    if scope.rt.has_status {
        // With a status subresource, the main resource ignores status changes.
        set_status(&mut result, old.get("status"));
    }
    if is_csr(&scope.rt) {
        // kube: a request is immutable after creation but through its subresources.
        result["spec"] = old.get("spec").cloned().unwrap_or(Value::Null);
    }
    keep_server_metadata(old, &mut result);
    check_no_new_finalizers(scope, name, old, &result)?;
    let crd = (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS;
    if crd {
        crate::crd::default(&mut result);
        if let Some(s) = old.get("status") {
            result["status"] = s.clone();
        }
    }
    apply_defaults(scope, &mut result);
    check_object(scope, &result)?;
    if crd {
        crate::crd::establish(&mut result, &now());
        // names/versions may have changed; group and plural cannot (name is fixed).
        if !meta_str(&result, "deletionTimestamp").is_empty() {
            crate::crd::mark_terminating(&mut result, &now());
        }
    }
    if super::keeps_generation(&scope.rt) && differs_outside(&result, old, &NOT_SPEC) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut result).insert("generation".into(), json!(g + 1));
    }
    Ok(result)
}

/// The metadata the server owns, as stored (selfLink is never kept).
fn keep_server_metadata(old: &Value, result: &mut Value) {
    let no_meta = Map::new();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&no_meta);
    let meta = meta_mut(result);
    meta.remove("selfLink");
    crate::meta::drop_empty_members(meta);
    for k in SERVER_METADATA {
        match old_meta.get(k) {
            Some(v) => meta.insert(k.into(), v.clone()),
            None => meta.remove(k),
        };
    }
}

/// kube refuses new finalizers on an object being deleted.
fn check_no_new_finalizers(
    scope: &Scope,
    name: &str,
    old: &Value,
    result: &Value,
) -> Result<(), ApiError> {
    if meta_str(old, "deletionTimestamp").is_empty() {
        return Ok(());
    }
    let old_f = finalizers(old);
    let new: Vec<String> = finalizers(result)
        .iter()
        .filter(|f| !old_f.contains(f))
        .map(Value::to_string)
        .collect();
    if !new.is_empty() {
        // Go's %#v of the new ones: []string{"a", "b"}.
        return Err(ApiError::invalid(
            scope.target(name),
            &scope.rt.kind,
            &[(
                "metadata.finalizers".into(),
                format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    new.join(", ")
                ),
            )],
        ));
    }
    Ok(())
}

/// The object's `metadata.finalizers` (none when it has none).
fn finalizers(obj: &Value) -> &[Value] {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

/// The result's `managedFields`: an `Update` entry recorded for this manager, or (apply,
/// the server's own writes) the applier's, else the stored ones.
fn record_fields(
    scope: &Scope,
    old: &Value,
    result: &mut Value,
    fields: Fields<'_>,
    applied: Option<Value>,
) {
    if let Fields::Update(who) = fields {
        crate::managed::record_update(&scope.rt, Some(old), result, who, applied.as_ref());
        return;
    }
    match applied.or_else(|| old.pointer("/metadata/managedFields").cloned()) {
        Some(m) => {
            meta_mut(result).insert("managedFields".into(), m);
        }
        None => {
            meta_mut(result).remove("managedFields");
        }
    }
}

/// Stores the updated object, or removes it when it was being deleted and its last
/// finalizer is gone; returns it as written.
fn store_updated(store: &mut Store, res: &ResKey, key: &ObjKey, result: Value) -> Arc<Value> {
    let deleting = !meta_str(&result, "deletionTimestamp").is_empty();
    // A graceful deletion still running (a pod's, until its kubelet confirms it) keeps
    // the object, as kube's ShouldDeleteDuringUpdate does.
    let grace = result
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if deleting && grace == 0 && finalizers(&result).is_empty() {
        // The last finalizer is gone: the object goes away now (kube deletes it in the same
        // request; watchers see only DELETED).
        crate::gc::remove(store, res, key);
        return Arc::new(result);
    }
    let stored = store.replace(res, result);
    crate::gc::collect_if_orphaned(store, res, key);
    if res.0 == CRDS.0 && res.1 == CRDS.1 {
        crate::apiservices::types_changed(store);
    }
    stored
}

/// Stores the new version [`commit_update`] prepared in a dry run from the stored version
/// at `old_rv`, once validating admission admitted it; 409 when the object changed
/// meanwhile.
pub(crate) fn store_prepared_update(
    store: &mut Store,
    scope: &Scope,
    name: &str,
    old_rv: &str,
    result: Value,
) -> Result<Arc<Value>, ApiError> {
    let (res, key) = (scope.res(), scope.key(name));
    let current = store
        .get(&res, &key)
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    if meta_str(current, "resourceVersion") != old_rv {
        return Err(ApiError::conflict(scope.target(name)));
    }
    Ok(store_updated(store, &res, &key, result))
}
