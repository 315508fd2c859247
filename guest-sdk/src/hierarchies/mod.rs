//! Owners, names, namespaces and labels of the objects a handler creates: Kopf's
//! `kopf.adopt` and its parts (`kopf/_kits/hierarchies.py`), on JSON bodies.
//!
//! A child created by a handler is usually *adopted*: owned by the object being
//! handled (so that Kubernetes deletes it with its owner), in the owner's
//! namespace, named after it, with its labels:
//!
//! ```
//! use kapsel::api::Api;
//! use kapsel::json;
//!
//! kapsel::permit!("apps", "v1", "deployments", verbs = ["create"]);
//! kapsel::permit!("v1", "services", verbs = ["create"]);
//!
//! #[kapsel::on::create("kopfexamples")]
//! fn create_children(cause: &kapsel::Cause) -> kapsel::Result<()> {
//!     let mut deployment = json!({
//!         "apiVersion": "apps/v1", "kind": "Deployment",
//!         "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
//!     });
//!     let mut service = json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}});
//!     // Owner reference, namespace, name and labels; the pods get the labels too.
//!     kapsel::hierarchies::Options::new()
//!         .strict(true)
//!         .nested("spec.template")
//!         .adopt([&mut deployment, &mut service], cause.body())?;
//!     Api::of(&deployment).create(&deployment)?;
//!     Api::of(&service).create(&service)?;
//!     Ok(())
//! }
//! # kapsel::testing::reset();
//! # let cause = kapsel::testing::cause().body(json!({
//! #     "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
//! #     "metadata": {"name": "ex", "namespace": "ns", "uid": "u-1", "labels": {"app": "ex"}}})).build();
//! # create_children(&cause).unwrap();
//! # let created = kapsel::testing::api::get("apps/v1", "Deployment", Some("ns"), "ex").unwrap();
//! # assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "u-1");
//! # assert_eq!(created["spec"]["template"]["metadata"]["labels"]["app"], "ex");
//! # assert!(kapsel::testing::api::get("v1", "Service", Some("ns"), "ex").is_some());
//! ```
//!
//! The functions of this module, also at the crate root ([`adopt`], [`label`],
//! ...) apply Kopf's defaults; [`Options`] holds Kopf's keyword arguments (`forced`,
//! `strict`, `nested`, `controller`, `block_owner_deletion`) for the same operations.
//! Each takes one object or many ([`Objects`]) and the owner's body (usually
//! [`Cause::body`](crate::Cause::body)), and changes the objects in place, before
//! they are created.
//!
//! # Errors
//!
//! A [`HierarchyError`] when an object, or a field the operation must change, has
//! a type Kubernetes never gives it, when [`adopt`] finds no owner name, or when it
//! would make an owner reference Kubernetes takes for absent (a namespaced owner of an
//! object in another namespace, or of a cluster-scoped one). Nothing is changed then
//! (Kopf may have changed some objects before raising).
//!
//! # Caveats
//!
//! A `null` field counts as absent (Kopf's rule for the Kubernetes client's
//! models, where a missing field is `None`): a `null` `metadata.name` is no name,
//! and a `null` `metadata.labels` is replaced by an object.

mod fields;
mod objects;
mod scopes;

use serde_json::{Map, Value};

pub use fields::HierarchyError;
use fields::{Check, Shape, array_at, nested_mut, object_at, present};
pub use objects::Objects;

/// The fields under `metadata` that owner references need.
const REFERENCES: &[(&str, Shape)] = &[("ownerReferences", Shape::Array)];
/// The fields under `metadata` that labels need.
const LABELS: &[(&str, Shape)] = &[("labels", Shape::Object)];

