//! Object writes and reads with kube-apiserver's rules: create, get, update (PUT and the
//! common tail of every patch), metadata bookkeeping, generation and status subresources.

use std::sync::Arc;

use crate::meta::{meta_mut, now};
use crate::registry::ResourceType;
use crate::status::{ApiError, Target};
use crate::store::{CRDS, ObjKey, ResKey, Store, meta_str, res_of};
use serde_json::{Map, Value, json};

/// Where a request points: the type and, for namespaced types, the namespace.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub(crate) rt: ResourceType,
    /// The namespace from the URL (None for cluster-scoped types or all-namespace lists).
    pub(crate) ns: Option<String>,
}

impl Scope {
    pub(crate) fn res(&self) -> ResKey {
        res_of(&self.rt)
    }

    pub(crate) fn key(&self, name: &str) -> ObjKey {
        (self.ns.clone().unwrap_or_default(), name.to_string())
    }

    pub(crate) fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        Target {
            group: &self.rt.group,
            plural: &self.rt.plural,
            name,
        }
    }
}

/// How a write records field ownership in `metadata.managedFields`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fields<'a> {
    /// An `Update` entry for this manager (create, PUT, every patch but apply).
    Update(&'a crate::managed::Who),
    /// The body carries the managedFields server-side apply computed for this applier.
    Applied(&'a crate::managed::Who),
    /// The server's own writes (controllers, built-in objects): entries stay as they are.
    Keep,
}

impl Fields<'_> {
    /// The user whose write this is, when RBAC is checked (server writes have none).
    fn user(&self) -> Option<&crate::auth::User> {
        match self {
            Fields::Update(who) | Fields::Applied(who) => who.user.as_deref(),
            Fields::Keep => None,
        }
    }
}

/// The object as served at this type's version: kube serves every version of a resource from
/// one storage; with conversion strategy `None` only `apiVersion` differs.
pub(crate) fn present(rt: &ResourceType, obj: &Value) -> Value {
    present_owned(rt, obj.clone())
}

/// [`present`] of an object the caller gives up: its members are moved, not copied.
pub(crate) fn present_owned(rt: &ResourceType, mut out: Value) -> Value {
    if let Some(m) = out.as_object_mut() {
        // Put apiVersion and kind first, as kube's encoders do.
        let mut ordered = Map::new();
        ordered.insert("apiVersion".into(), json!(rt.api_version()));
        ordered.insert("kind".into(), json!(rt.kind));
        for (k, v) in std::mem::take(m) {
            if k != "apiVersion" && k != "kind" {
                ordered.insert(k, v);
            }
        }
        *m = ordered;
    }
    out
}

/// [`present`] as it is written out, without a copy of the object: a copy per watcher of
/// every event was a twentieth of the server's cost of a write (`make bench`).
pub(crate) struct Presented<'a> {
    rt: &'a ResourceType,
    obj: &'a Value,
}

impl<'a> Presented<'a> {
    pub(crate) fn new(rt: &'a ResourceType, obj: &'a Value) -> Self {
        Presented { rt, obj }
    }
}

impl serde::Serialize for Presented<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(members) = self.obj.as_object() else {
            return self.obj.serialize(serializer);
        };
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("apiVersion", &self.rt.api_version())?;
        map.serialize_entry("kind", &self.rt.kind)?;
        for (k, v) in members {
            if k != "apiVersion" && k != "kind" {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// The members that are not the spec: what `generation` does not track.
const NOT_SPEC: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];
/// The members [`present`] sets.
const TYPE: [&str; 2] = ["apiVersion", "kind"];

/// Whether the two objects differ in a member other than those of `skip`, compared in
/// place (objects compare as maps, whatever their members' order).
fn differs_outside(a: &Value, b: &Value, skip: &[&str]) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let kept = |m: &Map<String, Value>| m.keys().filter(|k| !skip.contains(&k.as_str())).count();
    kept(a) != kept(b)
        || a.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .any(|(k, v)| b.get(k) != Some(v))
}

