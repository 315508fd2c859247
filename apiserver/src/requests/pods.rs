//! The subresources of pods that kube serves besides `status`: `binding` (what
//! kube-scheduler writes), `eviction` (policy/v1 Eviction: a graceful delete; no
//! PodDisruptionBudget is consulted), `ephemeralcontainers`, `log` (the simulated kubelet's
//! log: empty or `Config::pod_log`), and `exec`, `attach`, `portforward`, which answer as
//! kube-apiserver does when the pod's kubelet cannot be reached (no container runs here).
//! Also a DELETE's `gracePeriodSeconds`.

use super::{Call, parse_object};
use crate::gc::Propagation;
use crate::kubelet::{node, scheduling};
use crate::meta::meta_str;
use crate::objects::Fields;
use crate::status::{ApiError, json_response};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, header};
use serde_json::{Value, json};
use std::collections::HashMap;

/// A pod's subresource, other than `status` and `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PodSub {
    Binding,
    Eviction,
    EphemeralContainers,
    Log,
    /// `exec`, `attach`, `portforward`: streams to a container (`portforward`: to the pod).
    Stream(Stream),
}

impl PodSub {
    pub(super) fn of(sub: &str) -> Option<Self> {
        Some(match sub {
            "binding" => PodSub::Binding,
            "eviction" => PodSub::Eviction,
            "ephemeralcontainers" => PodSub::EphemeralContainers,
            "log" => PodSub::Log,
            "exec" => PodSub::Stream(Stream::Exec),
            "attach" => PodSub::Stream(Stream::Attach),
            "portforward" => PodSub::Stream(Stream::PortForward),
            _ => return None,
        })
    }
}

/// A stream to a pod's container, or to the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    Exec,
    Attach,
    PortForward,
}

impl Stream {
    /// Its subresource and the kind of its options.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Stream::Exec => ("exec", "PodExecOptions"),
            Stream::Attach => ("attach", "PodAttachOptions"),
            Stream::PortForward => ("portforward", "PodPortForwardOptions"),
        }
    }

    /// The connection's options, read from the query as kube decodes them.
    fn options(self, query: &HashMap<String, String>) -> Value {
        let (_, kind) = self.names();
        let mut options = json!({"kind": kind, "apiVersion": "v1"});
        let flag = |key: &str| {
            query
                .get(key)
                .is_some_and(|v| matches!(v.as_str(), "true" | "1"))
        };
        match self {
            Stream::Exec | Stream::Attach => {
                for key in ["stdin", "stdout", "stderr", "tty"] {
                    if flag(key) {
                        options[key] = json!(true);
                    }
                }
                if let Some(container) = query.get("container") {
                    options["container"] = json!(container);
                }
                if self == Stream::Exec {
                    let command: Vec<&String> = query.get("command").into_iter().collect();
                    options["command"] = json!(command);
                }
            }
            Stream::PortForward => {
                if let Some(ports) = query.get("ports") {
                    let ports: Vec<i64> = ports
                        .split(',')
                        .filter_map(|p| p.trim().parse().ok())
                        .collect();
                    options["ports"] = json!(ports);
                }
            }
        }
        options
    }
}

/// A DELETE's `gracePeriodSeconds`: from its DeleteOptions body, else from the query.
pub(super) fn grace_period(
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<Option<i64>, ApiError> {
    let from_body = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|o| o.get("gracePeriodSeconds").and_then(Value::as_i64));
    if from_body.is_some() {
        return Ok(from_body);
    }
    match query.get("gracePeriodSeconds").filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {text:?}: invalid syntax"
            ))
        }),
    }
}

