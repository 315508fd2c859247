//! Kopf's children example (`examples/02-children`), and the operator it leads to:
//! objects a handler creates through `kapsel::api`, made children of the object
//! being handled with [`kapsel::adopt`] (Kopf's `kopf.adopt`): an owner reference
//! (Kubernetes deletes them with their owner), the owner's namespace, a name after
//! the owner's, and the owner's labels.
//!
//! - `child_pod`: Kopf's `create_fn` of `02-children`. A busybox Pod that echoes
//!   `spec.field` and sleeps `spec.duration`, named by prefix (`generateName:
//!   kopf-example-1-`, the API server adds a suffix); its uid goes into
//!   `status.child_pod.children`.
//! - `web`: a Deployment and a Service named exactly as the owner (`strict`), the
//!   Deployment's pods labelled too (`nested = "spec.template"`); a retry after
//!   a partial failure finds the first one created and goes on.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-children`
//! (the component is `target/wasm32-wasip2/release/children.wasm`).
//! Run: `kapsel run --embedded -A target/wasm32-wasip2/release/children.wasm`, apply
//! `examples/manifests/kopfexample-obj.yaml`, then `kubectl get pods,deploy,svc`;
//! deleting the kopfexample deletes them.

use kapsel::api::{Api, ApiError};
use kapsel::hierarchies::Options;
use kapsel::{Cause, Value, json};

kapsel::permit!("v1", "pods", verbs = ["create"]);
kapsel::permit!("apps", "v1", "deployments", verbs = ["create"]);
kapsel::permit!("v1", "services", verbs = ["create"]);

/// The label that ties the web pods to their Deployment and Service.
const INSTANCE: &str = "app.kubernetes.io/instance";

/// Kopf's `create_fn` of `02-children`: one Pod, adopted, created; its uid is the result.
#[kapsel::on::create("kopfexamples")]
fn child_pod(cause: &Cause) -> kapsel::Result<Value> {
    let spec = cause.spec();
    // Python's f-string of the spec's values: strings as they are, `0` when absent.
    let text = |key: &str, default: &str| match spec.get(key) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => default.to_owned(),
    };
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{
            "name": "the-only-one",
            "image": "busybox",
            "command": ["sh", "-x", "-c"],
            "args": [format!("echo \"FIELD=$FIELD\"\nsleep {}\n", text("duration", "0"))],
            "env": [{"name": "FIELD", "value": text("field", "default-value")}],
        }]},
    });
    // Make it our child: namespace, name prefix, labels, owner reference.
    kapsel::adopt(&mut pod, cause.body())?;
    let created = Api::of(&pod).create(&pod)?;
    Ok(json!({"children": [created["metadata"]["uid"]]}))
}

/// A web Deployment and its Service, both named as the owner and owned by it.
#[kapsel::on::create("kopfexamples")]
fn web(cause: &Cause) -> kapsel::Result<Value> {
    let name = cause.name().unwrap_or_default();
    let selector = Value::Object([(INSTANCE.to_owned(), json!(name))].into_iter().collect());
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "web", "image": "nginx",
                                         "ports": [{"containerPort": 80}]}]},
            },
        },
    });
    let mut service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "spec": {"selector": selector, "ports": [{"port": 80, "targetPort": 80}]},
    });
    Options::new()
        .strict(true)
        .nested("spec.template")
        .adopt([&mut deployment, &mut service], cause.body())?;
    create(&deployment)?;
    create(&service)?;
    Ok(
        json!({"deployment": deployment["metadata"]["name"], "service": service["metadata"]["name"]}),
    )
}

/// Creates `object`; one that exists already (from an attempt that failed later) is fine.
fn create(object: &Value) -> Result<(), ApiError> {
    match Api::of(object).create(object) {
        Err(error) if !error.is_already_exists() => Err(error),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use kapsel::api::ApiError;
    use kapsel::testing::{self, Outcome};
    use kapsel::{Reason, Value, json};

    fn owner() -> Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"namespace": "default", "name": "kopf-example-1", "uid": "uid-1",
                            "labels": {"somelabel": "somevalue"}},
               "spec": {"duration": "1m", "field": "value"}})
    }

    fn call(id: &str) -> testing::Reply {
        testing::reset();
        let mut cause = testing::cause()
            .handler_id(id)
            .changing(Reason::Create)
            .body(owner())
            .build();
        testing::invoke(&mut cause)
    }

    fn owned_by_the_kopfexample(object: &Value) {
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([{"controller": true, "blockOwnerDeletion": true, "apiVersion": "kopf.dev/v1",
                    "kind": "KopfExample", "name": "kopf-example-1", "uid": "uid-1"}])
        );
        assert_eq!(object["metadata"]["namespace"], "default");
        assert_eq!(object["metadata"]["labels"]["somelabel"], "somevalue");
    }

    #[test]
    fn the_pod_is_adopted_and_named_by_prefix() {
        let reply = call("child_pod");
        let objects = testing::api::objects();
        assert_eq!(objects.len(), 1);
        let pod = &objects[0];
        owned_by_the_kopfexample(pod);
        assert_eq!(pod["metadata"]["generateName"], "kopf-example-1-");
        let name = pod["metadata"]["name"].as_str().expect("a generated name");
        assert!(
            name.starts_with("kopf-example-1-") && name.len() > 15,
            "{name}"
        );
        assert_eq!(
            pod["spec"]["containers"][0]["args"][0],
            "echo \"FIELD=$FIELD\"\nsleep 1m\n"
        );
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"children": [pod["metadata"]["uid"]]})))
        );
    }

    #[test]
    fn the_web_children_are_adopted_with_exact_names() {
        let reply = call("web");
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(
                json!({"deployment": "kopf-example-1", "service": "kopf-example-1"})
            ))
        );
        let deployment =
            testing::api::get("apps/v1", "Deployment", Some("default"), "kopf-example-1")
                .expect("the deployment");
        let service = testing::api::get("v1", "Service", Some("default"), "kopf-example-1")
            .expect("the service");
        owned_by_the_kopfexample(&deployment);
        owned_by_the_kopfexample(&service);
        assert_eq!(
            deployment["spec"]["template"]["metadata"]["labels"],
            json!({"app.kubernetes.io/instance": "kopf-example-1", "somelabel": "somevalue"})
        );
        assert_eq!(
            service["spec"]["selector"],
            json!({"app.kubernetes.io/instance": "kopf-example-1"})
        );
    }

    #[test]
    fn a_retry_goes_on_past_what_exists() {
        testing::reset();
        // An earlier attempt created the deployment, then failed on the service.
        testing::api::insert(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "default", "name": "kopf-example-1"}}));
        let mut cause = testing::cause()
            .handler_id("web")
            .changing(Reason::Create)
            .body(owner())
            .build();
        let reply = testing::invoke(&mut cause);
        assert!(matches!(reply.outcome, Outcome::Done(_)), "{reply:?}");
        assert!(testing::api::get("v1", "Service", Some("default"), "kopf-example-1").is_some());
        // Any other failure is the handler's error (retried, as Kopf's are).
        testing::api::fail_next(
            "create",
            ApiError::new(500, "InternalError", "etcd is down"),
        );
        let reply = testing::invoke(&mut cause);
        assert_eq!(
            reply.outcome,
            Outcome::Failed("InternalError (500): etcd is down".into())
        );
    }
}
