//! Admission webhooks, called as kube-apiserver calls them: the webhooks of the stored
//! `MutatingWebhookConfiguration`s, in order, then those of the
//! `ValidatingWebhookConfiguration`s, in parallel, whose rules match a write (`matching`),
//! each sent an `AdmissionReview` (`review`) over HTTPS (`client`). A refusal, a failed
//! call under `failurePolicy: Fail` and a dry run of a webhook with side effects answer
//! the client with kube's errors; webhooks' warnings are returned for its answer.

mod client;
mod endpoint;
mod matching;
mod review;

use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::User;
use crate::objects::Scope;
use crate::state::Shared;
use crate::status::ApiError;
use review::{Review, Verdict};

const GROUP: &str = "admissionregistration.k8s.io";

/// The write being admitted.
#[derive(Debug)]
pub(crate) struct Attributes<'a> {
    pub(crate) scope: &'a Scope,
    pub(crate) name: &'a str,
    /// The sub-resource written (`status`), or "".
    pub(crate) subresource: &'a str,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub(crate) operation: &'static str,
    pub(crate) user: Option<&'a User>,
    pub(crate) dry_run: bool,
    /// The objects' kind when it is not the resource's: `autoscaling/v1` `Scale` for the
    /// scale subresource, `v1` `PodExecOptions` for `pods/exec` (group, version, kind).
    /// Such objects are sent as they are.
    pub(crate) kind: Option<(&'static str, &'static str, &'static str)>,
}

impl Attributes<'_> {
    fn request(&self) -> matching::Request<'_> {
        let rt = &self.scope.rt;
        matching::Request {
            operation: self.operation,
            group: &rt.group,
            version: &rt.version,
            resource: &rt.plural,
            subresource: self.subresource,
            namespaced: rt.namespaced,
        }
    }

    fn options(&self) -> Value {
        let kind = match self.operation {
            "CREATE" => "CreateOptions",
            "UPDATE" => "UpdateOptions",
            "DELETE" => "DeleteOptions",
            // A connection has no operation options: its options are the object.
            _ => return Value::Null,
        };
        let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
        if self.dry_run {
            options["dryRun"] = json!(["All"]);
        }
        options
    }
}

/// A webhook that matches a request: its entry, and the version of the resource its
/// rules matched through when that is not the request's (`matchPolicy: Equivalent`).
#[derive(Debug)]
struct Hook {
    spec: Value,
    version: Option<String>,
    /// Where its `clientConfig.service` is served: the URL of one of the Service's
    /// endpoints and the name its certificate must have (`<name>.<namespace>.svc`), or
    /// why there is none. `None` for a webhook called by `url`.
    endpoint: Option<Result<(String, String), String>>,
}

