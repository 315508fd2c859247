//! One object or many (Kopf's `K8sObjects`): what the hierarchy helpers accept.

use serde_json::Value;

/// The objects a hierarchy helper changes: one object, or a list of them, nested
/// to any depth (Kopf's `K8sObjects`, flattened as Kopf's `dicts.walk` does).
///
/// Implemented for:
/// - [`Value`]: a JSON object is one object; an array is its items, each walked
///   the same way; `null` is no object (Kopf skips `None`); any other value is an
///   object of the wrong type, which the helpers report as an error;
/// - slices, arrays and `Vec`s of anything that implements it;
/// - `&mut` of anything that implements it, so that separate variables can be
///   changed together: `kapsel::adopt([&mut deployment, &mut service], owner)`.
///
/// ```
/// use kapsel::hierarchies::Objects;
/// use kapsel::{Value, json};
///
/// let mut one = json!({"kind": "Service"});
/// let mut many = vec![json!({"kind": "Job"}), json!([{"kind": "Pod"}, null])];
/// let mut found = Vec::new();
/// (&mut one).objects_mut(&mut found);
/// many.objects_mut(&mut found);
/// let kinds: Vec<&Value> = found.iter().map(|object| &object["kind"]).collect();
/// assert_eq!(kinds, [&json!("Service"), &json!("Job"), &json!("Pod")]);
/// ```
pub trait Objects {
    /// Appends the objects this holds to `found`, in order, without `null`s and
    /// with lists flattened.
    fn objects_mut<'a>(&'a mut self, found: &mut Vec<&'a mut Value>);
}

impl Objects for Value {
    fn objects_mut<'a>(&'a mut self, found: &mut Vec<&'a mut Value>) {
        match self {
            Value::Array(items) => {
                for item in items {
                    item.objects_mut(found);
                }
            }
            Value::Null => {}
            // Objects, and values of the wrong type for the helpers to report.
            other => found.push(other),
        }
    }
}

impl<T: Objects> Objects for [T] {
    fn objects_mut<'a>(&'a mut self, found: &mut Vec<&'a mut Value>) {
        for item in self {
            item.objects_mut(found);
        }
    }
}

impl<T: Objects, const N: usize> Objects for [T; N] {
    fn objects_mut<'a>(&'a mut self, found: &mut Vec<&'a mut Value>) {
        self.as_mut_slice().objects_mut(found);
    }
}

impl<T: Objects> Objects for Vec<T> {
    fn objects_mut<'a>(&'a mut self, found: &mut Vec<&'a mut Value>) {
        self.as_mut_slice().objects_mut(found);
    }
}

impl<T: Objects + ?Sized> Objects for &mut T {
    fn objects_mut<'a>(&'a mut self, found: &mut Vec<&'a mut Value>) {
        (**self).objects_mut(found);
    }
}
