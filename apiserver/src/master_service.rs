//! The `default/kubernetes` Service every cluster has, with its Endpoints and
//! EndpointSlice, as kube-apiserver's controllers keep them: created at start when
//! missing, their ports set to the server's own when they differ (a restart on another
//! port), otherwise left alone.

use crate::objects::{Fields, Scope, commit_update, create};
use crate::store::Store;
use serde_json::{Value, json};
use std::net::SocketAddr;

/// The Service's cluster IP: the first address of kubeadm's service range (10.96.0.0/12).
const CLUSTER_IP: &str = "10.96.0.1";
const NAME: &str = "kubernetes";
const NAMESPACE: &str = "default";

/// The three objects for a server at `addr`: (group, plural, object).
fn desired(addr: SocketAddr) -> [(&'static str, &'static str, Value); 3] {
    let (ip, port) = (addr.ip().to_string(), addr.port());
    let meta = |labels: Value| json!({"name": NAME, "namespace": NAMESPACE, "labels": labels});
    let service = json!({
        "metadata": meta(json!({"component": "apiserver", "provider": "kubernetes"})),
        "spec": {
            "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}],
            "clusterIP": CLUSTER_IP,
            "clusterIPs": [CLUSTER_IP],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
        "status": {"loadBalancer": {}},
    });
    let endpoints = json!({
        "metadata": meta(json!({"endpointslice.kubernetes.io/skip-mirror": "true"})),
        "subsets": [{
            "addresses": [{"ip": ip}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }],
    });
    let slice = json!({
        "metadata": meta(json!({"kubernetes.io/service-name": NAME})),
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    [
        ("", "services", service),
        ("", "endpoints", endpoints),
        ("discovery.k8s.io", "endpointslices", slice),
    ]
}

/// Creates the Service, Endpoints and EndpointSlice when missing, and points them at
/// `addr` when they point elsewhere (the members the server owns are set; labels and
/// annotations an admin added stay).
pub(crate) fn reconcile(store: &mut Store, addr: SocketAddr) {
    for (group, plural, want) in desired(addr) {
        let Some(rt) = store
            .registry
            .all()
            .iter()
            .find(|t| t.group == group && t.plural == plural && t.preferred)
            .cloned()
        else {
            continue;
        };
        let scope = Scope {
            rt,
            ns: Some(NAMESPACE.into()),
        };
        let written = match store.get(&scope.res(), &scope.key(NAME)).cloned() {
            None => create(store, &scope, want, false, Fields::Keep).map(drop),
            Some(mut current) => {
                let owned = ["spec", "subsets", "addressType", "endpoints", "ports"];
                for member in owned.iter().filter_map(|k| want.get(*k).map(|v| (*k, v))) {
                    current[member.0] = member.1.clone();
                }
                commit_update(store, &scope, NAME, current, false, false, Fields::Keep).map(drop)
            }
        };
        if let Err(e) = written {
            tracing::warn!(%plural, error = ?e, "could not write the kubernetes service's object");
        }
    }
}