/// Whether `result` is `old` as [`present`] serves it, without presenting a copy of `old`.
fn is_presented(rt: &ResourceType, result: &Value, old: &Value) -> bool {
    let member = |k: &str| result.get(k).and_then(Value::as_str);
    member("apiVersion") == Some(rt.api_version().as_str())
        && member("kind") == Some(rt.kind.as_str())
        && !differs_outside(result, old, &TYPE)
}

/// Body checks common to create and update: decodable metadata, matching apiVersion/kind.
fn check_body(scope: &Scope, body: &Value) -> Result<(), ApiError> {
    crate::validate::metadata_types(body).map_err(ApiError::bad_request)?;
    let rt = &scope.rt;
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !av.is_empty() && av != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    if let Some(ns) = &scope.ns {
        let body_ns = meta_str(body, "namespace");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(())
}

/// What kube does to every written object: built-in defaults, and for a custom resource
/// its structural schema's defaults and pruning.
fn apply_defaults(scope: &Scope, obj: &mut Value) {
    crate::defaults::apply(&scope.rt.group, &scope.rt.plural, obj);
    if let Some(schema) = scope.rt.schema.as_ref().filter(|_| scope.rt.custom) {
        crate::schema::default_and_prune(obj, schema);
    }
}

/// Kube's validation of a pod's containers (the part clients most often get wrong).
fn pod_problems(obj: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match obj.pointer("/spec/containers").and_then(Value::as_array) {
        None => out.push(("spec.containers".to_string(), "Required value".to_string())),
        Some(cs) if cs.is_empty() => {
            out.push(("spec.containers".to_string(), "Required value".to_string()))
        }
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                if !crate::validate::dns_label(name) {
                    out.push((
                        format!("spec.containers[{i}].name"),
                        format!("Invalid value: {name:?}: a lowercase RFC 1123 label"),
                    ));
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    out.push((
                        format!("spec.containers[{i}].image"),
                        "Required value".to_string(),
                    ));
                }
            }
        }
    }
    out
}

/// The most a ConfigMap holds, as kube-apiserver validates it (`MaxSecretSize`).
const CONFIGMAP_LIMIT: usize = 1024 * 1024;

/// kube-apiserver's size check of a ConfigMap: its keys and values, `data` and
/// `binaryData` together (the latter counted decoded, as stored), at most 1 MiB. Guests
/// are deployed in ConfigMaps: one too large must be refused here as on a cluster.
fn configmap_size_problem(obj: &Value) -> Option<(String, String)> {
    use base64::Engine as _;
    let entries = |field: &str| {
        obj.get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.len(), value.as_str().unwrap_or_default()))
    };
    let text: usize = entries("data").map(|(key, value)| key + value.len()).sum();
    let binary: usize = entries("binaryData")
        .map(|(key, value)| {
            // A value that is not base64 is counted as sent.
            let size = base64::engine::general_purpose::STANDARD
                .decode(value)
                .map_or(value.len(), |bytes| bytes.len());
            key + size
        })
        .sum();
    (text + binary > CONFIGMAP_LIMIT).then(|| {
        (
            "[]".to_string(),
            format!("Too long: must have at most {CONFIGMAP_LIMIT} bytes"),
        )
    })
}

