//! CustomResourceDefinitions: validation, defaulting, status, and the types they serve.

use crate::registry::{ALL_VERBS, ResourceType};
use serde_json::{Value, json};

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = match cur.get(p) {
            Some(c) => c,
            None => return "",
        };
    }
    cur.as_str().unwrap_or("")
}

/// Problems kube's CRD validation reports (422), as `(field, message)` pairs.
pub(crate) fn validate(crd: &Value) -> Vec<(String, String)> {
    let mut problems = Problems::default();
    problems.group_and_names(crd);
    problems.scope(crd);
    problems.versions(crd);
    problems.0
}

/// The problems found so far, in the order kube reports them.
#[derive(Default)]
struct Problems(Vec<(String, String)>);

impl Problems {
    fn add(&mut self, field: &str, message: String) {
        self.0.push((field.to_string(), message));
    }

    /// `spec.group`, `spec.names` and the name they make (`<plural>.<group>`).
    fn group_and_names(&mut self, crd: &Value) {
        let group = s(crd, &["spec", "group"]);
        let plural = s(crd, &["spec", "names", "plural"]);
        let name = s(crd, &["metadata", "name"]);
        if group.is_empty() {
            self.add("spec.group", "Required value".into());
        } else if !group.contains('.') || !crate::validate::dns_subdomain(group) {
            self.add(
                "spec.group",
                format!("Invalid value: {group:?}: should be a domain with at least one dot"),
            );
        }
        if plural.is_empty() {
            self.add("spec.names.plural", "Required value".into());
        } else if !crate::validate::dns_label(plural) {
            self.add(
                "spec.names.plural",
                format!("Invalid value: {plural:?}: a lowercase RFC 1123 label"),
            );
        }
        if name != format!("{plural}.{group}") {
            self.add(
                "metadata.name",
                format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
            );
        }
        let singular = s(crd, &["spec", "names", "singular"]);
        if !singular.is_empty() && !crate::validate::dns_label(singular) {
            self.add(
                "spec.names.singular",
                format!("Invalid value: {singular:?}: a lowercase RFC 1123 label"),
            );
        }
        if s(crd, &["spec", "names", "kind"]).is_empty() {
            self.add("spec.names.kind", "Required value".into());
        }
        if let Some(shorts) = crd.pointer("/spec/names/shortNames") {
            let ok = shorts.as_array().is_some_and(|a| {
                a.iter()
                    .all(|x| x.as_str().is_some_and(crate::validate::dns_label))
            });
            if !ok {
                self.add(
                    "spec.names.shortNames",
                    "Invalid value: each must be a lowercase RFC 1123 label".into(),
                );
            }
        }
    }

    /// `spec.scope`: Namespaced or Cluster.
    fn scope(&mut self, crd: &Value) {
        match s(crd, &["spec", "scope"]) {
            "Namespaced" | "Cluster" => {}
            other => self.add(
                "spec.scope",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ),
        }
    }

    /// `spec.versions`: exactly one stored, each named, with a schema and boolean flags.
    fn versions(&mut self, crd: &Value) {
        let Some(vs) = crd.pointer("/spec/versions").and_then(Value::as_array) else {
            self.add(
                "spec.versions",
                "Required value: must have exactly one version marked as storage version".into(),
            );
            return;
        };
        if vs
            .iter()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .count()
            != 1
        {
            self.add(
                "spec.versions",
                "Invalid value: must have exactly one version marked as storage version".into(),
            );
        }
        for (i, v) in vs.iter().enumerate() {
            self.version(i, v);
        }
    }

    /// One entry of `spec.versions`.
    fn version(&mut self, i: usize, v: &Value) {
        let vn = s(v, &["name"]);
        if !crate::validate::dns_label(vn) {
            self.add(
                &format!("spec.versions[{i}].name"),
                format!("Invalid value: {vn:?}: a DNS-1035 label"),
            );
        }
        if !v
            .pointer("/schema/openAPIV3Schema")
            .is_some_and(Value::is_object)
        {
            self.add(
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "Required value: schemas are required".into(),
            );
        }
        if v.get("served").is_some_and(|x| !x.is_boolean())
            || v.get("storage").is_some_and(|x| !x.is_boolean())
        {
            self.add(
                &format!("spec.versions[{i}]"),
                "Invalid value: served and storage must be booleans".into(),
            );
        }
    }
}

/// kube's defaults: `names.singular` (lowercased kind), `names.listKind`, `conversion`.
pub(crate) fn default(crd: &mut Value) {
    let kind = s(crd, &["spec", "names", "kind"]).to_string();
    if let Some(names) = crd
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        if names
            .get("singular")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut)
        && !spec.contains_key("conversion")
    {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
}

/// Sets what kube's CRD controllers report once names are accepted: the conditions kubectl
/// waits on (`Established`, `NamesAccepted`), `acceptedNames` and `storedVersions`.
/// Kube does this a moment after creation; here it happens at once.
pub(crate) fn establish(crd: &mut Value, now: &str) {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let old = crd.get("status").cloned().unwrap_or(json!({}));
    let mut stored: Vec<Value> = old
        .get("storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for v in storage {
        if !stored.contains(&v) {
            stored.push(v);
        }
    }
    let cond = |ty: &str, reason: &str, message: &str| {
        // Keep the transition time when the condition already held.
        let since = old
            .get("conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
            })
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or(json!(now));
        json!({"type": ty, "status": "True", "lastTransitionTime": since, "reason": reason, "message": message})
    };
    let conditions = vec![
        cond("NamesAccepted", "NoConflicts", "no conflicts found"),
        cond(
            "Established",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
    ];
    crd["status"] =
        json!({"conditions": conditions, "acceptedNames": names, "storedVersions": stored});
}

/// Marks a CRD as terminating (kube's `Terminating` condition while instances are removed).
pub(crate) fn mark_terminating(crd: &mut Value, now: &str) {
    if let Some(cs) = crd
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        cs.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
        cs.push(json!({"type": "Terminating", "status": "True", "lastTransitionTime": now, "reason": "InstanceDeletionInProgress", "message": "CustomResource deletion is in progress"}));
    }
}

/// The resource types a (valid) CRD serves: one per served version.
pub(crate) fn types_of(crd: &Value) -> Vec<ResourceType> {
    let strs = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = s(crd, &["spec", "names", "kind"]).to_string();
    let singular = match s(crd, &["spec", "names", "singular"]) {
        "" => kind.to_lowercase(),
        x => x.to_string(),
    };
    let Some(versions) = crd.pointer("/spec/versions").and_then(Value::as_array) else {
        return Vec::new();
    };
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .map(|v| ResourceType {
            group: s(crd, &["spec", "group"]).to_string(),
            version: s(v, &["name"]).to_string(),
            kind: kind.clone(),
            plural: s(crd, &["spec", "names", "plural"]).to_string(),
            singular: singular.clone(),
            short_names: strs("/spec/names/shortNames"),
            categories: strs("/spec/names/categories"),
            namespaced: s(crd, &["spec", "scope"]) == "Namespaced",
            verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
            has_status: v
                .pointer("/subresources/status")
                .is_some_and(|x| !x.is_null()),
            preferred: v.get("storage").and_then(Value::as_bool) == Some(true),
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            custom: true,
            kind_schema: Default::default(),
        })
        .collect()
}
