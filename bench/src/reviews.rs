//! AdmissionReviews sent straight to a webhook server over HTTPS, as an API server sends
//! them: the review of a kopfexample of about 4 KB, keep-alive HTTP/1.1 connections that
//! trust the bench's own CA, and two loads: reviews offered at a fixed rate (each latency
//! from the review's scheduled time, so that a slow answer hides no delay behind it) and
//! as many reviews as some connections carry one after the other (the throughput).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// How long one review may take before it counts as failed.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read.
const MAX_ANSWER: usize = 1 << 20;

/// A CA and a server certificate for 127.0.0.1 signed by it (PEM).
pub(crate) struct Certificate {
    pub(crate) ca: String,
    pub(crate) cert: String,
    pub(crate) key: String,
}

/// Makes the CA and the server's certificate.
pub(crate) fn certificate() -> Result<Certificate, String> {
    let e = |e: rcgen::Error| format!("cannot make a certificate: {e}");
    let ca_key = rcgen::KeyPair::generate().map_err(e)?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kapsel-bench-ca");
    let ca = ca_params.self_signed(&ca_key).map_err(e)?;
    let key = rcgen::KeyPair::generate().map_err(e)?;
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).map_err(e)?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(e)?;
    Ok(Certificate {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The AdmissionReview (v1) of a kopfexample's creation with this `spec.field`: about
/// 4 KB, as a real object with labels, annotations, managed fields and a spec with
/// some depth.
pub(crate) fn review(field: &str) -> Value {
    let item = |i: usize| {
        json!({"name": format!("item-{i}"), "image": format!("registry.example.com/shop/item-{i}:1.{i}.0"),
               "ports": [{"name": "http", "containerPort": 8000 + i, "protocol": "TCP"}],
               "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu-west-1"}],
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}})
    };
    let object = json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {
            "name": "kopf-example-1", "namespace": "default",
            "uid": "5f0c8d1e-3b2a-4c6d-9e8f-1a2b3c4d5e6f", "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"app.kubernetes.io/name": "shop", "app.kubernetes.io/instance": "shop-eu", "tier": "backend"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "owner": "team-shop@example.com"},
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "kopf.dev/v1",
                               "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}, "f:spec": {".": {}, "f:field": {}, "f:items": {}}}}]
        },
        "spec": {
            "field": field, "duration": "1m", "replicas": 3,
            "items": (0..9).map(item).collect::<Vec<_>>(),
        }
    });
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "requestKind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "requestResource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "name": "kopf-example-1", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object, "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// A webhook server: where, which path, and the TLS that trusts its CA.
pub(crate) struct Server {
    addr: SocketAddr,
    path: String,
    tls: TlsConnector,
}

impl Server {
    pub(crate) fn new(addr: SocketAddr, path: &str, ca_pem: &str) -> Result<Server, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("the CA: {e}"))?;
            roots.add(cert).map_err(|e| format!("the CA: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Server {
            addr,
            path: path.to_owned(),
            tls: TlsConnector::from(Arc::new(config)),
        })
    }

    async fn connect(&self) -> Result<Connection, String> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::IpAddress(self.addr.ip().into());
        let stream = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {}: {e}", self.addr))?;
        Ok(Connection {
            stream,
            buffer: Vec::with_capacity(4096),
        })
    }

    /// One review on a connection of its own: the answer's `response`.
    pub(crate) async fn answer(&self, body: &[u8]) -> Result<Value, String> {
        let mut connection = self.connect().await?;
        let answer = connection.post(self, body).await?;
        serde_json::from_slice::<Value>(&answer)
            .map(|mut review| review["response"].take())
            .map_err(|e| format!("the answer is no JSON: {e}"))
    }
}

/// A keep-alive HTTP/1.1 connection.
struct Connection {
    stream: TlsStream<TcpStream>,
    buffer: Vec<u8>,
}

impl Connection {
    /// POSTs a review: the body of a 200 answer.
    async fn post(&mut self, server: &Server, body: &[u8]) -> Result<Vec<u8>, String> {
        let head = format!(
            "POST /{} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n",
            server.path.trim_start_matches('/'),
            server.addr,
            body.len()
        );
        let io = |e: std::io::Error| e.to_string();
        self.stream.write_all(head.as_bytes()).await.map_err(io)?;
        self.stream.write_all(body).await.map_err(io)?;
        self.stream.flush().await.map_err(io)?;
        self.buffer.clear();
        let mut chunk = [0_u8; 16 * 1024];
        let (status, body_at, length) = loop {
            let read = self.stream.read(&mut chunk).await.map_err(io)?;
            if read == 0 {
                return Err("the server closed the connection".to_owned());
            }
            self.buffer.extend_from_slice(&chunk[..read]);
            if let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                let (status, length) = head_of(&self.buffer[..end])?;
                break (status, end + 4, length);
            }
            if self.buffer.len() > MAX_ANSWER {
                return Err("no end of the answer's head".to_owned());
            }
        };
        if length > MAX_ANSWER {
            return Err(format!("an answer of {length} bytes"));
        }
        while self.buffer.len() < body_at + length {
            let read = self.stream.read(&mut chunk).await.map_err(io)?;
            if read == 0 {
                return Err("the server closed the connection mid-answer".to_owned());
            }
            self.buffer.extend_from_slice(&chunk[..read]);
        }
        let answer = self.buffer[body_at..body_at + length].to_vec();
        if status != 200 {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        Ok(answer)
    }
}