/// 422 checks of a complete object about to be stored.
fn check_object(scope: &Scope, obj: &Value) -> Result<(), ApiError> {
    let name = meta_str(obj, "name");
    let mut causes = Vec::new();
    let name_ok = if scope.rt.plural == "namespaces" {
        crate::validate::dns_label(name)
    } else if scope.rt.group.is_empty() && matches!(scope.rt.plural.as_str(), "events" | "nodes")
        || scope.rt.group == "rbac.authorization.k8s.io"
    {
        // Path segment names (RBAC's `system:discovery`); kube also refuses `%` in them.
        !name.is_empty() && !name.contains(['/', '%']) && name != "." && name != ".."
    } else {
        crate::validate::dns_subdomain(name)
    };
    if !name_ok {
        causes.push(("metadata.name".to_string(), format!("Invalid value: {name:?}: a lowercase RFC 1123 name must consist of lower case alphanumeric characters, '-' or '.'")));
    }
    causes.extend(crate::validate::metadata(
        obj.get("metadata").unwrap_or(&Value::Null),
    ));
    if (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS {
        causes.extend(crate::crd::validate(obj));
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "pods" {
        causes.extend(pod_problems(obj));
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "configmaps" {
        causes.extend(configmap_size_problem(obj));
    }
    if let Some(schema) = scope.rt.schema.as_ref().filter(|_| scope.rt.custom) {
        causes.extend(crate::schema::validate(obj, schema));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            scope.target(name),
            &scope.rt.kind,
            &causes,
        ))
    }
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
fn prepare_create(scope: &Scope, obj: &mut Value, now: &str) {
    let rt = &scope.rt;
    if rt.has_status {
        // kube resets status on create when it is a subresource.
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
            // No scheduler or kubelet runs: the pod stays Pending, as on a cluster without nodes.
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
        Some(n) if !meta_str(n, "deletionTimestamp").is_empty() => Err(ApiError::forbidden(
            scope.target(name),
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )),
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

/// POST: creates an object. Returns the stored (or, with dryRun, would-be) object, which
/// the answer writes out with [`Presented`].
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
    let meta = meta_mut(&mut body);
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let generate = meta
        .get("generateName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
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
    match &scope.ns {
        Some(ns) => meta.insert("namespace".into(), json!(ns)),
        None => meta.remove("namespace"),
    };
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now));
    meta.insert("generation".into(), json!(1));
    if scope.rt.namespaced && scope.ns.is_none() {
        return Err(ApiError::bad_request(
            "a namespace is required to create a namespaced object",
        ));
    }
    let mut obj = present_owned(&scope.rt, body);
    prepare_create(scope, &mut obj, &now);
    apply_defaults(scope, &mut obj);
    check_object(scope, &obj)?;
    if let Some(user) = fields.user() {
        let res = scope.res();
        crate::rbac::check_write(store, user, (&res.0, &res.1), &obj, None)?;
    }
    check_namespace(store, scope, &name)?;
    if crd_terminating(store, &scope.rt) {
        return Err(ApiError::method_not_allowed(&format!(
            "create is not allowed while custom resource definition {}.{} is terminating",
            scope.rt.plural, scope.rt.group
        )));
    }
    if store.get(&scope.res(), &scope.key(&name)).is_some() {
        return Err(ApiError::already_exists(scope.target(&name)));
    }
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
    let stored = store.insert(&scope.res(), obj);
    crate::gc::collect_if_orphaned(store, &scope.res(), &scope.key(&name));
    if (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS {
        store.rebuild_registry();
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "namespaces" {
        // kube's service account controller gives every namespace a `default` account.
        if let Some(rt) = store.registry.find("", "v1", "serviceaccounts").cloned() {
            let sa_scope = Scope {
                rt,
                ns: Some(name.clone()),
            };
            let sa = json!({"metadata": {"name": "default"}});
            if let Err(e) = create(store, &sa_scope, sa, false, Fields::Keep) {
                tracing::warn!(namespace = %name, error = ?e, "could not create the default service account");
            }
        }
    }
    Ok(stored)
}

/// GET of one object.
pub(crate) fn get(store: &Store, scope: &Scope, name: &str) -> Result<Value, ApiError> {
    store
        .get(&scope.res(), &scope.key(name))
        .map(|o| present(&scope.rt, o))
        .ok_or_else(|| ApiError::not_found(scope.target(name)))
}

/// The common tail of PUT and PATCH: applies kube's update rules to the client's `new`
/// version of `old` and stores the result. `status_only` for the `/status` subresource.
/// Returns the object as written (the stored one itself; for a dry run or an object that
/// went away, what it would be), which the answer writes out with [`Presented`].
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
    let new_name = meta_str(&new, "name");
    if !new_name.is_empty() && new_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    let given_rv = meta_str(&new, "resourceVersion");
    if !given_rv.is_empty() && given_rv != meta_str(&old, "resourceVersion") {
        return Err(ApiError::conflict(scope.target(name)));
    }
    let mut result;
    if status_only {
        // The status subresource changes only `status`; the rest of the request is ignored.
        result = Value::clone(&old);
        match new.get("status") {
            Some(s) => result["status"] = s.clone(),
            None => {
                if let Some(m) = result.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        apply_defaults(scope, &mut result);
        check_object(scope, &result)?;
    } else {
        result = present_owned(&scope.rt, new);
        if scope.rt.has_status {
            // With a status subresource, the main resource ignores status changes.
            match old.get("status") {
                Some(s) => result["status"] = s.clone(),
                None => {
                    if let Some(m) = result.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        let no_meta = Map::new();
        let old_meta = old
            .get("metadata")
            .and_then(Value::as_object)
            .unwrap_or(&no_meta);
        let meta = meta_mut(&mut result);
        meta.remove("selfLink");
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match old_meta.get(k) {
                Some(v) => meta.insert(k.into(), v.clone()),
                None => meta.remove(k),
            };
        }
        if !meta_str(&old, "deletionTimestamp").is_empty() {
            let old_f = old_meta
                .get("finalizers")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let added = meta
                .get("finalizers")
                .and_then(Value::as_array)
                .is_some_and(|fs| fs.iter().any(|f| !old_f.contains(f)));
            if added {
                return Err(ApiError::invalid(
                    scope.target(name),
                    &scope.rt.kind,
                    &[(
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        if (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS {
            crate::crd::default(&mut result);
            if let Some(s) = old.get("status") {
                result["status"] = s.clone();
            }
        }
        apply_defaults(scope, &mut result);
        check_object(scope, &result)?;
        if (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS {
            crate::crd::establish(&mut result, &now());
            if meta_str(&result, "deletionTimestamp").is_empty() {
                // names/versions may have changed; group and plural cannot (name is fixed).
            } else {
                crate::crd::mark_terminating(&mut result, &now());
            }
        }
        if differs_outside(&result, &old, &NOT_SPEC) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut result).insert("generation".into(), json!(g + 1));
        }
    }
    if let Fields::Update(who) = fields {
        crate::managed::record_update(&scope.rt, Some(&old), &mut result, who, applied.as_ref());
    }
    if !matches!(fields, Fields::Update(_)) {
        match applied.or_else(|| old.pointer("/metadata/managedFields").cloned()) {
            Some(m) => {
                meta_mut(&mut result).insert("managedFields".into(), m);
            }
            None => {
                meta_mut(&mut result).remove("managedFields");
            }
        }
    }
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
    let deleting = !meta_str(&result, "deletionTimestamp").is_empty();
    let no_finalizers = result
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if deleting && no_finalizers {
        // The last finalizer is gone: the object goes away now (kube deletes it in the same
        // request; watchers see only DELETED).
        crate::gc::remove(store, &res, &key);
        return Ok(Arc::new(result));
    }
    let stored = store.replace(&res, result);
    crate::gc::collect_if_orphaned(store, &res, &key);
    if res.0 == CRDS.0 && res.1 == CRDS.1 {
        store.rebuild_registry();
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_recognised_as_served_without_a_copy() {
        let rt = crate::builtins::builtins()
            .into_iter()
            .find(|t| t.plural == "configmaps")
            .expect("configmaps");
        // Stored without its type, or at another version: served with this type's.
        for old in [
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            json!({"apiVersion": "v0", "kind": "Other", "metadata": {"name": "c"}, "data": {"a": "1"}}),
        ] {
            let served = present(&rt, &old);
            assert!(is_presented(&rt, &served, &old));
            let mut changed = served.clone();
            changed["data"]["a"] = json!("2");
            assert!(!is_presented(&rt, &changed, &old));
            let mut other_kind = served.clone();
            other_kind["kind"] = json!("Secret");
            assert!(!is_presented(&rt, &other_kind, &old));
            let mut more = served.clone();
            more["extra"] = json!(1);
            assert!(!is_presented(&rt, &more, &old));
            let mut less = served;
            less.as_object_mut().map(|m| m.remove("data"));
            assert!(!is_presented(&rt, &less, &old));
        }
    }
}
