//! Deletion: finalizers and `deletionTimestamp`, owner-reference garbage collection, CRD
//! cleanup and a namespace's completion (the work kube's controllers do, done inline
//! here; a namespace's content is deleted later, by `namespaces`).

use crate::meta::{meta_mut, now};
use crate::owners::owner_uids;
use crate::store::{CRDS, ObjKey, ResKey, Store, meta_str};
use serde_json::{Value, json};
use std::sync::Arc;

/// How dependents are treated when their owner goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Delete dependents after the owner (kube's default for most resources).
    Background,
    /// Delete dependents first: the owner waits, with a `foregroundDeletion` finalizer,
    /// until they are gone.
    Foreground,
    /// Leave dependents, removing their reference to the owner.
    Orphan,
}

fn has_finalizers(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

fn is_deleting(obj: &Value) -> bool {
    !meta_str(obj, "deletionTimestamp").is_empty()
}

/// Sets `deletionTimestamp` (and bumps generation, as kube does when deletion starts).
fn mark_deleting(obj: &mut Value, now: &str) {
    let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
    let meta = meta_mut(obj);
    meta.insert("deletionTimestamp".into(), json!(now));
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    if let Some(g) = generation {
        meta.insert("generation".into(), json!(g + 1));
    }
}

/// Deletes an object as a DELETE request would. Returns the object's state afterwards and
/// whether it is really gone (false: finalizers or cleanup keep it for now).
pub(crate) fn delete(
    store: &mut Store,
    res: &ResKey,
    key: &ObjKey,
    policy: Propagation,
) -> Option<(Arc<Value>, bool)> {
    // The stored version, shared: copied only where the deletion changes it (a plain
    // removal, the most common, hands it on as it is).
    let stored = Arc::clone(store.shared(res, key)?);
    if policy == Propagation::Orphan {
        orphan_dependents(store, meta_str(&stored, "uid"));
    }
    if is_deleting(&stored) {
        return Some((stored, false));
    }
    let uid = meta_str(&stored, "uid").to_string();
    if policy == Propagation::Foreground && !store.dependents(&uid).is_empty() {
        let now = now();
        let mut obj = Value::clone(&stored);
        mark_deleting(&mut obj, &now);
        let fins = meta_mut(&mut obj)
            .entry("finalizers")
            .or_insert_with(|| json!([]));
        if let Some(a) = fins.as_array_mut() {
            a.push(json!(FOREGROUND));
        }
        store.replace(res, obj);
        for (r, k) in store.dependents(&uid) {
            delete(store, &r, &k, Propagation::Foreground);
        }
        release_foreground(store, &uid);
        let gone = store.get(res, key).is_none();
        let now_obj = store.shared(res, key).cloned();
        return now_obj
            .map(|o| (o, gone))
            .or(Some((Arc::new(json!({})), true)));
    }
    let now = now();
    let is_ns = res.0.is_empty() && res.1 == "namespaces";
    let is_crd = res.0 == CRDS.0 && res.1 == CRDS.1;
    if is_ns || is_crd || has_finalizers(&stored) {
        let mut obj = Value::clone(&stored);
        mark_deleting(&mut obj, &now);
        if is_ns {
            // A namespace's deletion has no grace period (its storage sets only the
            // timestamp and the phase).
            meta_mut(&mut obj).remove("deletionGracePeriodSeconds");
            obj["status"] = json!({"phase": "Terminating"});
        }
        if is_crd {
            crate::crd::mark_terminating(&mut obj, &now);
        }
        // A namespace's content is deleted by the namespace controller (`namespaces`),
        // after its delay.
        let stored = store.replace(res, obj);
        if is_crd {
            // The CRD cleanup controller: delete every instance, then the CRD.
            let cr = crd_resource(&stored);
            let keys: Vec<ObjKey> = store.list(&cr, None).map(|(k, _)| k.clone()).collect();
            for k in keys {
                delete(store, &cr, &k, Propagation::Background);
            }
        }
        if is_crd {
            finish_cleanup(store, res, key);
        }
        let gone = store.get(res, key).is_none();
        let now_obj = store.shared(res, key).cloned().unwrap_or(stored);
        return Some((now_obj, gone));
    }
    remove(store, res, key).map(|o| (o, true))
}

/// Deletes an object as a DELETE with `gracePeriodSeconds` (`grace`) would: a pod, when a
/// kubelet runs, as kube's graceful deletion does ([`crate::grace`]): a scheduled one is
/// marked and stays until its kubelet confirms it (a DELETE with a period of 0), which
/// removes it unless finalizers hold it. Anything else as [`delete`].
pub(crate) fn delete_graceful(
    store: &mut Store,
    res: &ResKey,
    key: &ObjKey,
    policy: Propagation,
    grace: Option<i64>,
) -> Option<(Arc<Value>, bool)> {
    let pod = res.0.is_empty() && res.1 == "pods";
    if !pod || !store.graceful_pods() {
        return delete(store, res, key, policy);
    }
    let stored = Arc::clone(store.shared(res, key)?);
    match crate::grace::decide(&stored, grace, chrono::Utc::now()) {
        crate::grace::Grace::Now => delete(store, res, key, policy),
        crate::grace::Grace::Pending => Some((stored, false)),
        crate::grace::Grace::Mark(marked, period) => {
            if policy == Propagation::Orphan {
                orphan_dependents(store, meta_str(&stored, "uid"));
            }
            let held = has_finalizers(&marked);
            let written = store.replace(res, marked);
            if period > 0 || held {
                return Some((written, false));
            }
            remove(store, res, key).map(|gone| (gone, true))
        }
    }
}

/// The finalizer that holds an owner deleted with `propagationPolicy=Foreground`.
const FOREGROUND: &str = "foregroundDeletion";

/// Once a foreground-deleting owner has no dependents left, the garbage collector drops its
/// `foregroundDeletion` finalizer (and the owner goes if nothing else holds it).
fn release_foreground(store: &mut Store, uid: &str) {
    if uid.is_empty() || !store.dependents(uid).is_empty() {
        return;
    }
    let Some(((res, key), owner)) = store.by_uid(uid) else {
        return;
    };
    let (res, key, mut owner) = (res.clone(), key.clone(), owner.clone());
    let Some(fins) = owner
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    if !fins.iter().any(|f| f == FOREGROUND) {
        return;
    }
    fins.retain(|f| f != FOREGROUND);
    if has_finalizers(&owner) {
        store.replace(&res, owner);
    } else {
        remove(store, &res, &key);
    }
}

/// Removes an object for good, then does what follows: garbage-collects dependents, and
/// completes a terminating namespace or CRD that became empty.
pub(crate) fn remove(store: &mut Store, res: &ResKey, key: &ObjKey) -> Option<Arc<Value>> {
    let obj = store.remove(res, key)?;
    if res.0 == CRDS.0 && res.1 == CRDS.1 {
        store.drop_resource(&crd_resource(&obj));
        crate::apiservices::types_changed(store);
    }
    collect_dependents(store, meta_str(&obj, "uid"));
    for owner in owner_uids(&obj) {
        release_foreground(store, owner);
    }
    let ns = meta_str(&obj, "namespace");
    if !ns.is_empty() {
        let ns_res = (String::new(), "namespaces".to_string());
        finish_cleanup(store, &ns_res, &(String::new(), ns.to_string()));
    }
    if let Some(rt) = store.registry.preferred(&res.0, &res.1)
        && rt.custom
    {
        let crd_res = (CRDS.0.to_string(), CRDS.1.to_string());
        let name = format!("{}.{}", res.1, res.0);
        finish_cleanup(store, &crd_res, &(String::new(), name));
    }
    Some(obj)
}

/// Once a terminating namespace or CRD has no content left, drops the system finalizer its
/// controller holds; the object disappears when no other finalizer remains. A namespace
/// only once the namespace controller made its pass (its conditions say so).
pub(crate) fn finish_cleanup(store: &mut Store, res: &ResKey, key: &ObjKey) {
    let Some(obj) = store.get(res, key) else {
        return;
    };
    if !is_deleting(obj) {
        return;
    }
    let is_ns = res.0.is_empty() && res.1 == "namespaces";
    if is_ns && obj.pointer("/status/conditions").is_none() {
        return;
    }
    let empty = if is_ns {
        !store
            .all()
            .any(|(_, objs)| objs.keys().any(|k| k.0 == key.1))
    } else {
        let group = obj
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let plural = obj
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        store.list(&(group, plural), None).next().is_none()
    };
    if !empty {
        return;
    }
    let mut obj = obj.clone();
    if is_ns {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("finalizers");
        }
    } else if let Some(fs) = obj
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        fs.retain(|f| f != "customresourcecleanup.apiextensions.k8s.io");
    }
    if has_finalizers(&obj) {
        if Some(&obj) != store.get(res, key) {
            store.replace(res, obj);
        }
    } else {
        remove(store, res, key);
    }
}

