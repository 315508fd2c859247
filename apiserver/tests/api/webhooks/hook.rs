//! The test's HTTPS admission webhook: it refuses ConfigMaps labelled `deny`, an update of
//! one whose old version is `locked` and a delete of a `protected` one, warns, labels what
//! it mutates (`/mutate`), copies that label into an annotation (`/copy`), bounds and
//! rounds Scales (`/scale`), refuses an exec of `rm` (`/connect`), fails with a Status (`/broken`) or without (`/mute`), holds
//! its first call until released (`/hold-first`), and keeps every review it gets.

use std::sync::{Arc, Mutex};

use base64::Engine;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The test's webhook: its address, CA (its own certificate) and the reviews it got.
pub(super) struct Webhook {
    pub(super) url: String,
    ca_pem: String,
    reviews: Arc<Mutex<Vec<Value>>>,
    held: Arc<Held>,
}

/// The first call to `/hold-first`: taken, and the signal that lets it answer.
#[derive(Default)]
struct Held {
    taken: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
}

impl Webhook {
    pub(super) async fn start() -> Webhook {
        Webhook::start_for("127.0.0.1").await
    }

    /// A webhook on 127.0.0.1 whose certificate is for `name` (an address or a DNS name).
    pub(super) async fn start_for(name: &str) -> Webhook {
        let certified = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(certified.cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der())),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reviews = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::new(Held::default());
        let (seen, hold) = (reviews.clone(), held.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen, hold) = (acceptor.clone(), seen.clone(), hold.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, &seen, &hold).await;
                    }
                });
            }
        });
        Webhook {
            url: format!("https://{addr}"),
            ca_pem: certified.cert.pem(),
            reviews,
            held,
        }
    }

    pub(super) fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// A webhook entry for ConfigMaps' CREATE, UPDATE and DELETE at `path`.
    pub(super) fn entry(&self, name: &str, path: &str, policy: &str) -> Value {
        json!({
            "name": name,
            "clientConfig": {"url": format!("{}{path}", self.url), "caBundle": self.ca_bundle()},
            "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "failurePolicy": policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    /// Lets the held first call to `/hold-first` answer (at once, if it comes later).
    pub(super) fn release(&self) {
        self.held.release.notify_one();
    }

    pub(super) fn reviews(&self) -> Vec<Value> {
        self.reviews.lock().unwrap().clone()
    }
}

/// Answers one HTTP request on the connection.
async fn serve(
    mut tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    seen: &Mutex<Vec<Value>>,
    held: &Held,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let body = loop {
        let Ok(n) = tls.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if buf.len() >= end + 4 + len {
            break buf[end + 4..end + 4 + len].to_vec();
        }
    };
    // The path without kube's `?timeout=`.
    let path = String::from_utf8_lossy(&buf)
        .split([' ', '?'])
        .nth(1)
        .unwrap_or("")
        .to_string();
    let review: Value = serde_json::from_slice(&body).unwrap();
    if path == "/slow" {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
    seen.lock().unwrap().push(review.clone());
    if path == "/hold-first" && !held.taken.swap(true, std::sync::atomic::Ordering::SeqCst) {
        held.release.notified().await;
    }
    // `/broken` answers 503 with a Status, `/mute` 500 with nothing.
    let (status, answer) = match path.as_str() {
        "/broken" => (
            "503 Service Unavailable",
            serde_json::to_vec(
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "the policy store is down", "code": 503}),
            )
            .unwrap(),
        ),
        "/mute" => ("500 Internal Server Error", Vec::new()),
        _ => (
            "200 OK",
            serde_json::to_vec(&judge(&path, &review["request"])).unwrap(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        answer.len()
    );
    let _ = tls.write_all(head.as_bytes()).await;
    let _ = tls.write_all(&answer).await;
    let _ = tls.shutdown().await;
}

/// The webhook's verdict on a request.
fn judge(path: &str, request: &Value) -> Value {
    let mut response = json!({"uid": request["uid"], "allowed": true});
    if path == "/wrong-uid" {
        response["uid"] = json!("not-it");
    }
    if path == "/scale" {
        // Scales: at most 5 replicas; an odd count is rounded up (a patch of the Scale).
        let replicas = request["object"]["spec"]["replicas"].as_i64().unwrap_or(0);
        if replicas > 5 {
            response["allowed"] = json!(false);
            response["status"] = json!({"code": 422, "message": "at most 5 replicas"});
        } else if replicas % 2 == 1 {
            let ops = json!([{"op": "replace", "path": "/spec/replicas", "value": replicas + 1}]);
            let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
            response["patch"] = json!(patch);
            response["patchType"] = json!("JSONPatch");
        }
        return wrap(response);
    }
    if path == "/connect" {
        // Connections: no `rm` through exec.
        if request["object"]["command"]
            .as_array()
            .is_some_and(|c| c.iter().any(|a| a == "rm"))
        {
            response["allowed"] = json!(false);
            response["status"] = json!({"code": 403, "message": "no rm through exec"});
        }
        return wrap(response);
    }
    if path == "/mutate" && request["operation"] == "DELETE" {
        return wrap(response);
    }
    if path == "/copy" {
        // Copies the label `/mutate` adds into an annotation, when it is there.
        if request["object"]["metadata"]["labels"]["admission.kapsel.dev/seen"] == "yes" {
            let ops =
                json!([{"op": "add", "path": "/metadata/annotations", "value": {"copied": "yes"}}]);
            let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
            response["patch"] = json!(patch);
            response["patchType"] = json!("JSONPatch");
        }
        return wrap(response);
    }
    if path == "/mutate" {
        let mut ops = Vec::new();
        if request["object"]["metadata"]["labels"].is_null() {
            ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {}}));
        }
        ops.push(json!({"op": "add", "path": "/metadata/labels/admission.kapsel.dev~1seen", "value": "yes"}));
        let patch =
            base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap());
        response["patch"] = json!(patch);
        response["patchType"] = json!("JSONPatch");
        return wrap(response);
    }
    response["warnings"] = json!(["checked by the test webhook"]);
    if request["object"]["metadata"]["labels"]["deny"] == "yes" {
        response["allowed"] = json!(false);
        response["status"] = json!({"code": 403, "message": "label deny is set"});
    }
    if request["oldObject"]["data"]["state"] == "locked" {
        response["allowed"] = json!(false);
        response["status"] = json!({"message": "the old version is locked"});
    }
    if request["operation"] == "DELETE"
        && request["oldObject"]["metadata"]["labels"]["protected"] == "yes"
    {
        response["allowed"] = json!(false);
        response["status"] =
            json!({"code": 403, "reason": "Forbidden", "message": "protected objects stay"});
    }
    wrap(response)
}

fn wrap(response: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
