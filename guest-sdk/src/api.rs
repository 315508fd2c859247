//! Kubernetes calls from handlers: get, list, create, patch and delete any object
//! the guest has declared a permission for with [`permit!`](crate::permit).
//!
//! ```
//! use kapsel::api::Api;
//! use kapsel::json;
//!
//! kapsel::permit!("v1", "configmaps", verbs = ["get", "create"]);
//!
//! #[kapsel::on::create("kopfexamples")]
//! fn ensure_config(cause: &kapsel::Cause) -> kapsel::Result<()> {
//!     let name = format!("{}-config", cause.name().unwrap_or_default());
//!     // No namespace: the current object's, for a namespaced resource.
//!     let configmaps = Api::new("v1", "configmaps");
//!     match configmaps.get(&name) {
//!         Ok(_) => Ok(()),
//!         Err(error) if error.is_not_found() => {
//!             configmaps.create(&json!({
//!                 "apiVersion": "v1",
//!                 "kind": "ConfigMap",
//!                 "metadata": {"name": name},
//!                 "data": {"greeting": "hello"},
//!             }))?;
//!             Ok(())
//!         }
//!         // Handled per the handler's `errors` option (temporary by default).
//!         Err(error) => Err(error.into()),
//!     }
//! }
//! # kapsel::testing::reset();
//! # let cause = kapsel::testing::cause()
//! #     .body(json!({"metadata": {"name": "ex", "namespace": "ns"}}))
//! #     .build();
//! # ensure_config(&cause).unwrap();
//! # assert!(kapsel::testing::api::get("v1", "ConfigMap", Some("ns"), "ex-config").is_some());
//! ```
//!
//! # Namespaces
//!
//! An [`Api`] without a namespace ([`Api::new`]), for a namespaced resource:
//! - `get`, `patch`, `delete` act in the namespace of the handler's current object;
//! - `create` uses the body's `metadata.namespace`, else the current object's;
//! - `list` lists every namespace;
//! - without a current object (startup, probe and cleanup handlers), or when it has
//!   no namespace, `default` takes its place.
//!
//! With a namespace ([`Api::namespaced`], [`Api::namespace`]) every call acts in it.
//! For cluster-scoped resources the namespace is ignored.
//!
//! # Errors
//!
//! Every call answers an [`ApiError`] on failure: the API server's status (code
//! and reason, such as 404 `NotFound` or 409 `Conflict`), 403 `Forbidden` when
//! the guest has not declared the call with `permit!`, or code 0 when the request
//! never reached the API server. `?` turns it into an arbitrary handler error.
//!
//! In native tests, calls go to the fake API of `kapsel::testing::api`.

use serde::Serialize;
use serde_json::Value;

use crate::host;
pub use crate::host::ApiError;
use crate::selector::{ResourceName, Selector};

/// One resource type (optionally in one namespace) to make calls on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Api {
    target: Selector,
    namespace: Option<String>,
    /// Why this `Api` cannot be used (an object without `apiVersion`/`kind`...):
    /// reported by every call rather than by a panic at construction.
    invalid: Option<String>,
}

/// `"v1"` is the core group; `"apps/v1"` is group `apps`, version `v1`.
fn split_api_version(api_version: &str) -> Result<(&str, &str), String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if version.is_empty() || version.contains('/') {
        return Err(format!(
            "invalid apiVersion {api_version:?}: expected \"v1\" or \"group/version\""
        ));
    }
    Ok((group, version))
}

