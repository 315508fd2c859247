//! The pod statuses the simulated kubelet writes, shaped as kube's kubelet writes them
//! (`generateAPIPodStatus`; KWOK's pod stages): containers being created (Pending),
//! running and ready (Running), completed (Succeeded).

use super::scheduling::set_condition;
use serde_json::{Value, json};

/// The names of the pod's containers of `kind` (`containers`, `initContainers`).
fn names(pod: &Value, kind: &str) -> Vec<String> {
    containers(pod, kind)
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

fn containers<'a>(pod: &'a Value, kind: &str) -> &'a [Value] {
    pod.pointer(&format!("/spec/{kind}"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

/// Go's `%v` of a string slice: `[a b]`.
fn listed(names: &[String]) -> String {
    format!("[{}]", names.join(" "))
}

/// A hex digest of `parts` (stable ids for images and containers).
fn digest(parts: &[&str]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, parts.join("/").as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A container's status with `state`; `ready`, `started` as given.
fn container_status(pod: &Value, c: &Value, state: Value, ready: bool, started: bool) -> Value {
    let name = c["name"].as_str().unwrap_or("");
    let image = c["image"].as_str().unwrap_or("");
    let repo = match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    };
    let mut status = json!({
        "name": name,
        "image": image,
        "imageID": format!("{repo}@sha256:{}", digest(&[image])),
        "ready": ready,
        "started": started,
        "restartCount": 0,
        "state": state,
    });
    if state_has_started(&status["state"]) {
        let uid = pod
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        status["containerID"] = json!(format!("containerd://{}", digest(&[uid, name])));
    }
    status
}

fn state_has_started(state: &Value) -> bool {
    state.get("running").is_some() || state.get("terminated").is_some()
}

/// The pod's conditions, all at once: `None` is True, else False with its reason and
/// message (each left out when empty, as kube leaves them).
fn conditions(pod: &mut Value, now: &str, steps: &[(&str, Option<(&str, String)>)]) {
    for (ty, why) in steps {
        let mut condition = json!({"type": ty, "status": "True"});
        if let Some((reason, message)) = why {
            condition["status"] = json!("False");
            if !reason.is_empty() {
                condition["reason"] = json!(reason);
            }
            if !message.is_empty() {
                condition["message"] = json!(message);
            }
        }
        set_condition(pod, condition, now);
    }
}

/// The kubelet's first status: the pod admitted, its containers being created.
pub(super) fn creating(pod: &Value, now: &str, host_ip: &str) -> Value {
    let mut pod = pod.clone();
    let inits = names(&pod, "initContainers");
    let unready = listed(&names(&pod, "containers"));
    let not_ready = Some((
        "ContainersNotReady",
        format!("containers with unready status: {unready}"),
    ));
    let initialized = (!inits.is_empty()).then(|| {
        (
            "ContainersNotInitialized",
            format!("containers with incomplete status: {}", listed(&inits)),
        )
    });
    conditions(
        &mut pod,
        now,
        &[
            ("PodReadyToStartContainers", Some(("", String::new()))),
            ("Initialized", initialized),
            ("Ready", not_ready.clone()),
            ("ContainersReady", not_ready),
        ],
    );
    let waiting = if inits.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let statuses = |kind: &str, pod: &Value| -> Vec<Value> {
        containers(pod, kind)
            .iter()
            .map(|c| {
                container_status(
                    pod,
                    c,
                    json!({"waiting": {"reason": waiting}}),
                    false,
                    false,
                )
            })
            .collect()
    };
    let status = &mut pod["status"];
    status["hostIP"] = json!(host_ip);
    status["hostIPs"] = json!([{"ip": host_ip}]);
    status["startTime"] = json!(now);
    let snapshot = pod.clone();
    pod["status"]["containerStatuses"] = json!(statuses("containers", &snapshot));
    if !inits.is_empty() {
        pod["status"]["initContainerStatuses"] = json!(statuses("initContainers", &snapshot));
    }
    pod
}

/// Running: every container started and ready (init containers completed), the pod's IP.
pub(super) fn running(pod: &Value, now: &str, pod_ip: &str) -> Value {
    let mut pod = pod.clone();
    conditions(
        &mut pod,
        now,
        &[
            ("PodReadyToStartContainers", None),
            ("Initialized", None),
            ("Ready", None),
            ("ContainersReady", None),
        ],
    );
    let snapshot = pod.clone();
    let started = json!({"running": {"startedAt": now}});
    let main: Vec<Value> = containers(&snapshot, "containers")
        .iter()
        .map(|c| container_status(&snapshot, c, started.clone(), true, true))
        .collect();
    let completed = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}});
    let inits: Vec<Value> = containers(&snapshot, "initContainers")
        .iter()
        .map(|c| container_status(&snapshot, c, completed.clone(), true, false))
        .collect();
    let status = &mut pod["status"];
    status["phase"] = json!("Running");
    status["podIP"] = json!(pod_ip);
    status["podIPs"] = json!([{"ip": pod_ip}]);
    status["containerStatuses"] = json!(main);
    if !inits.is_empty() {
        status["initContainerStatuses"] = json!(inits);
    }
    pod
}

/// Succeeded: every container terminated with exit code 0 (`Completed`).
pub(super) fn succeeded(pod: &Value, now: &str) -> Value {
    let mut pod = pod.clone();
    let completed = Some(("PodCompleted", String::new()));
    conditions(
        &mut pod,
        now,
        &[
            ("PodReadyToStartContainers", Some(("", String::new()))),
            ("Initialized", None),
            ("Ready", completed.clone()),
            ("ContainersReady", completed),
        ],
    );
    if let Some(list) = pod
        .pointer_mut("/status/containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for c in list.iter_mut() {
            let started_at = c
                .pointer("/state/running/startedAt")
                .cloned()
                .unwrap_or(json!(now));
            c["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started_at, "finishedAt": now, "containerID": c["containerID"].clone()}});
            c["ready"] = json!(false);
            c["started"] = json!(false);
        }
    }
    pod["status"]["phase"] = json!("Succeeded");
    pod
}