fn drop_owner_ref(store: &mut Store, res: &ResKey, key: &ObjKey, uid: &str) {
    let Some(mut o) = store.get(res, key).cloned() else {
        return;
    };
    if let Some(refs) = o
        .pointer_mut("/metadata/ownerReferences")
        .and_then(Value::as_array_mut)
    {
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
        if refs.is_empty()
            && let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("ownerReferences");
        }
    }
    store.replace(res, o);
}

/// The garbage collector after an owner is gone: a dependent with another live owner only
/// loses the dangling reference; one without is deleted (through its own finalizers).
fn collect_dependents(store: &mut Store, uid: &str) {
    if uid.is_empty() {
        return;
    }
    for (res, key) in store.dependents(uid) {
        let Some(o) = store.get(&res, &key) else {
            continue;
        };
        let others_alive = owner_uids(o)
            .filter(|u| *u != uid)
            .any(|u| store.by_uid(u).is_some());
        if others_alive {
            drop_owner_ref(store, &res, &key, uid);
        } else {
            delete(store, &res, &key, Propagation::Background);
        }
    }
}

/// `propagationPolicy=Orphan`: dependents stay and lose their reference to the owner.
fn orphan_dependents(store: &mut Store, uid: &str) {
    if uid.is_empty() {
        return;
    }
    for (res, key) in store.dependents(uid) {
        drop_owner_ref(store, &res, &key, uid);
    }
}

