//! What one handler call costs: the bench guest's `create_fn` on a realistic Pod of
//! about 4 KB through the host's real path ([`kapsel_host::HandlerCall`]: the cause
//! handed over, a fresh sandboxed instance, the guest reads the name and patches, the
//! host reads the reply back), beside the same logic as a native Rust function, which
//! reads the Pod's name alone as the SDK does (with serde, which tokenises the rest to
//! skip it, where the SDK only scans its structure), and beside native parsing the Pod
//! whole (as a kube-rs operator is handed it). Calls one after the other on one task,
//! so calls per second are per core.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use kapsel_host::HandlerReply;
use serde::Serialize;
use serde_json::{Value, json};

/// The handler measured: sets `status.phase` through the patch and returns a map.
const HANDLER: &str = "create_fn";

/// How long each side is measured (after a warm-up of a tenth of that).
const MEASURED: Duration = Duration::from_secs(2);

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Invocation {
    pub(crate) handler: String,
    pub(crate) body_bytes: usize,
    /// Through the host, a fresh instance per call.
    pub(crate) call_us: f64,
    /// The 99th percentile of those calls, each timed alone.
    pub(crate) call_p99_us: f64,
    /// The same work natively: the body's name read with serde, the rest skipped.
    pub(crate) native_us: f64,
    /// Natively with the body parsed whole, as a native (kube-rs) operator is handed it.
    pub(crate) native_whole_us: f64,
    pub(crate) calls: u64,
}

impl Invocation {
    pub(crate) fn calls_per_second(&self) -> f64 {
        1e6 / self.call_us
    }
}

/// Measures both sides with the guest at `guest`.
pub(crate) async fn measure(guest: &Path) -> Result<Invocation, String> {
    let body = pod().to_string();
    let call = kapsel_host::HandlerCall::load(guest, HANDLER, &body)
        .await
        .map_err(|e| kapsel_host::error_chain(&e))?;
    // The same work on both sides: the same patch and result back.
    let guest_reply = call
        .call()
        .await
        .map_err(|e| kapsel_host::error_chain(&e))?;
    for native_reply in [native(&body), native_whole(&body)] {
        if native_reply.as_ref() != Some(&guest_reply) {
            return Err(format!(
                "the guest handed back {guest_reply:?}, the native function {native_reply:?}: not the same work"
            ));
        }
    }
    let mut error = None;
    let mut each_us: Vec<f64> = Vec::new();
    let (call_us, calls) = timed(async || {
        let started = Instant::now();
        if let Err(e) = call.call().await {
            error.get_or_insert(kapsel_host::error_chain(&e));
        }
        each_us.push(started.elapsed().as_secs_f64() * 1e6);
    })
    .await;
    // The warm-up's calls too: a p99 of calls as they come, not of the best ones.
    each_us.sort_by(f64::total_cmp);
    let call_p99_us = crate::stats::percentile(&each_us, 99.0).unwrap_or(call_us);
    if let Some(error) = error {
        return Err(error);
    }
    let natively = async |work: fn(&str) -> Option<HandlerReply>| {
        timed(async || {
            black_box(work(black_box(&body)));
        })
        .await
        .0
    };
    let native_us = natively(native).await;
    let native_whole_us = natively(native_whole).await;
    Ok(Invocation {
        handler: HANDLER.to_owned(),
        body_bytes: body.len(),
        call_us,
        call_p99_us,
        native_us,
        native_whole_us,
        calls,
    })
}

/// µs per run of `once`, run for [`MEASURED`] after a warm-up, and the measured runs.
async fn timed(mut once: impl AsyncFnMut()) -> (f64, u64) {
    let warm_up = Instant::now();
    while warm_up.elapsed() < MEASURED / 10 {
        once().await;
    }
    let (started, mut runs) = (Instant::now(), 0_u64);
    while started.elapsed() < MEASURED {
        once().await;
        runs += 1;
    }
    let us = started.elapsed().as_secs_f64() * 1e6 / runs.max(1) as f64;
    (us, runs)
}

