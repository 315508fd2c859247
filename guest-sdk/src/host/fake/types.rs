//! The resource types and objects the fake API knows: how a selector finds a type,
//! plural rules, which kinds are cluster-scoped, permission matching, merge patches and
//! metadata helpers.

use serde_json::{Map, Value};

use crate::host::ApiError;
use crate::selector::{ResourceName, Selector};

/// A resource type the fake has seen.
#[derive(Debug, Clone)]
pub(super) struct Type {
    pub(super) api_version: String,
    pub(super) group: String,
    pub(super) version: String,
    pub(super) kind: String,
    pub(super) plural: String,
    pub(super) namespaced: bool,
}

/// Kinds that are cluster-scoped on every cluster, so that creating one without
/// a namespace does not put it into the current object's.
pub(super) const CLUSTER_SCOPED: [&str; 12] = [
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The plural Kubernetes derives for a CRD's kind, for the common cases.
pub(super) fn plural_of(name: &str) -> String {
    let lower = name.to_lowercase();
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if lower.ends_with(['s', 'x']) || lower.ends_with("ch") || lower.ends_with("sh") {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

pub(super) fn name_text(name: &ResourceName) -> &str {
    match name {
        ResourceName::Any(t)
        | ResourceName::Kind(t)
        | ResourceName::Plural(t)
        | ResourceName::Singular(t)
        | ResourceName::Shortcut(t)
        | ResourceName::Category(t) => t,
    }
}

impl Type {
    pub(super) fn from_object(object: &Value) -> Option<Self> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        if kind.is_empty() {
            return None;
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let namespaced = match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(ns) => !ns.is_empty(),
            None => false,
        };
        Some(Self {
            api_version: api_version.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            plural: plural_of(kind),
            namespaced,
        })
    }

    pub(super) fn is_named(&self, name: &ResourceName) -> bool {
        let kind_lower = self.kind.to_lowercase();
        match name {
            ResourceName::Any(n) => {
                let n = n.to_lowercase();
                n == kind_lower || n == self.plural
            }
            ResourceName::Kind(n) | ResourceName::Singular(n) => n.to_lowercase() == kind_lower,
            ResourceName::Plural(n) => n.to_lowercase() == self.plural,
            ResourceName::Shortcut(_) | ResourceName::Category(_) => false,
        }
    }

    pub(super) fn is_selected(&self, selector: &Selector) -> bool {
        selector.group.as_ref().is_none_or(|g| *g == self.group)
            && selector.version.as_ref().is_none_or(|v| *v == self.version)
            && self.is_named(&selector.name)
    }

    pub(super) fn holds(&self, object: &Value) -> bool {
        object.get("apiVersion").and_then(Value::as_str) == Some(&self.api_version)
            && object.get("kind").and_then(Value::as_str) == Some(&self.kind)
    }
}

/// Names that may mean the same resource: equal in any case, or one the plural of
/// the other (`configmaps` / `ConfigMap`).
pub(super) fn loosely_same(a: &str, b: &str) -> bool {
    let (a, b) = (a.to_lowercase(), b.to_lowercase());
    a == b || plural_of(&a) == b || plural_of(&b) == a
}

/// Whether a declared permission's target covers a call's target (of the type
/// `ty`, when the fake knows it). Groups and versions must agree where both say.
pub(super) fn covers(permitted: &Selector, called: &Selector, ty: Option<&Type>) -> bool {
    let agree = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    agree(&permitted.group, &called.group)
        && agree(&permitted.version, &called.version)
        && (loosely_same(name_text(&permitted.name), name_text(&called.name))
            || ty.is_some_and(|t| t.is_named(&permitted.name) && t.is_named(&called.name)))
}

/// Kopf's `name.version.group` form of a selector.
pub(super) fn target_text(selector: &Selector) -> String {
    let mut text = name_text(&selector.name).to_owned();
    for part in [&selector.version, &selector.group].into_iter().flatten() {
        if !part.is_empty() {
            text.push('.');
            text.push_str(part);
        }
    }
    text
}

/// The `permit!` arguments that would allow a call, for the refusal's message.
pub(super) fn suggested_permit(selector: &Selector, ty: Option<&Type>, verb: &str) -> String {
    let name = match (&selector.name, ty) {
        (ResourceName::Any(n) | ResourceName::Plural(n), _) => n.clone(),
        (_, Some(ty)) => ty.plural.clone(),
        (other, None) => plural_of(name_text(other)),
    };
    let group = selector
        .group
        .clone()
        .or_else(|| ty.map(|t| t.group.clone()));
    let version = selector
        .version
        .clone()
        .or_else(|| ty.map(|t| t.version.clone()));
    let selector = match (group.as_deref(), version.as_deref()) {
        (Some(""), Some("v1")) => format!("\"v1\", \"{name}\""),
        (Some(group), Some(version)) => format!("\"{group}\", \"{version}\", \"{name}\""),
        (Some(group), None) => format!("\"{group}\", \"{name}\""),
        (None, Some(version)) => format!("\"{name}.{version}\""),
        (None, None) => format!("\"{name}\""),
    };
    format!("kapsel::permit!({selector}, verbs = [\"{verb}\"]);")
}

pub(super) fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(400, "BadRequest", message)
}

pub(super) fn not_found(resource: &str, name: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
}

/// RFC 7386: objects merge recursively, `null` removes, anything else replaces.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(fields) = target {
        for (key, value) in patch {
            if value.is_null() {
                fields.remove(key);
            } else {
                merge_patch(fields.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

pub(super) fn meta_str<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get(key)?.as_str()
}

pub(super) fn set_meta(object: &mut Value, key: &str, value: Value) {
    if let Value::Object(fields) = object {
        let metadata = fields
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(metadata) = metadata {
            metadata.insert(key.to_owned(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plurals() {
        for (kind, plural) in [
            ("ConfigMap", "configmaps"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
            ("Box", "boxes"),
            ("KopfExample", "kopfexamples"),
        ] {
            assert_eq!(plural_of(kind), plural);
        }
    }

    #[test]
    fn merge_patches() {
        let mut target = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge_patch(
            &mut target,
            &json!({"a": {"b": null, "e": 3}, "d": {"x": 1}}),
        );
        assert_eq!(target, json!({"a": {"c": 2, "e": 3}, "d": {"x": 1}}));
    }

    #[test]
    fn permissions_are_matched_loosely() {
        let sel = |g: Option<&str>, v: Option<&str>, name: ResourceName| Selector::new(g, v, name);
        let declared = sel(Some(""), Some("v1"), ResourceName::Any("configmaps".into()));
        assert!(covers(
            &declared,
            &sel(None, None, ResourceName::Kind("ConfigMap".into())),
            None
        ));
        assert!(covers(
            &declared,
            &sel(Some(""), Some("v1"), ResourceName::Any("configmap".into())),
            None
        ));
        assert!(!covers(
            &declared,
            &sel(
                Some("apps"),
                Some("v1"),
                ResourceName::Any("configmaps".into())
            ),
            None
        ));
        assert!(!covers(
            &declared,
            &sel(Some(""), Some("v1"), ResourceName::Any("secrets".into())),
            None
        ));
        assert_eq!(
            suggested_permit(
                &sel(Some(""), Some("v1"), ResourceName::Any("secrets".into())),
                None,
                "get"
            ),
            r#"kapsel::permit!("v1", "secrets", verbs = ["get"]);"#
        );
        assert_eq!(
            target_text(&sel(
                Some("kopf.dev"),
                Some("v1"),
                ResourceName::Kind("KopfExample".into())
            )),
            "KopfExample.v1.kopf.dev"
        );
    }
}
