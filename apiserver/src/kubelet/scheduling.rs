//! The scheduler's part: which node takes a pod (kube-scheduler's filters that a node
//! without resources in use can fail: `spec.unschedulable`, a node not Ready, the pod's
//! `nodeSelector`), the binding that assigns it (the `pods/binding` subresource writes the
//! same), and the `PodScheduled=False` condition of a pod no node takes.

use crate::meta::{meta_str, now};
use crate::status::{ApiError, Target};
use crate::store::{ObjKey, ResKey, Store};
use serde_json::{Value, json};
use std::sync::Arc;

pub(crate) fn pods() -> ResKey {
    (String::new(), "pods".into())
}

fn nodes() -> ResKey {
    (String::new(), "nodes".into())
}

/// Whether kube-scheduler (`default-scheduler`) places this pod now: unassigned, not being
/// deleted, not terminated, without scheduling gates.
pub(crate) fn wants_scheduling(pod: &Value) -> bool {
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    let gated = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    text("/spec/nodeName").is_empty()
        && meta_str(pod, "deletionTimestamp").is_empty()
        && matches!(text("/spec/schedulerName"), "" | "default-scheduler")
        && matches!(text("/status/phase"), "" | "Pending")
        && !gated
}

/// Why a node does not take the pod (kube-scheduler's reason), if it does not.
fn unfit(node: &Value, pod: &Value) -> Option<&'static str> {
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        return Some("node(s) were unschedulable");
    }
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True");
    if !ready {
        return Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }");
    }
    let selector = pod.pointer("/spec/nodeSelector").and_then(Value::as_object);
    let labels = node.pointer("/metadata/labels");
    let matches = selector.is_none_or(|s| {
        s.iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    });
    (!matches).then_some("node(s) didn't match Pod's node affinity/selector")
}

/// The node that takes the pod, or kube-scheduler's message of why none does.
pub(crate) fn choose(store: &Store, pod: &Value) -> Result<String, String> {
    let nodes: Vec<&Value> = store.list(&nodes(), None).map(|(_, n)| n).collect();
    if nodes.is_empty() {
        return Err("no nodes available to schedule pods".into());
    }
    let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
    for node in &nodes {
        match unfit(node, pod) {
            None => return Ok(meta_str(node, "name").to_string()),
            Some(reason) => *reasons.entry(reason).or_default() += 1,
        }
    }
    let n = nodes.len();
    let mut counted: Vec<String> = reasons.iter().map(|(r, c)| format!("{c} {r}")).collect();
    counted.sort();
    Err(format!(
        "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
        counted.join(", ")
    ))
}

/// Sets (or replaces) the condition of `ty` in the pod's status, keeping its transition
/// time when its status does not change (kube's `UpdatePodCondition`).
pub(crate) fn set_condition(pod: &mut Value, mut condition: Value, now: &str) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let conditions = pod["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(list) = conditions.and_then(Value::as_array_mut) else {
        return;
    };
    let old = list.iter().position(|c| c["type"] == condition["type"]);
    let since = old
        .map(|i| &list[i])
        .filter(|c| c["status"] == condition["status"])
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    condition["lastProbeTime"] = Value::Null;
    condition["lastTransitionTime"] = since;
    match old {
        Some(i) => list[i] = condition,
        None => list.push(condition),
    }
}

/// Assigns the pod `key` to `node`, as `POST pods/NAME/binding` does (kube's
/// `BindingREST.assignPod`): `spec.nodeName`, the binding's `annotations` merged into the
/// pod's, and `PodScheduled=True`, in one write. `uid`, when given, must be the pod's (the
/// binding's precondition).
pub(crate) fn bind(
    store: &mut Store,
    key: &ObjKey,
    node: &str,
    uid: Option<&str>,
    annotations: Option<&serde_json::Map<String, Value>>,
) -> Result<Arc<Value>, ApiError> {
    let conflict = |message: String| {
        let target = Target {
            group: "",
            plural: "pods/binding",
            name: &key.1,
        };
        let mut e = ApiError::conflict(target);
        e.message = format!(
            "Operation cannot be fulfilled on pods/binding \"{}\": {message}",
            key.1
        );
        e
    };
    let res = pods();
    let pod = store.get(&res, key).ok_or_else(|| {
        ApiError::not_found(Target {
            group: "",
            plural: "pods",
            name: &key.1,
        })
    })?;
    if let Some(uid) = uid.filter(|u| !u.is_empty() && *u != meta_str(pod, "uid")) {
        return Err(conflict(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta_str(pod, "uid")
        )));
    }
    let name = &key.1;
    if !meta_str(pod, "deletionTimestamp").is_empty() {
        return Err(conflict(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        )));
    }
    let assigned = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !assigned.is_empty() {
        return Err(conflict(format!(
            "pod {name} is already assigned to node \"{assigned}\""
        )));
    }
    if pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        return Err(conflict(format!(
            "pod {name} has non-empty .spec.schedulingGates"
        )));
    }
    let mut bound = pod.clone();
    bound["spec"]["nodeName"] = json!(node);
    if let Some(given) = annotations.filter(|a| !a.is_empty()) {
        let meta = crate::meta::meta_mut(&mut bound);
        let merged = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(merged) = merged.as_object_mut() {
            merged.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    set_condition(
        &mut bound,
        json!({"type": "PodScheduled", "status": "True"}),
        &now(),
    );
    Ok(store.replace(&res, bound))
}

/// kube-scheduler's answer to a pod no node takes: `PodScheduled=False`, `Unschedulable`,
/// with its message (written once: the same message again is no write).
pub(crate) fn mark_unschedulable(store: &mut Store, key: &ObjKey, message: &str) {
    let res = pods();
    let Some(pod) = store.get(&res, key) else {
        return;
    };
    let current = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"));
    if current.is_some_and(|c| c["status"] == "False" && c["message"] == message) {
        return;
    }
    let mut pod = pod.clone();
    let condition = json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message});
    set_condition(&mut pod, condition, &now());
    store.replace(&res, pod);
}
