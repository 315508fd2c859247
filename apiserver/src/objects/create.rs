//! POST: creating an object with kube's rules. The server fills in the metadata it owns
//! (a name from `generateName`, uid, timestamps, generation), prepares and defaults the
//! object as kube's strategies do, checks it and where it goes, then stores it.

use std::sync::Arc;

use super::presented::present_owned;
use super::validation::{check_body, check_object};
use super::{Fields, Scope, apply_defaults, is_csr};
use crate::meta::{meta_mut, now};
use crate::registry::ResourceType;
use crate::status::{ApiError, Target};
use crate::store::{CRDS, Store, meta_str};
use serde_json::{Map, Value, json};

/// POST: creates an object. Returns the stored (or, with dryRun, would-be) object, which
/// the answer writes out with [`Presented`](super::Presented).
pub(crate) fn create(
    store: &mut Store,
    scope: &Scope,
    mut body: Value,
    dry_run: bool,
    fields: Fields<'_>,
) -> Result<Arc<Value>, ApiError> {
    check_body(scope, &body)?;
    let applied = body.pointer("/metadata/managedFields").cloned();
    let now = now();
    let name = set_server_metadata(store, scope, meta_mut(&mut body), &now)?;
    if scope.rt.namespaced && scope.ns.is_none() {
        return Err(ApiError::bad_request(
            "a namespace is required to create a namespaced object",
        ));
    }
    let mut obj = present_owned(&scope.rt, body);
    prepare_create(scope, &mut obj, &now);
    if is_csr(&scope.rt) {
        set_requester(&mut obj, fields.user());
    }
    apply_defaults(scope, &mut obj);
    check_object(scope, &obj)?;
    check_admitted(store, scope, &obj, &name, fields)?;
    match (fields, applied) {
        (Fields::Update(who), given) => {
            crate::managed::record_update(&scope.rt, None, &mut obj, who, given.as_ref());
        }
        (Fields::Applied(_), Some(m)) => {
            meta_mut(&mut obj).insert("managedFields".into(), m);
        }
        _ => {}
    }
    if dry_run {
        return Ok(Arc::new(obj));
    }
    Ok(store_created(store, scope, obj, &name))
}

/// The metadata the server owns on a new object: drops what a client may not set, and sets
/// the name (generated from `generateName` when there is none), namespace, uid,
/// creationTimestamp and generation. Returns the name.
fn set_server_metadata(
    store: &Store,
    scope: &Scope,
    meta: &mut Map<String, Value>,
    now: &str,
) -> Result<String, ApiError> {
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let name = new_name(store, scope, meta)?;
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
        "resourceVersion",
    ] {
        meta.remove(k);
    }
    meta.insert("name".into(), json!(name));
    crate::meta::drop_empty_members(meta);
    match &scope.ns {
        Some(ns) => meta.insert("namespace".into(), json!(ns)),
        None => meta.remove("namespace"),
    };
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now));
    if super::keeps_generation(&scope.rt) {
        meta.insert("generation".into(), json!(1));
    }
    Ok(name)
}

/// The new object's name: the one given, else `generateName` with a random suffix.
fn new_name(store: &Store, scope: &Scope, meta: &Map<String, Value>) -> Result<String, ApiError> {
    let text = |k: &str| {
        meta.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut name = text("name");
    let generate = text("generateName");
    if name.is_empty() && generate.is_empty() {
        return Err(ApiError::invalid(
            scope.target(""),
            &scope.rt.kind,
            &[(
                "metadata.name".into(),
                "Required value: name or generateName is required".into(),
            )],
        ));
    }
    if name.is_empty() {
        // Retry on the (unlikely) collision instead of answering 409 as old kube did.
        for _ in 0..16 {
            name = format!("{generate}{}", random_suffix());
            if store.get(&scope.res(), &scope.key(&name)).is_none() {
                break;
            }
        }
    }
    Ok(name)
}

const GENERATE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..5)
        .map(|_| GENERATE_ALPHABET[rng.random_range(0..GENERATE_ALPHABET.len())] as char)
        .collect()
}

/// Built-in defaulting and PrepareForCreate done by kube's strategies, for types where
/// operators and kubectl notice.
/// kube's CertificateSigningRequest strategy at create: the requester is who sends the
/// request (none when the server does not authenticate), whatever the body says.
fn set_requester(obj: &mut Value, user: Option<&crate::auth::User>) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in ["username", "uid", "groups", "extra"] {
        spec.remove(k);
    }
    if let Some(user) = user {
        spec.insert("username".into(), json!(user.name));
        spec.insert("groups".into(), json!(user.groups));
    }
}