/// Serves a request for a pod's subresource.
pub(super) async fn serve(call: &Call<'_>, sub: PodSub, name: &str) -> Result<Response, ApiError> {
    let method = call.method;
    match (sub, method) {
        (PodSub::Binding, &Method::POST) => bind(call, name),
        (PodSub::Eviction, &Method::POST) => evict(call, name),
        (PodSub::EphemeralContainers, &Method::GET) => super::reads::get(call, name),
        (PodSub::EphemeralContainers, &Method::PUT | &Method::PATCH) => {
            ephemeral_containers(call, name)
        }
        (PodSub::Log, &Method::GET) => log(call, name),
        (PodSub::Stream(kind), &Method::GET | &Method::POST) => stream(call, name, kind).await,
        _ => Err(ApiError::method_not_allowed(&format!(
            "{method} on this resource"
        ))),
    }
}

/// 201 with a Success Status, as kube answers a binding and an eviction.
fn created() -> Response {
    json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

/// The stored pod, or kube's 404.
fn pod(call: &Call<'_>, name: &str) -> Result<Value, ApiError> {
    let store = call.shared.lock();
    store
        .get(&call.scope.res(), &call.scope.key(name))
        .cloned()
        .ok_or_else(|| ApiError::not_found(call.scope.target(name)))
}

/// POST pods/NAME/binding: assigns the pod to the Binding's `target` node.
fn bind(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let binding = parse_object(call.content_type, call.body)?;
    if meta_str(&binding, "name") != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let target = call.scope.target(name);
    if !kind.is_empty() && kind != "Node" {
        return Err(ApiError::invalid(
            target,
            "Binding",
            &[(
                "target.kind".into(),
                format!("Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""),
            )],
        ));
    }
    if node.is_empty() {
        return Err(ApiError::invalid(
            target,
            "Binding",
            &[("target.name".into(), "Required value".into())],
        ));
    }
    if call.dry {
        return Ok(created());
    }
    let uid = meta_str(&binding, "uid");
    let key = call.scope.key(name);
    let annotations = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object);
    scheduling::bind(&mut call.shared.lock(), &key, node, Some(uid), annotations)?;
    Ok(created())
}

/// POST pods/NAME/eviction: deletes the pod with the Eviction's DeleteOptions, gracefully
/// as a DELETE does. PodDisruptionBudgets are not consulted (no eviction is refused).
fn evict(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let eviction = parse_object(call.content_type, call.body)?;
    if meta_str(&eviction, "name") != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = eviction.get("deleteOptions").cloned().unwrap_or(json!({}));
    let current = pod(call, name)?;
    for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let want = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str);
        if let Some(want) = want.filter(|w| *w != meta_str(&current, field)) {
            let mut e = ApiError::conflict(call.scope.target(name));
            e.message = format!(
                "Operation cannot be fulfilled on pods \"{name}\": the {what} in the precondition ({want}) does not match the {what} in record ({}). The object might have been {}",
                meta_str(&current, field),
                if field == "uid" {
                    "deleted and then recreated"
                } else {
                    "modified"
                }
            );
            return Err(e);
        }
    }
    let dry = options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x == "All"));
    if call.dry || dry {
        return Ok(created());
    }
    let grace = options.get("gracePeriodSeconds").and_then(Value::as_i64);
    let (res, key) = (call.scope.res(), call.scope.key(name));
    let mut store = call.shared.lock();
    crate::gc::delete_graceful(&mut store, &res, &key, Propagation::Background, grace);
    Ok(created())
}

/// PUT or PATCH of pods/NAME/ephemeralcontainers: only `spec.ephemeralContainers`
/// changes (the rest of the body is ignored); answers the pod.
fn ephemeral_containers(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let current = pod(call, name)?;
    let wanted = if call.method == Method::PATCH {
        let ty = crate::patch::PatchType::from_content_type(call.content_type)?;
        let served = crate::objects::present(&call.scope.rt, &current);
        crate::patch::apply(ty, served, call.body)?
    } else {
        parse_object(call.content_type, call.body)?
    };
    let containers = wanted
        .pointer("/spec/ephemeralContainers")
        .cloned()
        .unwrap_or(json!([]));
    if !containers.is_array() {
        return Err(ApiError::bad_request(
            "spec.ephemeralContainers must be a list",
        ));
    }
    let mut updated = current;
    updated["spec"]["ephemeralContainers"] = containers;
    let written = crate::objects::commit_update(
        &mut call.shared.lock(),
        &call.scope,
        name,
        updated,
        false,
        call.dry,
        Fields::Update(&call.who),
    )?;
    Ok(json_response(
        200,
        &crate::objects::present(&call.scope.rt, &written),
    ))
}