impl Api {
    fn build(api_version: &str, name: ResourceName, namespace: Option<&str>) -> Self {
        let text = match &name {
            ResourceName::Any(t)
            | ResourceName::Kind(t)
            | ResourceName::Plural(t)
            | ResourceName::Singular(t)
            | ResourceName::Shortcut(t)
            | ResourceName::Category(t) => t.clone(),
        };
        let (target, invalid) = match split_api_version(api_version) {
            Ok((group, version)) => (Selector::new(Some(group), Some(version), name), None),
            Err(why) => (Selector::new(None, None, name), Some(why)),
        };
        let invalid = invalid.or_else(|| text.is_empty().then(|| "no resource name".to_owned()));
        Self {
            target,
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_owned),
            invalid,
        }
    }

    /// Calls on `name` (plural, singular, kind or short name) of `api_version`
    /// (`"v1"` for the core group, `"apps/v1"`, `"kopf.dev/v1"`), without a
    /// namespace: see the [module documentation](self) for what that means.
    pub fn new(api_version: &str, name: &str) -> Self {
        Self::build(api_version, ResourceName::Any(name.to_owned()), None)
    }

    /// Calls on `name` of `api_version` in `namespace`.
    pub fn namespaced(api_version: &str, name: &str, namespace: &str) -> Self {
        Self::build(
            api_version,
            ResourceName::Any(name.to_owned()),
            Some(namespace),
        )
    }

    /// Calls on the type of `object` (its `apiVersion` and `kind`), in its
    /// namespace (`metadata.namespace`, if any). Every call fails with reason
    /// `Invalid` when `object` has no `apiVersion` or `kind`.
    pub fn of(object: &Value) -> Self {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        match (api_version, kind) {
            (Some(api_version), Some(kind)) => {
                Self::build(api_version, ResourceName::Kind(kind.to_owned()), namespace)
            }
            _ => {
                let mut api = Self::build("v1", ResourceName::Kind(String::new()), namespace);
                api.invalid = Some("the object has no apiVersion or kind".to_owned());
                api
            }
        }
    }

    /// The same calls in `namespace` (`""`: no namespace).
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned()).filter(|ns| !ns.is_empty());
        self
    }

    fn check(&self) -> Result<(), ApiError> {
        match &self.invalid {
            Some(why) => Err(ApiError::invalid(why.clone())),
            None => Ok(()),
        }
    }

    /// The object named `name`.
    ///
    /// # Errors
    /// 404 `NotFound` when it does not exist; see the [module documentation](self).
    pub fn get(&self, name: &str) -> Result<Value, ApiError> {
        self.check()?;
        let answer = host::get(&self.target, self.namespace.as_deref(), name)?;
        parse_object(&answer)
    }

    /// The objects (of every namespace, without a namespace), optionally only
    /// those matching `label_selector` (`"app=web,tier!=db"`).
    ///
    /// Items carry `apiVersion` and `kind` (the API server leaves them out of
    /// list items; they are filled in from the list's), so [`Api::of`] works on them.
    ///
    /// # Errors
    /// See the [module documentation](self).
    pub fn list(&self, label_selector: Option<&str>) -> Result<Vec<Value>, ApiError> {
        self.check()?;
        let answer = host::list(&self.target, self.namespace.as_deref(), label_selector)?;
        let list = parse_object(&answer)?;
        let api_version = list.get("apiVersion").cloned();
        let kind = list
            .get("kind")
            .and_then(Value::as_str)
            .and_then(|kind| kind.strip_suffix("List"))
            .filter(|kind| !kind.is_empty())
            .map(|kind| Value::String(kind.to_owned()));
        let items = match list.get("items") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(_) => {
                return Err(ApiError::invalid(
                    "the host answered a list whose items are not an array".to_owned(),
                ));
            }
        };
        Ok(items
            .into_iter()
            .map(|mut item| {
                if let Value::Object(fields) = &mut item {
                    for (key, value) in [("apiVersion", &api_version), ("kind", &kind)] {
                        if let Some(value) = value {
                            fields.entry(key).or_insert_with(|| value.clone());
                        }
                    }
                }
                item
            })
            .collect())
    }

    /// Creates `body` (any serialisable object) and answers the created object.
    ///
    /// # Errors
    /// 409 `AlreadyExists` when the name is taken; code 0, reason `Invalid` when
    /// `body` cannot be serialised; see the [module documentation](self).
    pub fn create(&self, body: &(impl Serialize + ?Sized)) -> Result<Value, ApiError> {
        self.check()?;
        let body = to_json(body, "body")?;
        let answer = host::create(&self.target, self.namespace.as_deref(), &body)?;
        parse_object(&answer)
    }

    /// Applies a JSON merge patch (RFC 7386) to the object named `name` and
    /// answers the patched object.
    ///
    /// # Errors
    /// 404 `NotFound` when it does not exist; see the [module documentation](self).
    pub fn patch(
        &self,
        name: &str,
        merge_patch: &(impl Serialize + ?Sized),
    ) -> Result<Value, ApiError> {
        self.check()?;
        let patch = to_json(merge_patch, "patch")?;
        let answer = host::patch(&self.target, self.namespace.as_deref(), name, &patch)?;
        parse_object(&answer)
    }

    /// Deletes the object named `name`.
    ///
    /// # Errors
    /// 404 `NotFound` when it does not exist; see the [module documentation](self).
    pub fn delete(&self, name: &str) -> Result<(), ApiError> {
        self.check()?;
        host::delete(&self.target, self.namespace.as_deref(), name)
    }
}

