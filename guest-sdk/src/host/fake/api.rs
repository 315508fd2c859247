//! The fake Kubernetes API of the fake host: an in-memory store of objects per thread
//! that answers as an API server and the real host would (`kapsel::testing::api` is its
//! public face, and documents it).

use std::cell::RefCell;

use serde_json::{Value, json};

use super::labels::{labels_match, parse_label_selector};
use super::types::{
    CLUSTER_SCOPED, Type, bad_request, covers, merge_patch, meta_str, not_found, set_meta,
    suggested_permit, target_text,
};
use crate::host::ApiError;
use crate::selector::Selector;

/// One call a handler made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `get`, `list`, `create`, `patch` or `delete`.
    pub verb: String,
    /// The resource as the handler named it, in Kopf's `name[.version[.group]]`
    /// form: `configmaps.v1` for `Api::new("v1", "configmaps")`,
    /// `KopfExample.v1.kopf.dev` for `Api::of` on a
    /// `kopf.dev/v1` `KopfExample`.
    pub target: String,
    /// The namespace the handler gave (`None`: none).
    pub namespace: Option<String>,
    /// The object's name (`get`, `patch`, `delete`).
    pub name: Option<String>,
    /// The label selector (`list`).
    pub label_selector: Option<String>,
    /// The body (`create`) or merge patch (`patch`); `null` for other calls.
    pub body: Value,
}

#[derive(Default)]
struct FakeApi {
    objects: Vec<Value>,
    types: Vec<Type>,
    calls: Vec<Call>,
    failures: Vec<(String, ApiError)>,
    counter: u64,
    current_namespace: Option<String>,
}

thread_local! {
    static API: RefCell<FakeApi> = RefCell::new(FakeApi::default());
}

impl FakeApi {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// The type a selector names; the core group wins on ambiguity, as in the host.
    fn resolve(&self, selector: &Selector) -> Option<Type> {
        let mut found = self.types.iter().filter(|t| t.is_selected(selector));
        let first = found.next()?;
        if first.group.is_empty() {
            return Some(first.clone());
        }
        Some(found.find(|t| t.group.is_empty()).unwrap_or(first).clone())
    }

    fn learn(&mut self, ty: &Type) -> Type {
        if let Some(known) = self
            .types
            .iter()
            .find(|t| t.api_version == ty.api_version && t.kind == ty.kind)
        {
            return known.clone();
        }
        self.types.push(ty.clone());
        ty.clone()
    }

    /// The namespace a call acts in: the given one, else the current object's, else
    /// `default` (as the host does for handlers about no object, such as startup ones).
    fn namespace_for(&self, ty: &Type, given: Option<&str>) -> Result<Option<String>, ApiError> {
        if !ty.namespaced {
            return Ok(None);
        }
        Ok(Some(
            given
                .or(self.current_namespace.as_deref())
                .unwrap_or("default")
                .to_owned(),
        ))
    }

    fn position(&self, ty: &Type, namespace: Option<&str>, name: &str) -> Option<usize> {
        self.objects.iter().position(|o| {
            ty.holds(o)
                && meta_str(o, "namespace") == namespace
                && meta_str(o, "name") == Some(name)
        })
    }