/// The resource (group, plural) a CRD defines.
fn crd_resource(crd: &Value) -> ResKey {
    let text = |pointer: &str| {
        crd.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (text("/spec/group"), text("/spec/names/plural"))
}

/// What the garbage collector finds when it looks an owner reference up.
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    Present,
    /// Not there, or there under another uid (re-created).
    Absent,
    /// A kind the server does not serve: it cannot tell, and leaves the reference alone.
    Unknown,
}

fn owner_state(store: &Store, r: &Value, ns: &str) -> Owner {
    let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let group = text("apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
    let Some(rt) = store
        .registry
        .all()
        .iter()
        .find(|t| t.group == group && t.kind == text("kind"))
    else {
        return Owner::Unknown;
    };
    // A namespaced owner lives in its dependent's namespace; a cluster-scoped dependent
    // cannot have one (kube treats such a reference as absent).
    let owner_ns = if rt.namespaced { ns } else { "" };
    match store.get(
        &crate::store::res_of(rt),
        &(owner_ns.to_string(), text("name").to_string()),
    ) {
        Some(o) if meta_str(o, "uid") == text("uid") => Owner::Present,
        _ => Owner::Absent,
    }
}

/// The garbage collector's check of a just written object, as kube's collector does for
/// every object it sees: when all its owners are absent it is deleted (through its own
/// finalizers, in the background); when only some are, the references to those go.
pub(crate) fn collect_if_orphaned(store: &mut Store, res: &ResKey, key: &ObjKey) {
    let Some(obj) = store.get(res, key) else {
        return;
    };
    let refs = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if refs.is_empty() || is_deleting(obj) {
        return;
    }
    let states: Vec<Owner> = refs.iter().map(|r| owner_state(store, r, &key.0)).collect();
    if !states.contains(&Owner::Absent) {
        return;
    }
    for (r, _) in refs
        .iter()
        .zip(&states)
        .filter(|(_, s)| **s == Owner::Absent)
    {
        report_invalid_namespace(store, res, key, r);
    }
    if states.iter().all(|s| *s == Owner::Absent) {
        delete(store, res, key, Propagation::Background);
        return;
    }
    for (r, _) in refs
        .iter()
        .zip(&states)
        .filter(|(_, s)| **s == Owner::Absent)
    {
        if let Some(uid) = r.get("uid").and_then(Value::as_str) {
            drop_owner_ref(store, res, key, uid);
        }
    }
}

/// kube's collector, when a reference names an owner that exists in another namespace
/// than its dependent's (or a namespaced owner of a cluster-scoped dependent): a Warning
/// Event `OwnerRefInvalidNamespace` on the dependent, in kube's words, from
/// `garbage-collector-controller`. The reference counts as absent all the same.
fn report_invalid_namespace(store: &mut Store, res: &ResKey, key: &ObjKey, reference: &Value) {
    let text = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or("");
    let Some(((_, (owner_ns, _)), _)) = store.by_uid(text("uid")) else {
        return;
    };
    if owner_ns.is_empty() || *owner_ns == key.0 {
        return;
    }
    let Some(dependent) = store.get(res, key) else {
        return;
    };
    let event = invalid_namespace_event(dependent, reference, &key.0);
    store.insert(&(String::new(), "events".to_string()), event);
}

/// The Event kube's collector records (`reportInvalidNamespaceOwnerRef`): about the
/// dependent, in its namespace (`default` for a cluster-scoped one, as kube's recorder
/// puts them), saying which reference does not exist in the dependent's namespace.
fn invalid_namespace_event(dependent: &Value, reference: &Value, namespace: &str) -> Value {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let name = meta_str(dependent, "name");
    let stamp = now();
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let mut involved = json!({
        "kind": text(dependent, "kind"),
        "name": name,
        "uid": meta_str(dependent, "uid"),
        "apiVersion": text(dependent, "apiVersion"),
    });
    if !namespace.is_empty() {
        involved["namespace"] = json!(namespace);
    }
    let message = format!(
        "ownerRef [{}/{}, namespace: {namespace}, name: {}, uid: {}] does not exist in namespace {namespace:?}",
        text(reference, "apiVersion"),
        text(reference, "kind"),
        text(reference, "name"),
        text(reference, "uid"),
    );
    let event_namespace = if namespace.is_empty() {
        "default"
    } else {
        namespace
    };
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{name}.{nanos:x}"),
            "namespace": event_namespace,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": stamp,
        },
        "involvedObject": involved,
        "reason": "OwnerRefInvalidNamespace",
        "message": message,
        "source": {"component": COLLECTOR},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": "Warning",
        "eventTime": null,
        "reportingComponent": COLLECTOR,
        "reportingInstance": "",
    })
}

/// The component kube's garbage collector records its Events as.
const COLLECTOR: &str = "garbage-collector-controller";