/// The webhooks of the configurations of `plural` whose rules match, in kube's order
/// (the configurations by name, their webhooks as listed); with `objects` (the new and
/// old object), only those whose selectors take them in. Webhook configurations
/// themselves are never admitted by webhooks, as in kube.
fn webhooks(
    shared: &Shared,
    plural: &str,
    attrs: &Attributes<'_>,
    objects: Option<(Option<&Value>, Option<&Value>)>,
) -> Vec<Hook> {
    let rt = &attrs.scope.rt;
    if rt.group == GROUP {
        return Vec::new();
    }
    let namespace = objects.and_then(|(obj, old)| namespace_of(shared, attrs, obj.or(old)));
    let store = shared.lock();
    // The other served versions of the resource, the preferred first.
    let mut others: Vec<&str> = store
        .registry
        .all()
        .iter()
        .filter(|t| t.group == rt.group && t.plural == rt.plural && t.version != rt.version)
        .map(|t| (!t.preferred, t.version.as_str()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    others.dedup();
    let mut configs: Vec<&Value> = store
        .list(&(GROUP.to_string(), plural.to_string()), None)
        .map(|(_, v)| v)
        .collect();
    configs
        .sort_by(|a, b| crate::store::meta_str(a, "name").cmp(crate::store::meta_str(b, "name")));
    configs
        .into_iter()
        .filter_map(|c| c.get("webhooks").and_then(Value::as_array))
        .flatten()
        .filter_map(|spec| matched(spec, attrs, &others))
        .filter(|hook| {
            objects.is_none_or(|(obj, old)| {
                matching::selected(&hook.spec, obj, old, namespace.as_ref())
            })
        })
        .map(|mut hook| {
            let service = hook.spec.get("clientConfig").and_then(|c| c.get("service"));
            hook.endpoint = service.map(|service| endpoint::resolve(&store, service));
            hook
        })
        .collect()
}

/// The webhook, if its rules match the request: as it is, or through another version of
/// the resource unless its `matchPolicy` is `Exact` (kube's default is `Equivalent`).
fn matched(spec: &Value, attrs: &Attributes<'_>, others: &[&str]) -> Option<Hook> {
    let mut request = attrs.request();
    let hook = |version: Option<&str>| Hook {
        spec: spec.clone(),
        version: version.map(String::from),
        endpoint: None,
    };
    if matching::matches(spec, &request) {
        return Some(hook(None));
    }
    if text(spec, "matchPolicy") == "Exact" {
        return None;
    }
    others.iter().find_map(|v| {
        request.version = v;
        matching::matches(spec, &request).then(|| hook(Some(v)))
    })
}

/// What `namespaceSelector`s select by: the namespace of a namespaced object, the object
/// itself when it is a Namespace, none for other cluster-scoped objects. A namespace not
/// found has no labels.
fn namespace_of(shared: &Shared, attrs: &Attributes<'_>, obj: Option<&Value>) -> Option<Value> {
    let rt = &attrs.scope.rt;
    match &attrs.scope.ns {
        Some(ns) => Some(
            shared
                .lock()
                .get(
                    &(String::new(), "namespaces".into()),
                    &(String::new(), ns.clone()),
                )
                .cloned()
                .unwrap_or_default(),
        ),
        None if rt.group.is_empty() && rt.plural == "namespaces" => obj.cloned(),
        None => None,
    }
}

/// Whether any webhook, mutating or validating, matches the write.
pub(crate) fn any(shared: &Shared, attrs: &Attributes<'_>) -> bool {
    !webhooks(shared, "mutatingwebhookconfigurations", attrs, None).is_empty()
        || !webhooks(shared, "validatingwebhookconfigurations", attrs, None).is_empty()
}

/// Runs the mutating webhooks on `obj` (the new object of a create or update), applying
/// their patches in turn; their warnings are added to `warnings`.
pub(crate) async fn mutate(
    shared: &Shared,
    attrs: &Attributes<'_>,
    obj: &mut Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let hooks = webhooks(shared, "mutatingwebhookconfigurations", attrs, None);
    // kube's reinvocation: a webhook with `reinvocationPolicy: IfNeeded` called before
    // another one changed the object is called once more, in a second and last round.
    let (mut reinvoke, mut called) = (vec![false; hooks.len()], Vec::new());
    for (i, hook) in hooks.iter().enumerate() {
        if mutate_once(shared, attrs, hook, obj, old, warnings).await? {
            for j in called.drain(..) {
                reinvoke[j] = true;
            }
        }
        if text(&hook.spec, "reinvocationPolicy") == "IfNeeded" {
            called.push(i);
        }
    }
    for (hook, again) in hooks.iter().zip(reinvoke) {
        if again {
            mutate_once(shared, attrs, hook, obj, old, warnings).await?;
        }
    }
    Ok(())
}

/// One call of a mutating webhook on `obj`, if its selectors (seeing the object as the
/// webhooks before it left it) take it in, its patch applied: whether it changed `obj`.
async fn mutate_once(
    shared: &Shared,
    attrs: &Attributes<'_>,
    hook: &Hook,
    obj: &mut Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Result<bool, ApiError> {
    let namespace = namespace_of(shared, attrs, Some(obj));
    if !matching::selected(&hook.spec, Some(obj), old, namespace.as_ref()) {
        return Ok(false);
    }
    let Some(verdict) = call(hook, attrs, Some(obj), old, true).await? else {
        return Ok(false);
    };
    warnings.extend(verdict.warnings.iter().cloned());
    if !verdict.allowed {
        return Err(denied(&hook.spec, &verdict));
    }
    let Some(patch) = verdict.patch else {
        return Ok(false);
    };
    let internal = |e: String| ApiError::internal(format!("Internal error occurred: {e}"));
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| internal(e.to_string()))?;
    // The patch is of the object in the version the webhook matched.
    let mut patched = as_version(obj, &attrs.scope.rt, hook.version.as_deref());
    json_patch::patch(&mut patched, &patch).map_err(|e| internal(e.to_string()))?;
    if hook.version.is_some() {
        patched = as_version(&patched, &attrs.scope.rt, Some(&attrs.scope.rt.version));
    }
    let changed = patched != *obj;
    *obj = patched;
    Ok(changed)
}

/// Admits a deletion of `old` (as served): the mutating webhooks are asked in order,
/// with no object to change, then the deletion's `preconditions` checked (kube's registry
/// checks them before it validates), then the validating webhooks asked, as kube's
/// `AdmissionToValidateObjectDeleteFunc` does.
pub(crate) async fn admit_delete(
    shared: &Shared,
    attrs: &Attributes<'_>,
    old: &Value,
    warnings: &mut Vec<String>,
    preconditions: impl FnOnce() -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    let objects = Some((None, Some(old)));
    for hook in webhooks(shared, "mutatingwebhookconfigurations", attrs, objects) {
        let Some(verdict) = call(&hook, attrs, None, Some(old), true).await? else {
            continue;
        };
        warnings.extend(verdict.warnings.iter().cloned());
        if !verdict.allowed {
            return Err(denied(&hook.spec, &verdict));
        }
    }
    preconditions()?;
    validate(shared, attrs, None, Some(old), warnings).await
}

/// Runs the validating webhooks (in parallel, as kube) on the object as it would be
/// stored; the first refusal, in the webhooks' order, is the answer.
pub(crate) async fn validate(
    shared: &Shared,
    attrs: &Attributes<'_>,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let hooks = webhooks(
        shared,
        "validatingwebhookconfigurations",
        attrs,
        Some((obj, old)),
    );
    let calls = hooks.iter().map(|hook| call(hook, attrs, obj, old, false));
    let verdicts = futures::future::join_all(calls).await;
    let mut first_error = None;
    for (hook, verdict) in hooks.iter().zip(verdicts) {
        match verdict {
            Ok(None) => {}
            Ok(Some(v)) => {
                warnings.extend(v.warnings.iter().cloned());
                if !v.allowed && first_error.is_none() {
                    first_error = Some(denied(&hook.spec, &v));
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `obj` with the apiVersion of `version` of its resource (None: as it is).
fn as_version(obj: &Value, rt: &crate::registry::ResourceType, version: Option<&str>) -> Value {
    let mut obj = obj.clone();
    if let (Some(version), Some(map)) = (version, obj.as_object_mut()) {
        let api_version = match rt.group.as_str() {
            "" => version.to_string(),
            group => format!("{group}/{version}"),
        };
        map.insert("apiVersion".into(), Value::from(api_version));
    }
    obj
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// One call of a webhook: its verdict, None when its call failed and its
/// `failurePolicy` is `Ignore`, kube's error when it failed with `Fail`.
async fn call(
    hook: &Hook,
    attrs: &Attributes<'_>,
    obj: Option<&Value>,
    old: Option<&Value>,
    mutating: bool,
) -> Result<Option<Verdict>, ApiError> {
    let name = text(&hook.spec, "name");
    if attrs.dry_run && !matches!(text(&hook.spec, "sideEffects"), "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook {name:?} does not support dry run"
        )));
    }
    match call_once(hook, attrs, obj, old, mutating).await {
        Ok(verdict) => Ok(Some(verdict)),
        Err(_) if text(&hook.spec, "failurePolicy") == "Ignore" => Ok(None),
        Err(reason) => Err(ApiError::internal(format!(
            "Internal error occurred: failed calling webhook {name:?}: {reason}"
        ))),
    }
}

/// Sends the review; the error is why the call failed, as kube words it.
async fn call_once(
    hook: &Hook,
    attrs: &Attributes<'_>,
    obj: Option<&Value>,
    old: Option<&Value>,
    mutating: bool,
) -> Result<Verdict, String> {
    let uid = uuid::Uuid::new_v4().to_string();
    let body = crate::status::json_body(&review_of(hook, attrs, (obj, old), &uid));
    let target = Target::of(hook)?;
    let (status, answer) = client::post(
        &target.url,
        target.server_name.as_deref(),
        target.ca.as_deref(),
        &body,
        target.timeout,
    )
    .await
    .map_err(|e| format!("failed to call webhook: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "failed to call webhook: {}",
            failure(status, &answer)
        ));
    }
    review::verdict(&answer, &uid, mutating)
        .map_err(|e| format!("received invalid webhook response: {e}"))
}

/// The AdmissionReview of the write for `hook`: the objects in the version its rules
/// matched (kube converts them; the versions of a resource here differ by their
/// apiVersion only), or as they are when they are not the resource's (a Scale).
fn review_of(
    hook: &Hook,
    attrs: &Attributes<'_>,
    (obj, old): (Option<&Value>, Option<&Value>),
    uid: &str,
) -> Value {
    let rt = &attrs.scope.rt;
    // Without authentication (a server without RBAC) the writer is anonymous, as
    // kube-apiserver's anonymous authenticator names a request without credentials.
    let user = attrs.user.map_or_else(
        || json!({"username": "system:anonymous", "groups": ["system:unauthenticated"]}),
        |u| json!({"username": u.name, "groups": u.groups}),
    );
    let version = hook.version.as_deref().unwrap_or(&rt.version);
    let convert = |o: &Value| match attrs.kind {
        Some(_) => o.clone(),
        None => as_version(o, rt, Some(version)),
    };
    let (obj, old) = (obj.map(convert), old.map(convert));
    let kind = |version: &str| match attrs.kind {
        Some((group, version, kind)) => json!({"group": group, "version": version, "kind": kind}),
        None => json!({"group": rt.group, "version": version, "kind": rt.kind}),
    };
    Review {
        uid,
        kind: kind(version),
        resource: json!({"group": rt.group, "version": version, "resource": rt.plural}),
        request_kind: kind(&rt.version),
        request_resource: json!({"group": rt.group, "version": rt.version, "resource": rt.plural}),
        subresource: attrs.subresource,
        name: attrs.name,
        namespace: attrs.scope.ns.as_deref(),
        operation: attrs.operation,
        user,
        object: obj.as_ref(),
        old_object: old.as_ref(),
        dry_run: attrs.dry_run,
        options: attrs.options(),
    }
    .to_json()
}

/// Where and how a webhook is called.
struct Target {
    /// With kube's `?timeout=`.
    url: String,
    /// The name its certificate must have when it is not the URL's host.
    server_name: Option<String>,
    /// PEM; the system's roots without one.
    ca: Option<Vec<u8>>,
    timeout: Duration,
}

impl Target {
    /// The hook's `clientConfig` and `timeoutSeconds` (10 by default).
    fn of(hook: &Hook) -> Result<Target, String> {
        let spec = &hook.spec;
        let config = spec.get("clientConfig").unwrap_or(&Value::Null);
        let (url, server_name) = match hook.endpoint.clone() {
            Some(Ok((url, server_name))) => (url, Some(server_name)),
            Some(Err(why)) => return Err(format!("failed to call webhook: {why}")),
            None => (text(config, "url").to_owned(), None),
        };
        if url.is_empty() {
            return Err("failed to call webhook: clientConfig has neither url nor service".into());
        }
        let ca = match text(config, "caBundle") {
            "" => None,
            b64 => {
                use base64::Engine;
                Some(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .map_err(|e| format!("could not get REST client: invalid caBundle: {e}"))?,
                )
            }
        };
        let timeout = spec
            .get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10);
        // kube's client tells the webhook its time limit, in Go's duration syntax.
        let limit = match timeout {
            0..60 => format!("{timeout}s"),
            _ => format!("{}m{}s", timeout / 60, timeout % 60),
        };
        let separator = if url.contains('?') { '&' } else { '?' };
        Ok(Target {
            url: format!("{url}{separator}timeout={limit}"),
            server_name,
            ca,
            timeout: Duration::from_secs(timeout),
        })
    }
}

/// Why a webhook's answer of `status` (not 2xx) failed its call: the message of a
/// Status in the body (kube's REST client reads it so), else kube's words for none.
fn failure(status: u16, answer: &[u8]) -> String {
    let said: Option<Value> = serde_json::from_slice(answer).ok();
    said.as_ref()
        .filter(|s| text(s, "kind") == "Status")
        .map(|s| text(s, "message"))
        .filter(|m| !m.is_empty())
        .map_or_else(
            || {
                format!(
                    "the server responded with the status code {status} but did not return more information"
                )
            },
            str::to_owned,
        )
}

/// kube's `ToStatusErr`: the webhook's status, its message prefixed with the webhook's
/// name; a code under 400 becomes 400.
fn denied(hook: &Value, verdict: &Verdict) -> ApiError {
    let name = text(hook, "name");
    let status = &verdict.status;
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    let denied_by = format!("admission webhook {name:?} denied the request");
    let message = match (text(status, "message"), text(status, "reason")) {
        ("", "") => format!("{denied_by} without explanation"),
        ("", reason) => format!("{denied_by}: {reason}"),
        (message, _) => format!("{denied_by}: {message}"),
    };
    ApiError::new(code, known_reason(text(status, "reason")), message)
}

/// The webhook's reason, when it is one of kube's `StatusReason`s (else none).
fn known_reason(reason: &str) -> &'static str {
    const REASONS: [&str; 18] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS.into_iter().find(|r| *r == reason).unwrap_or("")
}