    /// Refuses calls outside the declared permissions, as the host does.
    fn permit(&self, verb: &str, target: &Selector, ty: Option<&Type>) -> Result<(), ApiError> {
        let declared = crate::permissions::permissions();
        let allowed = declared
            .iter()
            .any(|p| p.verbs.iter().any(|v| v == verb) && covers(&p.target, target, ty));
        if allowed {
            return Ok(());
        }
        Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "`{verb}` on {} is outside the guest's permissions: declare it with `{}`",
                target_text(target),
                suggested_permit(target, ty, verb)
            ),
        ))
    }

    fn handle(&mut self, call: Call, target: &Selector) -> Result<String, ApiError> {
        let verb = call.verb.clone();
        self.calls.push(call.clone());
        if let Some(at) = self.failures.iter().position(|(v, _)| *v == verb) {
            return Err(self.failures.remove(at).1);
        }
        let ty = self.resolve(target);
        self.permit(&verb, target, ty.as_ref())?;
        let name = call.name.as_deref().unwrap_or_default();
        let namespace = call.namespace.as_deref();
        match verb.as_str() {
            "get" => {
                let ty = ty.ok_or_else(|| not_found(&target_text(target), name))?;
                let ns = self.namespace_for(&ty, namespace)?;
                let at = self
                    .position(&ty, ns.as_deref(), name)
                    .ok_or_else(|| not_found(&ty.plural, name))?;
                Ok(self.objects[at].to_string())
            }
            "list" => {
                let requirements = match &call.label_selector {
                    Some(text) => parse_label_selector(text)?,
                    None => Vec::new(),
                };
                let Some(ty) = ty else {
                    return Ok(json!({"apiVersion": "v1", "kind": "List", "items": []}).to_string());
                };
                let items: Vec<Value> = self
                    .objects
                    .iter()
                    .filter(|o| ty.holds(o))
                    .filter(|o| {
                        !ty.namespaced
                            || namespace.is_none_or(|ns| meta_str(o, "namespace") == Some(ns))
                    })
                    .filter(|o| labels_match(o, &requirements))
                    .cloned()
                    .collect();
                Ok(json!({
                    "apiVersion": ty.api_version,
                    "kind": format!("{}List", ty.kind),
                    "metadata": {"resourceVersion": self.counter.to_string()},
                    "items": items,
                })
                .to_string())
            }
            "create" => self.create(target, ty, namespace, call.body),
            "patch" => {
                let ty = ty.ok_or_else(|| not_found(&target_text(target), name))?;
                if !call.body.is_object() {
                    return Err(bad_request("a merge patch must be a JSON object"));
                }
                let ns = self.namespace_for(&ty, namespace)?;
                let at = self
                    .position(&ty, ns.as_deref(), name)
                    .ok_or_else(|| not_found(&ty.plural, name))?;
                let mut object = self.objects[at].clone();
                merge_patch(&mut object, &call.body);
                // The API server never lets a patch move or retype an object.
                let original = &self.objects[at];
                for key in ["apiVersion", "kind"] {
                    if let (Value::Object(fields), Some(value)) = (&mut object, original.get(key)) {
                        fields.insert(key.to_owned(), value.clone());
                    }
                }
                for key in ["name", "namespace", "uid"] {
                    match original.get("metadata").and_then(|m| m.get(key)) {
                        Some(value) => set_meta(&mut object, key, value.clone()),
                        None => {
                            if let Some(Value::Object(meta)) = object.get_mut("metadata") {
                                meta.remove(key);
                            }
                        }
                    }
                }
                let version = self.next().to_string();
                set_meta(&mut object, "resourceVersion", Value::String(version));
                self.objects[at] = object.clone();
                Ok(object.to_string())
            }
            "delete" => {
                let ty = ty.ok_or_else(|| not_found(&target_text(target), name))?;
                let ns = self.namespace_for(&ty, namespace)?;
                let at = self
                    .position(&ty, ns.as_deref(), name)
                    .ok_or_else(|| not_found(&ty.plural, name))?;
                self.objects.remove(at);
                Ok(String::new())
            }
            other => Err(bad_request(format!("unknown verb {other}"))),
        }
    }

    fn create(
        &mut self,
        target: &Selector,
        known: Option<Type>,
        namespace: Option<&str>,
        mut body: Value,
    ) -> Result<String, ApiError> {
        if !body.is_object() {
            return Err(bad_request("the body must be a JSON object"));
        }
        let ty = match known {
            Some(ty) => ty,
            None => {
                let Some(mut ty) = Type::from_object(&body) else {
                    return Err(bad_request(format!(
                        "the fake API has not seen {} yet: give the body `apiVersion` and `kind` \
                         (or seed an object with `testing::api::insert`)",
                        target_text(target)
                    )));
                };
                if !ty.is_selected(target) {
                    return Err(bad_request(format!(
                        "the body's {} {} is not {}",
                        ty.api_version,
                        ty.kind,
                        target_text(target)
                    )));
                }
                ty.namespaced = !CLUSTER_SCOPED.contains(&ty.kind.as_str());
                self.learn(&ty)
            }
        };
        for (key, value) in [("apiVersion", &ty.api_version), ("kind", &ty.kind)] {
            match body.get(key).and_then(Value::as_str) {
                Some(given) if given != value => {
                    return Err(bad_request(format!(
                        "the body's {key} {given} does not match {}",
                        ty.plural
                    )));
                }
                _ => {
                    if let Value::Object(fields) = &mut body {
                        fields.insert(key.to_owned(), Value::String(value.clone()));
                    }
                }
            }
        }
        let in_body = meta_str(&body, "namespace").filter(|ns| !ns.is_empty());
        if let (Some(call), Some(body)) = (namespace, in_body)
            && call != body
        {
            return Err(bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let in_body = in_body.map(str::to_owned);
        let ns = self.namespace_for(&ty, namespace.or(in_body.as_deref()))?;
        match &ns {
            Some(ns) => set_meta(&mut body, "namespace", Value::String(ns.clone())),
            None => {
                if let Some(Value::Object(meta)) = body.get_mut("metadata") {
                    meta.remove("namespace");
                }
            }
        }
        let name = match (meta_str(&body, "name"), meta_str(&body, "generateName")) {
            (Some(name), _) if !name.is_empty() => name.to_owned(),
            (_, Some(prefix)) if !prefix.is_empty() => format!("{prefix}{:05x}", self.next()),
            _ => {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        };
        if self.position(&ty, ns.as_deref(), &name).is_some() {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", ty.plural),
            ));
        }
        set_meta(&mut body, "name", Value::String(name));
        let n = self.next();
        set_meta(
            &mut body,
            "uid",
            Value::String(format!("00000000-0000-4000-8000-{n:012x}")),
        );
        set_meta(&mut body, "resourceVersion", Value::String(n.to_string()));
        self.objects.push(body.clone());
        Ok(body.to_string())
    }
}

