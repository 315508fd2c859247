//! The admission side of cases: the guest's webhooks served to the case's cluster (their
//! managed configurations awaited before the first step, so that every write of the case
//! goes through them, as on a cluster where the operator is deployed), `review`s sent to
//! them over HTTPS as kube-apiserver sends them, and `refused` writes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::format::{Answer, Refusal, Review, Write};
use super::matching;
use super::objects::{self, ObjectError, Written};
use crate::AdmissionServer;
use crate::cluster::find_kind;
use crate::runtime::{Guest, Webhook};

/// The name of the webhook configurations a case's operator manages.
const MANAGED: &str = "kapsel-test.admission.kapsel.dev";

/// How long the operator has to configure its webhooks before the case's first step.
const CONFIGURED_WITHIN: Duration = Duration::from_secs(10);

/// The webhook server a case's operator runs when its guest has admission handlers: on a
/// free loopback port, with the configurations of [`MANAGED`] pointing at it.
pub(super) fn server() -> AdmissionServer {
    AdmissionServer::new(SocketAddr::from(([127, 0, 0, 1], 0))).managed(MANAGED)
}

/// Why an admission step failed, as the report explains it.
#[derive(Debug, thiserror::Error)]
pub(super) enum AdmissionError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// No review without webhooks (the runner serves them for guests with admission
    /// handlers; the format refuses reviews for the others).
    #[error("the operator serves no admission webhooks")]
    NotServed,
    #[error("the webhook server did not answer the review: {0}")]
    Unanswered(#[source] kube::Error),
    #[error("the webhook's answer is no AdmissionReview response: {0}")]
    Unreadable(String),
    /// What differs from what the case expects, a line each.
    #[error("the answer differs:\n{}", .0.iter().map(|l| format!("  - {l}\n")).collect::<String>())]
    Differs(Vec<String>),
    /// The write went through.
    #[error("not refused: the cluster took the write")]
    NotRefused,
    /// Refused otherwise than expected.
    #[error("refused otherwise:\n{}", .0.iter().map(|l| format!("  - {l}\n")).collect::<String>())]
    RefusedOtherwise(Vec<String>),
}

/// The guest's webhook server, as the configurations name it: a client that trusts its CA.
pub(super) struct Webhooks {
    client: Client,
    guest: String,
}