fn to_json(value: &(impl Serialize + ?Sized), what: &str) -> Result<String, ApiError> {
    serde_json::to_string(value)
        .map_err(|e| ApiError::invalid(format!("the {what} cannot be serialised to JSON: {e}")))
}

/// The host's answer as a JSON object; anything else is the host's bug, which the
/// handler sees as an error rather than a trap.
fn parse_object(answer: &str) -> Result<Value, ApiError> {
    match serde_json::from_str::<Value>(answer) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(ApiError::invalid(
            "the host answered JSON that is not an object".to_owned(),
        )),
        Err(e) => Err(ApiError::invalid(format!(
            "the host answered invalid JSON: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ErrorKind;

    #[test]
    fn targets() {
        let core = Api::new("v1", "configmaps");
        assert_eq!(
            core.target,
            Selector::new(Some(""), Some("v1"), ResourceName::Any("configmaps".into()))
        );
        assert_eq!(core.namespace, None);
        let apps = Api::namespaced("apps/v1", "deployments", "ns");
        assert_eq!(apps.target.group.as_deref(), Some("apps"));
        assert_eq!(apps.namespace.as_deref(), Some("ns"));
        assert_eq!(apps.namespace("").namespace, None);
        let of = Api::of(&json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                                 "metadata": {"name": "a", "namespace": "x"}}));
        assert_eq!(
            of.target,
            Selector::new(
                Some("kopf.dev"),
                Some("v1"),
                ResourceName::Kind("KopfExample".into())
            )
        );
        assert_eq!(of.namespace.as_deref(), Some("x"));
        for bad in [
            Api::of(&json!({"metadata": {}})),
            Api::new("a/b/c", "x"),
            Api::new("v1", ""),
        ] {
            let error = bad.get("x").unwrap_err();
            assert_eq!((error.code, error.reason.as_str()), (0, "Invalid"));
        }
    }

    #[test]
    fn errors() {
        let error = ApiError::new(404, "NotFound", "configmaps \"x\" not found");
        assert!(error.is_not_found() && !error.is_conflict() && !error.is_forbidden());
        assert_eq!(
            error.to_string(),
            "NotFound (404): configmaps \"x\" not found"
        );
        assert!(ApiError::new(409, "", "").is_conflict());
        assert!(!ApiError::new(409, "AlreadyExists", "").is_conflict());
        assert!(ApiError::new(409, "AlreadyExists", "").is_already_exists());
        assert_eq!(ApiError::invalid("bad".into()).to_string(), "Invalid: bad");
        let converted: crate::Error = ApiError::new(403, "Forbidden", "no").into();
        assert_eq!(converted.kind(), ErrorKind::Arbitrary);
        assert_eq!(converted.to_string(), "Forbidden (403): no");
    }

    #[test]
    fn answers() {
        assert!(parse_object("{\"a\": 1}").is_ok());
        for bad in ["", "[1]", "{"] {
            let error = parse_object(bad).unwrap_err();
            assert_eq!((error.code, error.reason.as_str()), (0, "Invalid"));
        }
    }
}