/// `create_fn` natively, and what the host does with its reply: the body read as a
/// native handler written with serde reads what it needs (the name into a struct of
/// its own, the rest skipped, which serde does by tokenising it; the SDK only scans its
/// structure), the patch and the result built and serialised (as a guest hands them
/// over), both read back. None for a body that is no JSON object.
fn native(body: &str) -> Option<HandlerReply> {
    #[derive(serde::Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(serde::Deserialize, Default)]
    struct Metadata {
        name: Option<String>,
    }
    let object = serde_json::from_str::<Object>(body).ok()?;
    reply(object.metadata.name.as_deref())
}

/// The same with the body parsed whole, as a native operator has it (kube-rs
/// deserialises every object it watches).
fn native_whole(body: &str) -> Option<HandlerReply> {
    let object = serde_json::from_str::<Value>(body).ok()?;
    reply(object["metadata"]["name"].as_str())
}

/// The handler's logic and the reading of its reply.
fn reply(name: Option<&str>) -> Option<HandlerReply> {
    let name = name.unwrap_or_default();
    let patch = json!({"status": {"phase": "Created"}}).to_string();
    let result = json!({"message": format!("created {name}")}).to_string();
    Some(HandlerReply {
        patch: Some(serde_json::from_str(&patch).ok()?),
        result: serde_json::from_str(&result).ok()?,
    })
}

/// A Pod as the API server serves it: metadata with labels, annotations, an owner and
/// managed fields, two containers, volumes, a status with conditions (about 4 KB).
fn pod() -> Value {
    let container = |name: &str, image: &str, port: u16| {
        json!({
            "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": true},
                             {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
        })
    };
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-30T10:00:05Z"});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8b6c5d-x2k4q", "generateName": "web-7d9f8b6c5d-", "namespace": "shop",
            "uid": "5f0c8d1e-3b2a-4c6d-9e8f-1a2b3c4d5e6f", "resourceVersion": "184467",
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "shop", "pod-template-hash": "7d9f8b6c5d"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-29T08:00:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d", "uid": "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app.kubernetes.io/name": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {".": {}}},
                                            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}]
        },
        "spec": {
            "containers": [container("web", "registry.example.com/shop/web:1.42.0", 8080),
                           container("metrics", "registry.example.com/shop/exporter:0.9.1", 9090)],
            "volumes": [{"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                        {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "web", "nodeName": "node-3", "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.3.17", "podIP": "10.244.3.42", "podIPs": [{"ip": "10.244.3.42"}],
            "startTime": "2026-11-30T10:00:00Z", "qosClass": "Burstable",
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": [
                {"name": "web", "ready": true, "restartCount": 0, "started": true, "image": "registry.example.com/shop/web:1.42.0",
                 "imageID": "registry.example.com/shop/web@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
                 "containerID": "containerd://9b1f0c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "state": {"running": {"startedAt": "2026-11-30T10:00:03Z"}}},
                {"name": "metrics", "ready": true, "restartCount": 0, "started": true, "image": "registry.example.com/shop/exporter:0.9.1",
                 "imageID": "registry.example.com/shop/exporter@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9",
                 "containerID": "containerd://1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b", "state": {"running": {"startedAt": "2026-11-30T10:00:04Z"}}}
            ]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_is_realistic_in_size_and_the_native_side_does_the_work() {
        let body = pod().to_string();
        assert!((3500..5000).contains(&body.len()), "{} bytes", body.len());
        let expected = Some(HandlerReply {
            patch: Some(json!({"status": {"phase": "Created"}})),
            result: json!({"message": "created web-7d9f8b6c5d-x2k4q"}),
        });
        assert_eq!(native(&body), expected);
        assert_eq!(native_whole(&body), expected);
        for broken in ["not json", &body[..body.len() - 1]] {
            assert_eq!(native(broken), None);
            assert_eq!(native_whole(broken), None);
        }
    }
}