/// The container a log, exec or attach names: kube's `validateContainer`.
fn container(pod: &Value, name: &str, given: Option<&str>) -> Result<String, ApiError> {
    let names = |kind: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{kind}"))
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let main = names("containers");
    let mut all = names("initContainers");
    all.extend(main.iter().cloned());
    all.extend(names("ephemeralContainers"));
    match given.filter(|c| !c.is_empty()) {
        Some(c) if all.iter().any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if main.len() == 1 => Ok(main[0].clone()),
        None if main.is_empty() => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            all.join(" ")
        ))),
    }
}

/// The pod's node, where its kubelet is: kube's 404 when the node is not there.
fn node_of(call: &Call<'_>, pod: &Value) -> Result<Option<Value>, ApiError> {
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Ok(None);
    }
    let res = (String::new(), "nodes".to_string());
    let found = call
        .shared
        .lock()
        .get(&res, &(String::new(), node.to_string()))
        .cloned();
    found.map(Some).ok_or_else(|| {
        ApiError::not_found(crate::status::Target {
            group: "",
            plural: "nodes",
            name: node,
        })
    })
}

/// Whether the simulated kubelet answers for this node.
fn simulated(call: &Call<'_>, node: &Value) -> bool {
    call.shared.pods.kubelet && meta_str(node, "name") == node::NODE
}

/// kube-apiserver's answer when it cannot dial the node's kubelet.
fn unreachable(node: &Value) -> ApiError {
    ApiError::new(
        500,
        "",
        format!(
            "error dialing backend: dial tcp {}: connect: connection refused",
            node::kubelet_address(node)
        ),
    )
}

/// GET pods/NAME/log: the container's log as the simulated kubelet has it (text/plain).
fn log(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let pod = pod(call, name)?;
    let c = container(&pod, name, call.query.get("container").map(String::as_str))?;
    let text = match node_of(call, &pod)? {
        // Not scheduled: kube answers an empty log.
        None => String::new(),
        Some(node) if !simulated(call, &node) => return Err(unreachable(&node)),
        Some(_) => {
            let waiting = ["containerStatuses", "initContainerStatuses"]
                .iter()
                .filter_map(|k| {
                    pod.pointer(&format!("/status/{k}"))
                        .and_then(Value::as_array)
                })
                .flatten()
                .find(|s| s["name"] == c.as_str())
                .map_or(Some("ContainerCreating"), |s| {
                    s.pointer("/state/waiting/reason").and_then(Value::as_str)
                });
            if let Some(reason) = waiting {
                return Err(ApiError::bad_request(format!(
                    "container {c:?} in pod {name:?} is waiting to start: {reason}"
                )));
            }
            call.shared
                .pods
                .log
                .as_ref()
                .map(|l| format!("{l}\n"))
                .unwrap_or_default()
        }
    };
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}

/// exec, attach, portforward: admitted (operation CONNECT) and checked as kube-apiserver
/// does, then its answer when the node's kubelet cannot be dialled (no process runs here
/// to connect to).
async fn stream(call: &Call<'_>, name: &str, kind: Stream) -> Result<Response, ApiError> {
    let mut options = kind.options(call.query);
    super::admitted::connect(call, name, kind.names(), &mut options).await?;
    let pod = pod(call, name)?;
    if kind != Stream::PortForward {
        container(&pod, name, call.query.get("container").map(String::as_str))?;
    }
    match node_of(call, &pod)? {
        None => Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        ))),
        Some(node) => Err(unreachable(&node)),
    }
}
