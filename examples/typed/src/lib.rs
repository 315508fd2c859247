//! Typed bodies with `k8s-openapi`: a guest that reads the parts of its Deployment
//! it needs with the Kubernetes types, and builds a Service's spec with them, rather
//! than with JSON.
//!
//! - `expose`: for each Deployment labelled `example.com/expose=yes`, a Service
//!   named as the Deployment, selecting its pods, on its containers' ports; owned
//!   by the Deployment ([`kapsel::adopt`]), so it goes when the Deployment goes.
//!
//! What the types cost (this crate's README has the figures): the code of every type a
//! guest reads or writes, and of every type inside it. A `LabelSelector`, a
//! `ContainerPort` and a `ServiceSpec` keep this guest at 178 KiB; writing a whole
//! `Service` (its `ObjectMeta` and `ServiceStatus`) takes it to 394 KiB, reading the
//! created one back as a `Service` to 431 KiB, and reading a whole `Deployment` (its
//! `PodSpec` and all within) besides to 580 KiB.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-typed`
//! (the component is `target/wasm32-wasip2/release/typed.wasm`).
//! Run: `kapsel run --embedded -A target/wasm32-wasip2/release/typed.wasm`, then
//! `kubectl create deployment web --image=nginx --port=80` and
//! `kubectl label deployment web example.com/expose=yes`.

use k8s_openapi::api::core::v1::{ContainerPort, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kapsel::api::Api;
use kapsel::hierarchies::Options;
use kapsel::serde::Deserialize;
use kapsel::{Cause, PermanentError, json, serde_json};

kapsel::permit!("v1", "services", verbs = ["create"]);

/// What `expose` reads of a Deployment's `spec`: the Kubernetes types where it reads a
/// whole thing (the selector, a container's ports), its own structs on the way to them.
/// serde skips the rest unread, and the guest carries no code for it.
#[derive(Deserialize)]
#[serde(crate = "kapsel::serde")]
struct DeploymentSpec {
    selector: LabelSelector,
    template: PodTemplate,
}

#[derive(Deserialize)]
#[serde(crate = "kapsel::serde")]
struct PodTemplate {
    spec: Option<PodSpec>,
}

#[derive(Deserialize)]
#[serde(crate = "kapsel::serde")]
struct PodSpec {
    containers: Vec<Container>,
}

#[derive(Deserialize)]
#[serde(crate = "kapsel::serde")]
struct Container {
    ports: Option<Vec<ContainerPort>>,
}

/// A Service for the Deployment: its pods' labels as the selector, its containers'
/// ports as the ports.
#[kapsel::on::create("apps", "v1", "deployments", labels("example.com/expose" = "yes"))]
fn expose(cause: &Cause) -> kapsel::Result<()> {
    let spec: DeploymentSpec = cause.spec_as()?;
    let selector = spec.selector.match_labels.unwrap_or_default();
    if selector.is_empty() {
        return Err(PermanentError::new("the pods are selected by expressions only").into());
    }
    let ports: Vec<ServicePort> = spec
        .template
        .spec
        .into_iter()
        .flat_map(|pod| pod.containers)
        .flat_map(|container| container.ports.unwrap_or_default())
        .map(|port| ServicePort {
            name: port.name,
            port: port.container_port,
            protocol: port.protocol,
            target_port: Some(IntOrString::Int(port.container_port)),
            ..ServicePort::default()
        })
        .collect();
    if ports.is_empty() {
        return Err(PermanentError::new("no container declares a port").into());
    }
    let service_spec = ServiceSpec {
        selector: Some(selector),
        ports: Some(ports),
        ..ServiceSpec::default()
    };
    // The hierarchy helpers and the API calls work on JSON: the typed spec becomes
    // JSON once, here. The name, namespace and owner come from `adopt`.
    let service_spec = serde_json::to_value(&service_spec)?;
    let mut body = json!({"apiVersion": "v1", "kind": "Service", "spec": service_spec});
    Options::new().strict(true).adopt(&mut body, cause.body())?;
    let created = Api::of(&body).create(&body)?;
    kapsel::info!(
        "exposed on {} port(s) as service {}",
        created["spec"]["ports"].as_array().map_or(0, Vec::len),
        created["metadata"]["name"].as_str().unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Outcome};
    use kapsel::{Reason, Value, json};

    fn deployment(ports: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"namespace": "default", "name": "web", "uid": "uid-web",
                            "labels": {"example.com/expose": "yes"}},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx",
                                                              "ports": ports}]}}}})
    }

    fn expose(body: Value) -> Outcome {
        testing::reset();
        let mut cause = testing::cause()
            .handler_id("expose")
            .changing(Reason::Create)
            .body(body)
            .build();
        testing::invoke(&mut cause).outcome
    }

    #[test]
    fn the_service_selects_the_pods_on_their_ports() {
        let ports = json!([{"name": "http", "containerPort": 80, "protocol": "TCP"}]);
        assert_eq!(expose(deployment(ports)), Outcome::Done(None));
        let service = testing::api::get("v1", "Service", Some("default"), "web").expect("created");
        assert_eq!(
            service["spec"],
            json!({"selector": {"app": "web"},
                   "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]})
        );
        assert_eq!(
            service["metadata"]["ownerReferences"][0],
            json!({"controller": true, "blockOwnerDeletion": true, "apiVersion": "apps/v1",
                   "kind": "Deployment", "name": "web", "uid": "uid-web"})
        );
        assert_eq!(
            testing::logs()[0].message,
            "exposed on 1 port(s) as service web"
        );
    }

    #[test]
    fn nothing_to_expose_fails_for_good() {
        assert_eq!(
            expose(deployment(json!([]))),
            Outcome::Permanent("no container declares a port".into())
        );
        let mut selected_otherwise = deployment(json!([{"containerPort": 80}]));
        selected_otherwise["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]});
        assert_eq!(
            expose(selected_otherwise),
            Outcome::Permanent("the pods are selected by expressions only".into())
        );
    }

    #[test]
    fn a_spec_without_a_selector_is_an_error() {
        let outcome = expose(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                                    "spec": {"template": {}}}));
        assert!(
            matches!(&outcome, Outcome::Failed(message) if message.contains("`selector`")),
            "{outcome:?}"
        );
    }
}