/// A host call, served by this thread's fake API.
pub(crate) fn call(
    verb: &str,
    target: &Selector,
    namespace: Option<&str>,
    name: Option<&str>,
    label_selector: Option<&str>,
    body: Option<&str>,
) -> Result<String, ApiError> {
    let body = match body.map(serde_json::from_str::<Value>) {
        None => Value::Null,
        Some(Ok(body)) => body,
        Some(Err(e)) => return Err(bad_request(format!("the body is not JSON: {e}"))),
    };
    let call = Call {
        verb: verb.to_owned(),
        target: target_text(target),
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        label_selector: label_selector.map(str::to_owned),
        body,
    };
    API.with_borrow_mut(|api| api.handle(call, target))
}

/// Seeds (or replaces) an object; fills `metadata.uid` and
/// `metadata.resourceVersion` when missing. An object without a namespace is
/// cluster-scoped, and so is its type from then on (see the module documentation).
///
/// # Panics
/// When `object` has no `apiVersion`, `kind` or `metadata.name` (a test bug).
pub fn insert(mut object: Value) {
    let Some(ty) = Type::from_object(&object) else {
        panic!("kapsel::testing::api::insert: the object needs apiVersion and kind: {object}");
    };
    let Some(name) = meta_str(&object, "name").map(str::to_owned) else {
        panic!("kapsel::testing::api::insert: the object needs metadata.name: {object}");
    };
    API.with_borrow_mut(|api| {
        let ty = api.learn(&ty);
        let namespace = meta_str(&object, "namespace").map(str::to_owned);
        let n = api.next();
        if meta_str(&object, "uid").is_none() {
            set_meta(
                &mut object,
                "uid",
                Value::String(format!("00000000-0000-4000-8000-{n:012x}")),
            );
        }
        if meta_str(&object, "resourceVersion").is_none() {
            set_meta(&mut object, "resourceVersion", Value::String(n.to_string()));
        }
        match api.position(&ty, namespace.as_deref(), &name) {
            Some(at) => api.objects[at] = object,
            None => api.objects.push(object),
        }
    });
}

/// Every object the fake API holds, in the order they were first stored.
pub fn objects() -> Vec<Value> {
    API.with_borrow(|api| api.objects.clone())
}

/// The object of this `api_version` (`"v1"`, `"apps/v1"`) and `kind`
/// (`"ConfigMap"`) named `name` in `namespace` (`None`: cluster-scoped).
pub fn get(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
    API.with_borrow(|api| {
        api.objects
            .iter()
            .find(|o| {
                o.get("apiVersion").and_then(Value::as_str) == Some(api_version)
                    && o.get("kind").and_then(Value::as_str) == Some(kind)
                    && meta_str(o, "namespace") == namespace
                    && meta_str(o, "name") == Some(name)
            })
            .cloned()
    })
}

/// The calls handlers made on this thread, in order (refused ones included).
pub fn calls() -> Vec<Call> {
    API.with_borrow(|api| api.calls.clone())
}

/// Makes the next call with `verb` (`"get"`, `"create"`, ...) fail with `error`,
/// before any permission check or lookup. Several scripted errors for one verb
/// are used in order.
pub fn fail_next(verb: &str, error: ApiError) {
    API.with_borrow_mut(|api| api.failures.push((verb.to_owned(), error)));
}

/// Sets the current object's namespace, which calls without a namespace use
/// (building a `Cause` with `kapsel::testing::cause()` sets it
/// from the body).
pub fn set_current_namespace(namespace: Option<&str>) {
    API.with_borrow_mut(|api| {
        api.current_namespace = namespace.filter(|ns| !ns.is_empty()).map(str::to_owned);
    });
}

/// Forgets objects, types, calls and scripted failures.
pub(crate) fn reset() {
    API.with_borrow_mut(|api| *api = FakeApi::default());
}
