//! Where a webhook's `clientConfig.service` is served: one of the Service's endpoints, as
//! kube-apiserver finds it with endpoint routing (`--enable-aggregator-routing`; this
//! server has no cluster network to reach a Service's cluster IP): the Service's port
//! whose `port` the webhook names, the ready address of its `Endpoints` that serves the
//! port of that name, over HTTPS, trusting a certificate for `<name>.<namespace>.svc`.

use serde_json::Value;

use crate::store::Store;

/// The URL of one of the Service's endpoints (with the webhook's path) and the name its
/// certificate must have; or kube's reason why there is none.
pub(super) fn resolve(store: &Store, service: &Value) -> Result<(String, String), String> {
    let text = |key: &str| service.get(key).and_then(Value::as_str).unwrap_or("");
    let (namespace, name, path) = (text("namespace"), text("name"), text("path"));
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    let core = |plural: &str| (String::new(), plural.to_owned());
    let key = (namespace.to_owned(), name.to_owned());
    let svc = store
        .get(&core("services"), &key)
        .ok_or_else(|| format!("services {name:?} not found"))?;
    let kind = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !matches!(kind, "ClusterIP" | "LoadBalancer" | "NodePort") {
        return Err(format!("unsupported service type {kind:?}"));
    }
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array);
    let service_port = ports
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
        .ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
    let port_name = service_port
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let no_endpoints = || format!("no endpoints available for service {name:?}");
    let endpoints = store
        .get(&core("endpoints"), &key)
        .ok_or_else(no_endpoints)?;
    let subsets = endpoints.get("subsets").and_then(Value::as_array);
    for subset in subsets.into_iter().flatten() {
        let addresses = subset.get("addresses").and_then(Value::as_array);
        let Some(ip) = addresses
            .into_iter()
            .flatten()
            .find_map(|a| a.get("ip").and_then(Value::as_str))
        else {
            continue;
        };
        let ports = subset.get("ports").and_then(Value::as_array);
        let served = ports
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name);
        if let Some(target) = served.and_then(|p| p.get("port")).and_then(Value::as_i64) {
            let host = if ip.contains(':') {
                format!("[{ip}]")
            } else {
                ip.to_owned()
            };
            let url = format!("https://{host}:{target}{path}");
            return Ok((url, format!("{name}.{namespace}.svc")));
        }
    }
    Err(no_endpoints())
}
