//! The simulated node: the Node object its kubelet registers, and where it is reached.

use crate::objects::{Fields, Scope};
use crate::store::Store;
use serde_json::{Value, json};

/// The simulated node's name.
pub(crate) const NODE: &str = "kapsel-node";
/// Its InternalIP, the pods' `hostIP`.
pub(crate) const NODE_IP: &str = "172.18.0.2";
/// The kubelet's port (`status.daemonEndpoints.kubeletEndpoint.Port`).
pub(crate) const KUBELET_PORT: i64 = 10250;
/// The range its pods' IPs come from (`spec.podCIDR`).
const POD_CIDR: &str = "10.244.0.0/24";

/// The Node as a kubelet registers it: Ready, with its capacity, addresses and nodeInfo.
fn node(now: &str) -> Value {
    let condition = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "0"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {
                "kubernetes.io/hostname": NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/exclude-from-external-load-balancers": "",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kapsel.dev/simulated": "true"},
        },
        "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": NODE_IP},
                {"type": "Hostname", "address": NODE},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
            "nodeInfo": {
                "machineID": "6b617073656c2d6e6f64652d6d616368",
                "systemUUID": "6b617073-656c-2d6e-6f64-652d73797374",
                "bootID": "6b617073-656c-2d6e-6f64-652d626f6f74",
                "kernelVersion": "6.8.0-kapsel",
                "osImage": "Kapsel simulated node",
                "containerRuntimeVersion": "kapsel://simulated",
                "kubeletVersion": "v1.32.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    })
}

/// Registers the node unless the cluster has one of its name (kept from a state file,
/// or cordoned and left so).
pub(crate) fn register(store: &mut Store) {
    let Some(rt) = store.registry.find("", "v1", "nodes").cloned() else {
        return;
    };
    let scope = Scope { rt, ns: None };
    if store.get(&scope.res(), &scope.key(NODE)).is_some() {
        return;
    }
    let obj = node(&crate::meta::now());
    if let Err(e) = crate::objects::create(store, &scope, obj, false, Fields::Keep) {
        tracing::warn!(error = ?e, "could not register the simulated node");
    }
}

/// The address and port where a node's kubelet is reached, as kube-apiserver dials it.
pub(crate) fn kubelet_address(node: &Value) -> String {
    let ip = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .unwrap_or(NODE_IP);
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_i64)
        .unwrap_or(KUBELET_PORT);
    format!("{ip}:{port}")
}