/// Kopf's keyword arguments of the hierarchy functions, for the same operations
/// as the crate root's functions (which use [`Options::new`]).
///
/// ```
/// use kapsel::hierarchies::Options;
/// use kapsel::json;
///
/// let owner = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
///                    "metadata": {"name": "ex", "uid": "u-1"}});
/// let mut job = json!({"kind": "Job", "metadata": {"name": "mine"}});
/// // kopf.harmonize_naming(job, 'ex', forced=True, strict=True)
/// Options::new().forced(true).strict(true).harmonize_naming(&mut job, "ex")?;
/// assert_eq!(job["metadata"]["name"], "ex");
/// // kopf.append_owner_reference(job, owner, controller=False)
/// Options::new().controller(false).append_owner_reference(&mut job, &owner)?;
/// assert_eq!(job["metadata"]["ownerReferences"][0]["controller"], false);
/// # Ok::<(), kapsel::hierarchies::HierarchyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    forced: bool,
    strict: bool,
    nested: Vec<Vec<String>>,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

impl Default for Options {
    fn default() -> Self {
        Self::new()
    }
}

impl Options {
    /// Kopf's defaults: not forced, not strict, no nested fields, owner references
    /// with `controller` and `blockOwnerDeletion` true.
    pub fn new() -> Self {
        Self {
            forced: false,
            strict: false,
            nested: Vec::new(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// `forced`: overwrite names, namespaces and labels the objects already have
    /// (read by [`label`](Self::label), [`harmonize_naming`](Self::harmonize_naming),
    /// [`adjust_namespace`](Self::adjust_namespace) and [`adopt`](Self::adopt)).
    #[must_use]
    pub fn forced(mut self, forced: bool) -> Self {
        self.forced = forced;
        self
    }

    /// `strict`: name the objects exactly (`metadata.name`) rather than by prefix
    /// (`metadata.generateName`, the name followed by `-`), read by
    /// [`harmonize_naming`](Self::harmonize_naming) and [`adopt`](Self::adopt).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// `nested`: also label the object at this dotted path in each object
    /// (`"spec.template"`: a Deployment's pods; `"spec.jobTemplate"`), where it
    /// exists; may be given several times. Read by [`label`](Self::label) and
    /// [`adopt`](Self::adopt).
    #[must_use]
    pub fn nested(self, path: &str) -> Self {
        let keys: Vec<&str> = path.split('.').collect();
        self.nested_at(&keys)
    }

    /// [`nested`](Self::nested), with the path given as its keys (for keys with dots).
    #[must_use]
    pub fn nested_at(mut self, keys: &[&str]) -> Self {
        self.nested
            .push(keys.iter().map(|&key| key.to_owned()).collect());
        self
    }

    /// The owner reference's `controller` flag (`None`: left out); read by
    /// [`owner_reference`](Self::owner_reference),
    /// [`append_owner_reference`](Self::append_owner_reference) and
    /// [`adopt`](Self::adopt) (Kopf's `adopt` always uses the default, true).
    #[must_use]
    pub fn controller(mut self, controller: impl Into<Option<bool>>) -> Self {
        self.controller = controller.into();
        self
    }

    /// The owner reference's `blockOwnerDeletion` flag (`None`: left out); read
    /// as [`controller`](Self::controller) is.
    #[must_use]
    pub fn block_owner_deletion(mut self, block: impl Into<Option<bool>>) -> Self {
        self.block_owner_deletion = block.into();
        self
    }

    /// The owner reference to `owner` (Kopf's `build_owner_reference`):
    /// `controller`, `blockOwnerDeletion`, `apiVersion`, `kind`, `metadata.name`
    /// and `metadata.uid`, each left out when absent or `null`.
    pub fn owner_reference(&self, owner: &Value) -> Value {
        let meta = |key: &str| owner.get("metadata").and_then(|m| m.get(key));
        let fields = [
            ("controller", self.controller.map(Value::Bool)),
            (
                "blockOwnerDeletion",
                self.block_owner_deletion.map(Value::Bool),
            ),
            ("apiVersion", owner.get("apiVersion").cloned()),
            ("kind", owner.get("kind").cloned()),
            ("name", meta("name").cloned()),
            ("uid", meta("uid").cloned()),
        ];
        Value::Object(
            fields
                .into_iter()
                .filter_map(|(key, value)| Some((key.to_owned(), value.filter(|v| !v.is_null())?)))
                .collect(),
        )
    }

    /// Kopf's `append_owner_reference`: adds the owner reference to each object
    /// that has none with the owner's uid (references are told apart by uid only).
    ///
    /// # Errors
    /// See the [module documentation](self).
    pub fn append_owner_reference(
        &self,
        objs: impl Objects,
        owner: &Value,
    ) -> Result<(), HierarchyError> {
        let reference = self.owner_reference(owner);
        change(
            objs,
            &|check, object| check.metadata(object, "", REFERENCES),
            |object| {
                append_reference(object, &reference);
            },
        )
    }

    /// Kopf's `remove_owner_reference`: removes every owner reference with the
    /// owner's uid. Objects get an (empty) `metadata.ownerReferences` if they had
    /// none, as in Kopf.
    ///
    /// # Errors
    /// See the [module documentation](self).
    pub fn remove_owner_reference(
        &self,
        objs: impl Objects,
        owner: &Value,
    ) -> Result<(), HierarchyError> {
        let uid = owner.pointer("/metadata/uid").filter(|uid| !uid.is_null());
        change(
            objs,
            &|check, object| check.metadata(object, "", REFERENCES),
            |object| {
                let Some(references) =
                    metadata(object).and_then(|m| array_at(m, "ownerReferences"))
                else {
                    return;
                };
                references.retain(|reference| reference.get("uid").filter(|u| !u.is_null()) != uid);
            },
        )
    }

    /// Kopf's `label`: sets each label an object does not have yet (every one when
    /// [`forced`](Self::forced)), on the objects and on their
    /// [`nested`](Self::nested) objects that exist. A `null` value is set as
    /// `null` (which removes the label when the object is sent as a merge patch).
    ///
    /// # Errors
    /// See the [module documentation](self); a nested field on the way that is
    /// not an object is an error too.
    pub fn label<K, V>(
        &self,
        objs: impl Objects,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), HierarchyError>
    where
        K: Into<String>,
        V: Into<Value>,
    {
        let labels: Vec<(String, Value)> = labels
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect();
        change(
            objs,
            &|check, object| self.check_labels(check, object),
            |object| {
                self.apply_labels(object, &labels);
            },
        )
    }

    /// Kopf's `harmonize_naming`: names each object that has neither
    /// `metadata.name` nor `metadata.generateName` (every one when
    /// [`forced`](Self::forced)): `generateName: "<name>-"` (the API server adds
    /// a random suffix; read the name from its answer), or with
    /// [`strict`](Self::strict) `name: "<name>"`. The other of the two goes.
    ///
    /// # Errors
    /// See the [module documentation](self).
    pub fn harmonize_naming(&self, objs: impl Objects, name: &str) -> Result<(), HierarchyError> {
        change(
            objs,
            &|check, object| check.metadata(object, "", &[]),
            |object| {
                self.apply_name(object, name);
            },
        )
    }

    /// Kopf's `adjust_namespace`: sets `metadata.namespace` where it is absent
    /// (everywhere when [`forced`](Self::forced)). `None` (the owner is
    /// cluster-scoped) sets it to `null`, as Kopf does.
    ///
    /// # Errors
    /// See the [module documentation](self).
    pub fn adjust_namespace(
        &self,
        objs: impl Objects,
        namespace: Option<&str>,
    ) -> Result<(), HierarchyError> {
        let namespace = namespace.map_or(Value::Null, Value::from);
        change(
            objs,
            &|check, object| check.metadata(object, "", &[]),
            |object| {
                self.apply_namespace(object, &namespace);
            },
        )
    }

    /// Kopf's `adopt`: the owner reference
    /// ([`append_owner_reference`](Self::append_owner_reference)), a name after
    /// the owner's ([`harmonize_naming`](Self::harmonize_naming)), the owner's
    /// namespace ([`adjust_namespace`](Self::adjust_namespace)) and labels
    /// ([`label`](Self::label), with the nested objects), with these options.
    ///
    /// Unlike Kopf, it refuses what Kubernetes' garbage collector would delete at once:
    /// an object of a namespaced owner that names another namespace (unless
    /// [`forced`](Self::forced), which puts it in the owner's), or that is of a kind
    /// Kubernetes serves cluster-scoped. A cluster-scoped owner may own anything.
    ///
    /// # Errors
    /// [`HierarchyError::OwnerWithoutName`] when the owner has no `metadata.name`
    /// (even if every object has its name);
    /// [`HierarchyError::OwnerInAnotherNamespace`] and
    /// [`HierarchyError::ClusterScopedChild`] as above; see the [module
    /// documentation](self).
    pub fn adopt(&self, objs: impl Objects, owner: &Value) -> Result<(), HierarchyError> {
        let owner_meta = owner.get("metadata").and_then(Value::as_object);
        let field = |key: &str| owner_meta.and_then(|meta| present(meta, key));
        let name = field("name")
            .and_then(Value::as_str)
            .ok_or(HierarchyError::OwnerWithoutName)?;
        let namespace = field("namespace").cloned().unwrap_or(Value::Null);
        let labels: Vec<(String, Value)> = field("labels")
            .and_then(Value::as_object)
            .map(|labels| labels.clone().into_iter().collect())
            .unwrap_or_default();
        let reference = self.owner_reference(owner);
        let check = |check: &Check, object: &Value| {
            check.metadata(object, "", REFERENCES)?;
            self.check_labels(check, object)?;
            check.scope(object, namespace.as_str(), self.forced)
        };
        change(objs, &check, |object| {
            append_reference(object, &reference);
            self.apply_name(object, name);
            self.apply_namespace(object, &namespace);
            self.apply_labels(object, &labels);
        })
    }

    fn check_labels(&self, check: &Check, object: &Value) -> Result<(), HierarchyError> {
        check.metadata(object, "", LABELS)?;
        for path in &self.nested {
            if let Some(nested) = check.nested(object, path)? {
                check.metadata(nested, &path.join("."), LABELS)?;
            }
        }
        Ok(())
    }

    fn apply_labels(&self, object: &mut Value, labels: &[(String, Value)]) {
        set_labels(object, labels, self.forced);
        for path in &self.nested {
            if let Some(nested) = nested_mut(object, path) {
                set_labels(nested, labels, self.forced);
            }
        }
    }

    fn apply_name(&self, object: &mut Value, name: &str) {
        let Some(meta) = metadata(object) else {
            return;
        };
        let unnamed = present(meta, "name").is_none() && present(meta, "generateName").is_none();
        if !(self.forced || unnamed) {
            return;
        }
        let (set, value, drop) = if self.strict {
            ("name", name.to_owned(), "generateName")
        } else {
            ("generateName", format!("{name}-"), "name")
        };
        meta.insert(set.to_owned(), Value::String(value));
        meta.remove(drop);
    }

    fn apply_namespace(&self, object: &mut Value, namespace: &Value) {
        let Some(meta) = metadata(object) else {
            return;
        };
        if self.forced || present(meta, "namespace").is_none() {
            meta.insert("namespace".to_owned(), namespace.clone());
        }
    }
}

/// Checks every object (so that nothing changes on an error), then changes each.
fn change(
    mut objs: impl Objects,
    check: &dyn Fn(&Check, &Value) -> Result<(), HierarchyError>,
    mut apply: impl FnMut(&mut Value),
) -> Result<(), HierarchyError> {
    let mut found = Vec::new();
    objs.objects_mut(&mut found);
    for (object, value) in found.iter().enumerate() {
        check(&Check { object }, value)?;
    }
    for value in found {
        apply(value);
    }
    Ok(())
}

/// The object's `metadata`, made if absent.
fn metadata(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object_at(object.as_object_mut()?, "metadata")
}

fn append_reference(object: &mut Value, reference: &Value) {
    let Some(references) = metadata(object).and_then(|m| array_at(m, "ownerReferences")) else {
        return;
    };
    let uid = reference.get("uid");
    if !references
        .iter()
        .any(|known| known.get("uid").filter(|u| !u.is_null()) == uid)
    {
        references.push(reference.clone());
    }
}

fn set_labels(object: &mut Value, labels: &[(String, Value)], forced: bool) {
    let Some(existing) = metadata(object).and_then(|m| object_at(m, "labels")) else {
        return;
    };
    for (key, value) in labels {
        if forced || !existing.contains_key(key) {
            existing.insert(key.clone(), value.clone());
        }
    }
}

/// Kopf's `kopf.adopt`: owns `objs` by `owner`, in its namespace, named after it
/// (by prefix), with its labels; see [`Options::adopt`] for the options.
///
/// ```
/// let owner = kapsel::json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
///     "metadata": {"name": "ex", "namespace": "ns", "uid": "u-1", "labels": {"app": "ex"}}});
/// let mut pod = kapsel::json!({"apiVersion": "v1", "kind": "Pod"});
/// kapsel::adopt(&mut pod, &owner)?;
/// assert_eq!(pod["metadata"], kapsel::json!({
///     "ownerReferences": [{"controller": true, "blockOwnerDeletion": true,
///         "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "ex", "uid": "u-1"}],
///     "generateName": "ex-",
///     "namespace": "ns",
///     "labels": {"app": "ex"},
/// }));
/// # Ok::<(), kapsel::hierarchies::HierarchyError>(())
/// ```
///
/// # Errors
/// See [`Options::adopt`].
pub fn adopt(objs: impl Objects, owner: &Value) -> Result<(), HierarchyError> {
    Options::new().adopt(objs, owner)
}

/// Kopf's `kopf.append_owner_reference`, as a controller that blocks the owner's
/// deletion; see [`Options::append_owner_reference`].
///
/// # Errors
/// See the [module documentation](self).
pub fn append_owner_reference(objs: impl Objects, owner: &Value) -> Result<(), HierarchyError> {
    Options::new().append_owner_reference(objs, owner)
}

/// Kopf's `kopf.remove_owner_reference`; see [`Options::remove_owner_reference`].
///
/// # Errors
/// See the [module documentation](self).
pub fn remove_owner_reference(objs: impl Objects, owner: &Value) -> Result<(), HierarchyError> {
    Options::new().remove_owner_reference(objs, owner)
}

/// Kopf's `kopf.label`: sets the labels the objects do not have yet; see
/// [`Options::label`].
///
/// ```
/// let mut job = kapsel::json!({"kind": "Job", "metadata": {"labels": {"tier": "mine"}}});
/// kapsel::label(&mut job, [("tier", "web"), ("app", "ex")])?;
/// assert_eq!(job["metadata"]["labels"], kapsel::json!({"tier": "mine", "app": "ex"}));
/// # Ok::<(), kapsel::hierarchies::HierarchyError>(())
/// ```
///
/// # Errors
/// See the [module documentation](self).
pub fn label<K, V>(
    objs: impl Objects,
    labels: impl IntoIterator<Item = (K, V)>,
) -> Result<(), HierarchyError>
where
    K: Into<String>,
    V: Into<Value>,
{
    Options::new().label(objs, labels)
}

/// Kopf's `kopf.harmonize_naming`: `generateName: "<name>-"` for objects without
/// a name; see [`Options::harmonize_naming`].
///
/// # Errors
/// See the [module documentation](self).
pub fn harmonize_naming(objs: impl Objects, name: &str) -> Result<(), HierarchyError> {
    Options::new().harmonize_naming(objs, name)
}

/// Kopf's `kopf.adjust_namespace`: the namespace of objects without one; see
/// [`Options::adjust_namespace`].
///
/// # Errors
/// See the [module documentation](self).
pub fn adjust_namespace(objs: impl Objects, namespace: Option<&str>) -> Result<(), HierarchyError> {
    Options::new().adjust_namespace(objs, namespace)
}

/// Kopf's `kopf.build_owner_reference`, as a controller that blocks the owner's
/// deletion; see [`Options::owner_reference`].
pub fn build_owner_reference(owner: &Value) -> Value {
    Options::new().owner_reference(owner)
}

#[cfg(test)]
mod tests;
