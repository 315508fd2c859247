//! The `scale` subresource (`autoscaling/v1` Scale) of deployments, replicasets,
//! statefulsets, and custom resources whose CRD declares `subresources.scale`.

use crate::objects::Scope;
use crate::registry::ResourceType;
use crate::status::ApiError;
use crate::store::{CRDS, Store, meta_str};
use serde_json::{Value, json};

/// Where an object keeps what its Scale shows: JSON paths like `.spec.replicas`.
#[derive(Debug, Clone)]
pub(crate) struct ScalePaths {
    spec: String,
    status: String,
    /// The label selector: a path to a string (CRDs) or, for built-ins, `.spec.selector`.
    selector: Option<String>,
}

/// The scale paths of a type, when it has the subresource.
pub(crate) fn paths(store: &Store, rt: &ResourceType) -> Option<ScalePaths> {
    if !rt.custom {
        return matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("apps", "deployments" | "replicasets" | "statefulsets")
        )
        .then(|| ScalePaths {
            spec: ".spec.replicas".into(),
            status: ".status.replicas".into(),
            selector: Some(".spec.selector".into()),
        });
    }
    let res = (CRDS.0.to_string(), CRDS.1.to_string());
    let crd = store.get(
        &res,
        &(String::new(), format!("{}.{}", rt.plural, rt.group)),
    )?;
    let version = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(rt.version.as_str()))?;
    let scale = version.pointer("/subresources/scale")?;
    let s = |k: &str| scale.get(k).and_then(Value::as_str).map(String::from);
    Some(ScalePaths {
        spec: s("specReplicasPath")?,
        status: s("statusReplicasPath")?,
        selector: s("labelSelectorPath"),
    })
}

fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, seg| format!("{acc}/{seg}"))
}

/// The Scale view of an object.
pub(crate) fn to_scale(obj: &Value, p: &ScalePaths) -> Value {
    let meta: serde_json::Map<String, Value> = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ]
    .iter()
    .filter(|k| !meta_str(obj, k).is_empty())
    .map(|k| (k.to_string(), json!(meta_str(obj, k))))
    .collect();
    let replicas = |path: &str| {
        obj.pointer(&pointer(path))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let mut status = json!({"replicas": replicas(&p.status)});
    if let Some(sel) = p
        .selector
        .as_deref()
        .and_then(|s| obj.pointer(&pointer(s)))
        .and_then(crate::selectors::selector_string)
    {
        status["selector"] = json!(sel);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": {"replicas": replicas(&p.spec)}, "status": status})
}

/// The object with the replicas a Scale asks for; the Scale's resourceVersion, if any, is a
/// precondition.
pub(crate) fn apply_scale(
    scope: &Scope,
    name: &str,
    obj: &Value,
    scale: &Value,
    p: &ScalePaths,
) -> Result<Value, ApiError> {
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if replicas < 0 || scale.pointer("/spec/replicas").is_some_and(|r| !r.is_i64()) {
        return Err(ApiError::invalid(
            scope.target(name),
            "Scale",
            &[(
                "spec.replicas".into(),
                "Invalid value: must be greater than or equal to 0".into(),
            )],
        ));
    }
    let mut out = obj.clone();
    let rv = meta_str(scale, "resourceVersion");
    if !rv.is_empty() {
        crate::meta::meta_mut(&mut out).insert("resourceVersion".into(), json!(rv));
    }
    let mut cur = &mut out;
    let ptr = pointer(&p.spec);
    let segs: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        let Some(m) = cur.as_object_mut() else {
            return Err(ApiError::internal(
                "the object's scale path does not lead to an object",
            ));
        };
        if i + 1 == segs.len() {
            m.insert(seg.to_string(), json!(replicas));
            break;
        }
        cur = m.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
    Ok(out)
}