/// An answer's status code and Content-Length (the servers measured send one).
fn head_of(head: &[u8]) -> Result<(u16, usize), String> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {head:?}"))?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or("an answer without Content-Length")?;
    Ok((status, length))
}

/// What one load measured.
#[derive(Debug, Default)]
pub(crate) struct Load {
    /// Reviews answered with 200 and `allowed: true`.
    pub(crate) answered: u64,
    pub(crate) failed: u64,
    pub(crate) first_failure: Option<String>,
    /// Each answered review's latency, ascending.
    pub(crate) latencies_ms: Vec<f64>,
    pub(crate) elapsed_s: f64,
}

impl Load {
    fn add(&mut self, other: Load) {
        self.answered += other.answered;
        self.failed += other.failed;
        self.first_failure = self.first_failure.take().or(other.first_failure);
        self.latencies_ms.extend(other.latencies_ms);
    }

    /// One review's outcome.
    fn record(&mut self, outcome: Result<Vec<u8>, String>, latency: Duration) {
        let outcome = outcome.and_then(|answer| {
            let review: Value = serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
            match review["response"]["allowed"].as_bool() {
                Some(true) => Ok(()),
                _ => Err(format!("not allowed: {review}")),
            }
        });
        match outcome {
            Ok(()) => {
                self.answered += 1;
                self.latencies_ms.push(latency.as_secs_f64() * 1000.0);
            }
            Err(e) => {
                self.failed += 1;
                self.first_failure.get_or_insert(e);
            }
        }
    }
}

/// One review on `connection` (made anew after a failure), within [`REVIEW_TIMEOUT`].
async fn send(
    server: &Server,
    connection: &mut Option<Connection>,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let attempt = async {
        if connection.is_none() {
            *connection = Some(server.connect().await?);
        }
        match connection.as_mut() {
            Some(c) => c.post(server, body).await,
            None => Err("no connection".to_owned()),
        }
    };
    let outcome = match tokio::time::timeout(REVIEW_TIMEOUT, attempt).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!("no answer within {} s", REVIEW_TIMEOUT.as_secs())),
    };
    if outcome.is_err() {
        *connection = None;
    }
    outcome
}

/// `rate` reviews per second for `duration`, spread over `connections` connections.
pub(crate) async fn offered(
    server: Arc<Server>,
    body: Arc<Vec<u8>>,
    rate: f64,
    duration: Duration,
    connections: usize,
) -> Load {
    let total = (rate * duration.as_secs_f64()) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let (tx, rx) = tokio::sync::mpsc::channel::<Instant>(total.max(1) as usize);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (server, body, rx) = (server.clone(), body.clone(), rx.clone());
            tokio::spawn(async move {
                let mut load = Load::default();
                let mut connection = server.connect().await.ok();
                loop {
                    let Some(scheduled) = rx.lock().await.recv().await else {
                        return load;
                    };
                    let outcome = send(&server, &mut connection, &body).await;
                    load.record(outcome, scheduled.elapsed());
                }
            })
        })
        .collect();
    for i in 0..total {
        let at = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(at.into()).await;
        if tx.send(at).await.is_err() {
            break;
        }
    }
    drop(tx);
    gather(workers, started).await
}

/// As many reviews as `connections` connections carry, one after the other on each,
/// for `duration`.
pub(crate) async fn saturated(
    server: Arc<Server>,
    body: Arc<Vec<u8>>,
    duration: Duration,
    connections: usize,
) -> Load {
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (server, body) = (server.clone(), body.clone());
            tokio::spawn(async move {
                let mut load = Load::default();
                let mut connection = server.connect().await.ok();
                while started.elapsed() < duration {
                    let sent = Instant::now();
                    let outcome = send(&server, &mut connection, &body).await;
                    load.record(outcome, sent.elapsed());
                }
                load
            })
        })
        .collect();
    gather(workers, started).await
}

async fn gather(workers: Vec<tokio::task::JoinHandle<Load>>, started: Instant) -> Load {
    let mut load = Load::default();
    for worker in workers {
        match worker.await {
            Ok(part) => load.add(part),
            Err(e) => {
                load.failed += 1;
                load.first_failure.get_or_insert(e.to_string());
            }
        }
    }
    load.elapsed_s = started.elapsed().as_secs_f64();
    load.latencies_ms.sort_by(f64::total_cmp);
    load
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_review_is_about_4_kb_and_answers_are_read() {
        let body = review("value").to_string();
        assert!((3500..5000).contains(&body.len()), "{} bytes", body.len());
        assert_eq!(
            head_of(b"HTTP/1.1 200 OK\r\ncontent-length: 12").unwrap(),
            (200, 12)
        );
        assert!(head_of(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked").is_err());
        assert!(head_of(b"garbage").is_err());
    }
}