fn prepare_create(scope: &Scope, obj: &mut Value, now: &str) {
    let rt = &scope.rt;
    let node = rt.group.is_empty() && rt.plural == "nodes";
    if rt.has_status && !node {
        // kube resets status on create when it is a subresource (but a Node's, which its
        // kubelet registers with its status).
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => {
            let name = meta_str(obj, "name").to_string();
            let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
            if !obj.get("spec").is_some_and(Value::is_object) {
                obj["spec"] = json!({});
            }
            obj["spec"]["finalizers"] = json!(["kubernetes"]);
            obj["status"] = json!({"phase": "Active"});
        }
        ("", "pods") => {
            // Pending until a scheduler and a kubelet (the simulated one) move it on.
            obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        }
        CRDS => {
            crate::crd::default(obj);
            crate::crd::establish(obj, now);
            let fins = meta_mut(obj)
                .entry("finalizers")
                .or_insert_with(|| json!([]));
            if let Some(a) = fins.as_array_mut() {
                let f = json!("customresourcecleanup.apiextensions.k8s.io");
                if !a.contains(&f) {
                    a.push(f);
                }
            }
        }
        _ => {}
    }
}

/// Whether the object may be created where it goes: the user may write it (when RBAC is
/// checked), its namespace accepts new objects, its CRD is not being deleted, and its name
/// is free.
fn check_admitted(
    store: &Store,
    scope: &Scope,
    obj: &Value,
    name: &str,
    fields: Fields<'_>,
) -> Result<(), ApiError> {
    if let Some(user) = fields.user() {
        let res = scope.res();
        crate::rbac::check_write(store, user, (&res.0, &res.1), obj, None)?;
    }
    check_namespace(store, scope, name)?;
    if crd_terminating(store, &scope.rt) {
        return Err(ApiError::method_not_allowed(&format!(
            "create is not allowed while custom resource definition {}.{} is terminating",
            scope.rt.plural, scope.rt.group
        )));
    }
    if store.get(&scope.res(), &scope.key(name)).is_some() {
        return Err(ApiError::already_exists(scope.target(name)));
    }
    Ok(())
}

/// Whether the namespace exists and accepts new objects.
fn check_namespace(store: &Store, scope: &Scope, name: &str) -> Result<(), ApiError> {
    let Some(ns) = &scope.ns else { return Ok(()) };
    let res = (String::new(), "namespaces".to_string());
    match store.get(&res, &(String::new(), ns.clone())) {
        None => Err(ApiError::not_found(Target {
            group: "",
            plural: "namespaces",
            name: ns,
        })),
        Some(n) if !meta_str(n, "deletionTimestamp").is_empty() => {
            let mut refused = ApiError::forbidden(
                scope.target(name),
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            );
            if let Some(details) = refused.details.as_deref_mut() {
                details["causes"] = serde_json::json!([{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {ns} is being terminated"),
                    "field": "metadata.namespace",
                }]);
            }
            Err(refused)
        }
        Some(_) => Ok(()),
    }
}

/// Whether the custom resource's CRD is being deleted (kube refuses creates then).
fn crd_terminating(store: &Store, rt: &ResourceType) -> bool {
    if !rt.custom {
        return false;
    }
    let res = (CRDS.0.to_string(), CRDS.1.to_string());
    let name = format!("{}.{}", rt.plural, rt.group);
    store
        .get(&res, &(String::new(), name))
        .is_some_and(|c| !meta_str(c, "deletionTimestamp").is_empty())
}

/// Stores the new object and does what follows a create: orphans collected, the registry
/// rebuilt for a CRD, a namespace's `default` ServiceAccount created.
fn store_created(store: &mut Store, scope: &Scope, obj: Value, name: &str) -> Arc<Value> {
    let stored = store.insert(&scope.res(), obj);
    crate::gc::collect_if_orphaned(store, &scope.res(), &scope.key(name));
    if (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS {
        crate::apiservices::types_changed(store);
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "namespaces" {
        // kube's service account controller gives every namespace a `default` account.
        if let Some(rt) = store.registry.find("", "v1", "serviceaccounts").cloned() {
            let sa_scope = Scope {
                rt,
                ns: Some(name.to_string()),
            };
            let sa = json!({"metadata": {"name": "default"}});
            if let Err(e) = create(store, &sa_scope, sa, false, Fields::Keep) {
                tracing::warn!(namespace = %name, error = ?e, "could not create the default service account");
            }
        }
    }
    stored
}

/// Stores an object [`create`] prepared in a dry run, once validating admission admitted
/// it: where it goes is checked again, as the store may have changed meanwhile.
pub(crate) fn store_prepared(
    store: &mut Store,
    scope: &Scope,
    obj: Value,
    fields: Fields<'_>,
) -> Result<Arc<Value>, ApiError> {
    let name = meta_str(&obj, "name").to_string();
    check_admitted(store, scope, &obj, &name, fields)?;
    Ok(store_created(store, scope, obj, &name))
}
