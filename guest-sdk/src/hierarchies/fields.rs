//! The fields the hierarchy helpers touch: checked before any change (so that an
//! error leaves every object as it was), then reached for changing.
//!
//! `null` counts as absent everywhere, as a missing attribute does in Kopf's
//! handling of the Kubernetes client's models: a body serialised from a typed
//! object may well carry `"labels": null`.

use std::fmt;

use serde_json::{Map, Value};

/// Why a hierarchy helper changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HierarchyError {
    /// An object, or a field the helper must change or walk through, has a type
    /// Kubernetes never gives it (Kopf's `TypeError`): a string where an object
    /// is expected, `metadata.ownerReferences` that is not a list...
    Malformed {
        /// Which object, counting from 0 in the order they were walked
        /// (arrays flattened, `null`s skipped).
        object: usize,
        /// The field, dotted (`metadata.labels`); empty for the object itself.
        field: String,
        /// What it should be: `an object`, `an array`.
        expected: &'static str,
        /// What it is: `a string`, `a number`, ...
        found: &'static str,
    },
    /// [`adopt`](super::adopt) needs the owner's `metadata.name` to name the
    /// children after (Kopf's `LookupError`).
    OwnerWithoutName,
    /// [`adopt`](super::adopt): the object names another namespace than its namespaced
    /// owner's. Kubernetes looks a namespaced owner up in its dependent's namespace
    /// only: its garbage collector would take the owner for absent and delete the
    /// object at once. (Kopf keeps the namespace, and the object is lost.)
    OwnerInAnotherNamespace {
        /// Which object, counting from 0 as in [`HierarchyError::Malformed`].
        object: usize,
        /// The namespace it names.
        namespace: String,
        /// Its owner's.
        owner_namespace: String,
    },
    /// [`adopt`](super::adopt): the object is of a kind Kubernetes serves
    /// cluster-scoped (a `Namespace`, a `ClusterRole`...) and its owner is namespaced:
    /// only a cluster-scoped owner holds a cluster-scoped object (the garbage collector
    /// deletes it otherwise). The scope of a custom resource is not checked: a guest
    /// does not know it.
    ClusterScopedChild {
        /// Which object, counting from 0 as in [`HierarchyError::Malformed`].
        object: usize,
        /// Its kind.
        kind: String,
    },
}

impl fmt::Display for HierarchyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed {
                object,
                field,
                expected,
                found,
            } if field.is_empty() => write!(f, "object {object} is {found}, not {expected}"),
            Self::Malformed {
                object,
                field,
                expected,
                found,
            } => write!(f, "object {object}: {field} is {found}, not {expected}"),
            Self::OwnerWithoutName => f.write_str(
                "the owner has no metadata.name to name its children after: set the name explicitly",
            ),
            Self::OwnerInAnotherNamespace {
                object,
                namespace,
                owner_namespace,
            } => write!(
                f,
                "object {object} is in namespace {namespace:?} and its owner in \
                 {owner_namespace:?}: Kubernetes would delete it at once (a namespaced owner \
                 must be in its dependent's namespace); leave its namespace out, or do not \
                 own it"
            ),
            Self::ClusterScopedChild { object, kind } => write!(
                f,
                "object {object} is a {kind}, cluster-scoped, and its owner is namespaced: \
                 Kubernetes would delete it at once (only a cluster-scoped owner holds a \
                 cluster-scoped object); do not own it"
            ),
        }
    }
}

impl std::error::Error for HierarchyError {}

/// The JSON type of a value, for messages.
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What a field must be when present (and not `null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Object,
    Array,
}

impl Shape {
    fn fits(self, value: &Value) -> bool {
        match self {
            Self::Object => value.is_object(),
            Self::Array => value.is_array(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Object => "an object",
            Self::Array => "an array",
        }
    }
}

/// Checks one object of the walk: itself an object, with `metadata` an object and
/// each of `fields` (under `metadata`) of its shape, where present.
pub(super) struct Check {
    /// The object's position in the walk, for the error.
    pub(super) object: usize,
}

impl Check {
    fn malformed(&self, field: String, shape: Shape, found: &Value) -> HierarchyError {
        HierarchyError::Malformed {
            object: self.object,
            field,
            expected: shape.name(),
            found: type_of(found),
        }
    }

    /// `value` (at `prefix`, empty for the object itself) is an object whose
    /// `metadata` and `metadata.<field>`s have their shapes where present.
    pub(super) fn metadata(
        &self,
        value: &Value,
        prefix: &str,
        fields: &[(&str, Shape)],
    ) -> Result<(), HierarchyError> {
        let Value::Object(object) = value else {
            return Err(self.malformed(prefix.to_owned(), Shape::Object, value));
        };
        let dotted = |field: &str| {
            if prefix.is_empty() {
                field.to_owned()
            } else {
                format!("{prefix}.{field}")
            }
        };
        let metadata = match object.get("metadata") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::Object(metadata)) => metadata,
            Some(other) => return Err(self.malformed(dotted("metadata"), Shape::Object, other)),
        };
        for &(field, shape) in fields {
            match metadata.get(field) {
                None | Some(Value::Null) => {}
                Some(value) if shape.fits(value) => {}
                Some(other) => {
                    return Err(self.malformed(dotted(&format!("metadata.{field}")), shape, other));
                }
            }
        }
        Ok(())
    }

    /// The nested object at `path` in `value` (Kopf's `nested=`), if there is one:
    /// absent or `null` fields on the way mean none; anything else but an object
    /// is an error.
    pub(super) fn nested<'v>(
        &self,
        value: &'v Value,
        path: &[String],
    ) -> Result<Option<&'v Value>, HierarchyError> {
        let mut current = value;
        for (depth, key) in path.iter().enumerate() {
            current = match current {
                Value::Object(object) => match object.get(key) {
                    Some(next) => next,
                    None => return Ok(None),
                },
                Value::Null => return Ok(None),
                other => {
                    return Err(self.malformed(path[..depth].join("."), Shape::Object, other));
                }
            };
        }
        Ok((!current.is_null()).then_some(current))
    }
}

/// The nested object at `path` in `value`, to change; `None` where [`Check::nested`]
/// found none.
pub(super) fn nested_mut<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    let mut current = value;
    for key in path {
        current = current.as_object_mut()?.get_mut(key)?;
    }
    current.is_object().then_some(current)
}

/// `object[key]` as an object, made one if absent or `null`; `None` for another
/// type (which the checks have ruled out).
pub(super) fn object_at<'m>(
    object: &'m mut Map<String, Value>,
    key: &str,
) -> Option<&'m mut Map<String, Value>> {
    let slot = object.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// `object[key]` as an array, made one if absent or `null`; `None` for another
/// type (which the checks have ruled out).
pub(super) fn array_at<'m>(
    object: &'m mut Map<String, Value>,
    key: &str,
) -> Option<&'m mut Vec<Value>> {
    let slot = object.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
}

/// `object[key]`, treating `null` as absent.
pub(super) fn present<'m>(object: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    object.get(key).filter(|value| !value.is_null())
}