/// Waits until the operator has written its managed configurations, a webhook per
/// admission handler of `guest`; the server they point at.
pub(super) async fn configured(cluster: &Client, guest: &Guest) -> Result<Webhooks, String> {
    let declared = guest.admissions();
    let wanted = |webhook: Webhook| declared.iter().filter(|d| d.webhook == webhook).count();
    let wanted = [wanted(Webhook::Validating), wanted(Webhook::Mutating)];
    let deadline = tokio::time::Instant::now() + CONFIGURED_WITHIN;
    loop {
        let last = match written(cluster).await {
            Ok(found) if found.iter().map(Vec::len).eq(wanted) => {
                let hooks: Vec<&Value> = found.iter().flatten().collect();
                return webhook_server(&hooks, guest.name());
            }
            Ok(found) => format!(
                "{} validating and {} mutating webhooks, not {} and {}",
                found[0].len(),
                found[1].len(),
                wanted[0],
                wanted[1]
            ),
            Err(error) => error.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the operator did not configure its admission webhooks ({MANAGED}) within {} s: {last}",
                CONFIGURED_WITHIN.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The webhooks of the validating and the mutating configuration (none while absent).
async fn written(cluster: &Client) -> Result<[Vec<Value>; 2], kube::Error> {
    let mut found = [Vec::new(), Vec::new()];
    for (index, (kind, plural)) in [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let resource = ApiResource {
            group: "admissionregistration.k8s.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "admissionregistration.k8s.io/v1".to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        };
        let api: Api<DynamicObject> = Api::all_with(cluster.clone(), &resource);
        if let Some(configuration) = api.get_opt(MANAGED).await?
            && let Some(Value::Array(hooks)) = configuration.data.get("webhooks")
        {
            found[index].clone_from(hooks);
        }
    }
    Ok(found)
}

/// A client of the server the webhooks point at (`https://host:port/<guest>/<id>`),
/// trusting their CA bundle.
fn webhook_server(hooks: &[&Value], guest: &str) -> Result<Webhooks, String> {
    let Some(config) = hooks.first().map(|hook| &hook["clientConfig"]) else {
        return Err("the configurations hold no webhook".to_owned());
    };
    let url = config["url"].as_str().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "the webhooks' URL {url:?} is not one a case can reach"
        ));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let base = format!("{scheme}://{authority}");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(config["caBundle"].as_str().unwrap_or_default())
        .map_err(|e| format!("the webhooks' caBundle is not base64: {e}"))?;
    let roots: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .map(|der| der.to_vec())
        .collect();
    let uri = base
        .parse()
        .map_err(|e| format!("the webhooks' URL {url:?}: {e}"))?;
    let mut config = kube::Config::new(uri);
    config.root_cert = Some(roots);
    let client = crate::cluster::kube_client(config)
        .map_err(|e| format!("no client for the webhook server {base}: {e}"))?;
    Ok(Webhooks {
        client,
        guest: guest.to_owned(),
    })
}

/// Sends `review` to the webhooks (all of the guest's handlers, or the one it names) and
/// checks the answer.
pub(super) async fn review(
    cluster: &Client,
    webhooks: Option<&Webhooks>,
    review: &Review,
) -> Result<(), AdmissionError> {
    let webhooks = webhooks.ok_or(AdmissionError::NotServed)?;
    let request = request_of(cluster, review).await?;
    let body = request["request"]["object"]
        .as_object()
        .or_else(|| request["request"]["oldObject"].as_object())
        .map(|o| Value::Object(o.clone()))
        .unwrap_or_default();
    let path = match &review.handler {
        Some(id) => format!(
            "/{}/{}",
            percent_encoded(&webhooks.guest),
            percent_encoded(id)
        ),
        None => "/".to_owned(),
    };
    let http = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(request.to_string().into_bytes())
        .map_err(|e| AdmissionError::Unreadable(e.to_string()))?;
    let answer: Value = webhooks
        .client
        .request(http)
        .await
        .map_err(AdmissionError::Unanswered)?;
    let Some(response) = answer.get("response") else {
        return Err(AdmissionError::Unreadable(answer.to_string()));
    };
    let differences = differences(&review.answer, response, &body)?;
    if differences.is_empty() {
        Ok(())
    } else {
        Err(AdmissionError::Differs(differences))
    }
}

/// The AdmissionReview kube-apiserver would send for `review`.
async fn request_of(cluster: &Client, review: &Review) -> Result<Value, AdmissionError> {
    let read = |source: Option<&super::format::Source>| source.map(objects::one_object);
    let mut object = read(review.object.as_ref()).transpose()?;
    let mut old = read(review.old_object.as_ref()).transpose()?;
    let Some(body) = object.as_ref().or(old.as_ref()) else {
        return Err(ObjectError::Unnamed.into());
    };
    let text = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let resource = find_kind(cluster, text("/apiVersion"), text("/kind"))
        .await
        .map_err(ObjectError::Resource)?;
    let name = text("/metadata/name").to_owned();
    let mut namespace = None;
    if resource.namespaced {
        let given = text("/metadata/namespace");
        let given = if given.is_empty() { "default" } else { given }.to_owned();
        // The API server fills it in before admission.
        for written in object.iter_mut().chain(old.iter_mut()) {
            written["metadata"]["namespace"] = json!(given);
        }
        namespace = Some(given);
    }
    static SENT: AtomicU64 = AtomicU64::new(0);
    let uid = format!("kapsel-test-{}", SENT.fetch_add(1, Ordering::Relaxed));
    let kind = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let plural =
        json!({"group": resource.group, "version": resource.version, "resource": resource.plural});
    let options = match review.operation.as_str() {
        "CREATE" => Some("CreateOptions"),
        "UPDATE" => Some("UpdateOptions"),
        "DELETE" => Some("DeleteOptions"),
        _ => None,
    }
    .map(|kind| {
        let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
        if review.dry_run {
            options["dryRun"] = json!(["All"]);
        }
        options
    });
    let mut request = json!({
        "uid": uid, "kind": kind, "resource": plural,
        "requestKind": kind, "requestResource": plural,
        "name": name, "operation": review.operation, "userInfo": review.user_info,
        "object": object, "oldObject": old, "dryRun": review.dry_run, "options": options,
    });
    if let Some(subresource) = &review.subresource {
        request["subResource"] = json!(subresource);
        request["requestSubResource"] = json!(subresource);
    }
    if let Some(namespace) = namespace {
        request["namespace"] = json!(namespace);
    }
    Ok(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
}

/// How `response` differs from what `expected` says, a line each; `body` is the object
/// the patch applies to.
fn differences(
    expected: &Answer,
    response: &Value,
    body: &Value,
) -> Result<Vec<String>, AdmissionError> {
    let mut found = Vec::new();
    let allowed = response["allowed"].as_bool().unwrap_or(false);
    let message = response["status"]["message"].as_str().unwrap_or_default();
    let code = response["status"]["code"].as_u64();
    if allowed != expected.allowed {
        found.push(if allowed {
            "expected refused, got allowed".to_owned()
        } else {
            format!(
                "expected allowed, got refused ({}): {message:?}",
                code.map_or_else(|| "no code".to_owned(), |c| c.to_string())
            )
        });
    }
    if !allowed {
        found.extend(refusal_differences(
            expected.message.as_deref(),
            expected.code,
            message,
            code,
        ));
    }
    let warnings: Vec<&str> = response["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(wanted) = &expected.warnings
        && wanted
            .iter()
            .map(String::as_str)
            .ne(warnings.iter().copied())
    {
        found.push(format!("warnings: expected {wanted:?}, got {warnings:?}"));
    }
    let operations = patch_of(response)?;
    if let Some(wanted) = &expected.patch
        && *wanted != operations
    {
        found.push(format!(
            "patch: expected {}, got {}",
            Value::Array(wanted.clone()),
            Value::Array(operations.clone())
        ));
    }
    if let Some(wanted) = &expected.patched {
        let mut patched = body.clone();
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations))
            .map_err(|e| AdmissionError::Unreadable(format!("its patch: {e}")))?;
        json_patch::patch(&mut patched, &patch)
            .map_err(|e| AdmissionError::Unreadable(format!("its patch does not apply: {e}")))?;
        found.extend(
            matching::mismatches(wanted, &patched)
                .iter()
                .map(|m| format!("patched {m}")),
        );
    }
    Ok(found)
}

/// How a refusal differs from the message part and the code a case expects.
fn refusal_differences(
    message: Option<&str>,
    code: Option<u16>,
    got_message: &str,
    got_code: Option<u64>,
) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(part) = message
        && !got_message.contains(part)
    {
        found.push(format!(
            "message: expected a part {part:?}, got {got_message:?}"
        ));
    }
    if let Some(code) = code
        && got_code != Some(u64::from(code))
    {
        let got = got_code.map_or_else(|| "none".to_owned(), |c| c.to_string());
        found.push(format!("code: expected {code}, got {got}"));
    }
    found
}

/// The JSONPatch operations of a response (`[]` without a patch).
fn patch_of(response: &Value) -> Result<Vec<Value>, AdmissionError> {
    let Some(encoded) = response["patch"].as_str() else {
        return Ok(Vec::new());
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| AdmissionError::Unreadable(format!("its patch is not base64: {e}")))?;
    match serde_json::from_slice(&decoded) {
        Ok(Value::Array(operations)) => Ok(operations),
        _ => Err(AdmissionError::Unreadable(
            "its patch is no JSONPatch".to_owned(),
        )),
    }
}

/// Makes the write the case says the cluster refuses, and checks how it refused.
pub(super) async fn refused(
    cluster: &Client,
    refusal: &Refusal,
) -> Result<Vec<Written>, AdmissionError> {
    let result = match &refusal.write {
        Write::Apply(source) => objects::apply(cluster, source).await,
        Write::Patch { target, merge } => objects::merge(cluster, target, merge).await,
        Write::Delete(target) => objects::delete(cluster, target).await,
    };
    let status = match result {
        Ok(_) => return Err(AdmissionError::NotRefused),
        Err(
            ObjectError::Refused {
                source: kube::Error::Api(status),
                ..
            }
            | ObjectError::Request(kube::Error::Api(status)),
        ) => status,
        Err(other) => return Err(other.into()),
    };
    let differences = refusal_differences(
        refusal.message.as_deref(),
        refusal.code,
        &status.message,
        Some(u64::from(status.code)),
    );
    if differences.is_empty() {
        Ok(Vec::new())
    } else {
        let mut lines = differences;
        lines.push(format!("the refusal: {} {:?}", status.code, status.message));
        Err(AdmissionError::RefusedOtherwise(lines))
    }
}

/// `text` with everything but RFC 3986's unreserved characters percent-encoded: a guest's
/// name or a handler's id as one segment of its webhook's path (as the host serves it).
fn percent_encoded(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}
