//! `apiregistration.k8s.io/v1` APIServices: one per served group-version, as
//! kube-aggregator's registration controllers keep them — made at start for the
//! built-in groups (`automanaged: onstart`), made and removed with the CRDs for theirs
//! (`automanaged: true`), all local and always Available. Clients look for the group
//! (kube-rs's discovery tests, `kubectl get apiservices`); nothing is proxied.

use serde_json::{Value, json};

use crate::meta::now;
use crate::store::{ResKey, Store, meta_str};

const GROUP: &str = "apiregistration.k8s.io";
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// kube-apiserver's priorities of the built-in group-versions the dev cluster serves
/// (`cmd/kube-apiserver/app/aggregator.go`): (group, version, group minimum, version).
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("apiregistration.k8s.io", "v1", 18000, 15),
];

/// A CRD group's priorities (kube's crdregistration controller).
const CRD_PRIORITY: (i64, i64) = (1000, 100);

fn res() -> ResKey {
    (GROUP.to_string(), "apiservices".to_string())
}

/// The APIService of one served group-version, named `name`.
fn desired(name: &str, group: &str, version: &str, custom: bool) -> Value {
    let ((group_min, version_priority), managed) =
        match PRIORITIES.iter().find(|p| (p.0, p.1) == (group, version)) {
            Some(p) if !custom => ((p.2, p.3), "onstart"),
            _ => (CRD_PRIORITY, "true"),
        };
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "APIService",
        "metadata": {
            "name": name,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": now(),
            "generation": 1,
            "labels": {AUTOMANAGED: managed},
        },
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_min,
            "versionPriority": version_priority,
        },
        "status": {"conditions": [{
            "type": "Available",
            "status": "True",
            "lastTransitionTime": now(),
            "reason": "Local",
            "message": "Local APIServices are always available",
        }]},
    })
}

/// Makes the APIServices of the served group-versions that have none, and removes the
/// automanaged ones whose group-version is no longer served (a CRD deleted). One an
/// admin made, or changed, is left as it is.
pub(crate) fn reconcile(store: &mut Store) {
    if store.registry.find(GROUP, "v1", "apiservices").is_none() {
        return;
    }
    // (name, group, version, custom), each served group-version once.
    let mut served: Vec<(String, &str, &str, bool)> = Vec::new();
    for t in store.registry.all() {
        let name = format!("{}.{}", t.version, t.group);
        if !served.iter().any(|s| s.0 == name) {
            served.push((name, &t.group, &t.version, t.custom));
        }
    }
    let res = res();
    let existing: Vec<(String, bool)> = store
        .list(&res, None)
        .map(|(_, o)| {
            let managed = o
                .pointer(&format!(
                    "/metadata/labels/{}",
                    AUTOMANAGED.replace('/', "~1")
                ))
                .is_some();
            (meta_str(o, "name").to_string(), managed)
        })
        .collect();
    let missing: Vec<Value> = served
        .iter()
        .filter(|(name, ..)| !existing.iter().any(|(n, _)| n == name))
        .map(|(name, group, version, custom)| desired(name, group, version, *custom))
        .collect();
    let unserved: Vec<String> = existing
        .into_iter()
        .filter(|(name, managed)| *managed && !served.iter().any(|s| &s.0 == name))
        .map(|(name, _)| name)
        .collect();
    for obj in missing {
        store.insert(&res, obj);
    }
    for name in unserved {
        store.remove(&res, &(String::new(), name));
    }
}

/// The served types changed (a CRD came, changed or went): the registry is rebuilt and
/// the APIServices follow.
pub(crate) fn types_changed(store: &mut Store) {
    store.rebuild_registry();
    reconcile(store);
}
