//! Defaulting kube-apiserver applies to built-in objects on every write, so that objects read
//! back here look like those a real cluster returns (operators comparing desired and actual
//! state see the same differences as in production).

use serde_json::{Map, Value, json};

fn set_default(m: &mut Map<String, Value>, k: &str, v: Value) {
    if m.get(k).is_none_or(Value::is_null) {
        m.insert(k.to_string(), v);
    }
}

/// Applies the defaults of the object's type, if it has any here.
pub(crate) fn apply(group: &str, plural: &str, obj: &mut Value) {
    match (group, plural) {
        ("", "pods") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec);
            }
        }
        ("apps", "deployments") => deployment(obj),
        ("", "configmaps") => canonical_base64(obj, "binaryData"),
        ("", "services") => {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                set_default(spec, "type", json!("ClusterIP"));
                set_default(spec, "sessionAffinity", json!("None"));
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(p, "protocol", json!("TCP"));
                        if let Some(port) = p.get("port").cloned() {
                            set_default(p, "targetPort", port);
                        }
                    }
                }
            }
        }
        ("", "secrets") => {
            secret(obj);
            canonical_base64(obj, "data");
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            webhooks(obj, false);
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => webhooks(obj, true),
        _ => {}
    }
}

/// kube's `admissionregistration/v1` defaults of each webhook (a null is absent, as
/// Kopf writes `objectSelector: null`): `failurePolicy: Fail`, `matchPolicy:
/// Equivalent`, empty namespace and object selectors (everything), `timeoutSeconds: 10`,
/// a mutating one's `reinvocationPolicy: Never`, each rule's `scope: "*"`, a Service's
/// `port: 443`.
fn webhooks(obj: &mut Value, mutating: bool) {
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
        set_default(hook, "failurePolicy", json!("Fail"));
        set_default(hook, "matchPolicy", json!("Equivalent"));
        set_default(hook, "namespaceSelector", json!({}));
        set_default(hook, "objectSelector", json!({}));
        set_default(hook, "timeoutSeconds", json!(10));
        if mutating {
            set_default(hook, "reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                set_default(rule, "scope", json!("*"));
            }
        }
        let service = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut);
        if let Some(service) = service {
            set_default(service, "port", json!(443));
        }
    }
}

/// `stringData` is write-only: kube folds it into `data` (base64) and never stores it.
fn secret(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    set_default(m, "type", json!("Opaque"));
    let Some(Value::Object(sd)) = m.remove("stringData") else {
        return;
    };
    let data = m.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Some(d) = data.as_object_mut() {
        for (k, v) in sd {
            let text = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            d.insert(k, json!(crate::protobuf::base64(text.as_bytes())));
        }
    }
}

fn deployment(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    set_default(spec, "strategy", json!({}));
    if let Some(s) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        set_default(s, "type", json!("RollingUpdate"));
        if s.get("type") == Some(&json!("RollingUpdate")) {
            set_default(s, "rollingUpdate", json!({}));
            if let Some(r) = s.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                set_default(r, "maxSurge", json!("25%"));
                set_default(r, "maxUnavailable", json!("25%"));
            }
        }
    }
    if let Some(pod) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        pod_spec(pod);
    }
}

/// kube's pod spec defaults (those every pod shows when read back).
fn pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    set_default(s, "restartPolicy", json!("Always"));
    set_default(s, "terminationGracePeriodSeconds", json!(30));
    set_default(s, "dnsPolicy", json!("ClusterFirst"));
    set_default(s, "securityContext", json!({}));
    set_default(s, "schedulerName", json!("default-scheduler"));
    set_default(s, "enableServiceLinks", json!(true));
    for key in ["containers", "initContainers"] {
        if let Some(cs) = s.get_mut(key).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                container(c);
            }
        }
    }
}

fn container(c: &mut Map<String, Value>) {
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    // Untagged or `:latest` images are pulled always; others if not present.
    let last = image.rsplit('/').next().unwrap_or("");
    let latest = !image.contains('@') && (!last.contains(':') || last.ends_with(":latest"));
    set_default(
        c,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
        }
    }
}

/// Bytes fields (a ConfigMap's `binaryData`, a Secret's `data`) as kube-apiserver serves
/// them: it decodes them on the way in (Go's base64 skips line breaks, which kustomize's
/// `configMapGenerator` writes every 76 characters) and encodes them again on the way
/// out, in one line. A value that is not base64 is left as sent.
fn canonical_base64(obj: &mut Value, field: &str) {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let Some(values) = obj.get_mut(field).and_then(Value::as_object_mut) else {
        return;
    };
    for value in values.values_mut() {
        let Some(text) = value.as_str() else { continue };
        if !text.contains(['\r', '\n']) {
            continue;
        }
        let joined: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        if let Ok(bytes) = engine.decode(&joined) {
            *value = Value::String(engine.encode(bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_and_secrets() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "r.io/x:1.2"}]}});
        apply("", "pods", &mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            pod["spec"]["containers"][1]["imagePullPolicy"],
            "IfNotPresent"
        );
        let mut s = json!({"stringData": {"p": "q"}, "data": {"a": "Yg=="}});
        apply("", "secrets", &mut s);
        assert_eq!(
            s,
            json!({"data": {"a": "Yg==", "p": "cQ=="}, "type": "Opaque"})
        );
    }

    #[test]
    fn webhooks_get_kubes_defaults_and_a_null_is_absent() {
        let mut config = json!({"webhooks": [{
            "name": "x", "objectSelector": null, "failurePolicy": "Ignore",
            "rules": [{"operations": ["*"]}],
            "clientConfig": {"service": {"namespace": "n", "name": "s"}},
        }]});
        apply(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            &mut config,
        );
        assert_eq!(
            config["webhooks"][0],
            json!({
                "name": "x", "objectSelector": {}, "namespaceSelector": {},
                "failurePolicy": "Ignore", "matchPolicy": "Equivalent", "timeoutSeconds": 10,
                "reinvocationPolicy": "Never",
                "rules": [{"operations": ["*"], "scope": "*"}],
                "clientConfig": {"service": {"namespace": "n", "name": "s", "port": 443}},
            })
        );
        let mut validating = json!({"webhooks": [{"name": "y"}]});
        apply(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            &mut validating,
        );
        assert!(
            validating["webhooks"][0]
                .get("reinvocationPolicy")
                .is_none()
        );
        assert_eq!(validating["webhooks"][0]["timeoutSeconds"], 10);
    }
}
