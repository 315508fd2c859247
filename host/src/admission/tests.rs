//! End-to-end tests of the admission server: a TLS client that trusts only the CA bundle
//! the certificates publish, the server, and its certificates given as files (rotated as
//! a mounted Secret is) or generated and shared through a Secret on an API server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::certificates::{
    Certificates, Files, Generated, SECRET, Source, cluster, replica, signed, tempdir,
};
use super::server::{Answerer, Options, Server};

/// The longest any wait for the server's behaviour takes before the test fails.
const WAIT: Duration = Duration::from_secs(10);

/// Answers with the path and the body it was given; panics on the path `panic` (an
/// answerer's bug).
fn echo() -> Answerer {
    Arc::new(|path: String, body: Bytes| {
        Box::pin(async move {
            assert_ne!(path, "panic", "the answerer's bug");
            Response::new(format!("{path} {}", String::from_utf8_lossy(&body)))
        })
    })
}

/// The server on a free port of 127.0.0.1, stopped when the guard drops.
async fn serve(
    certificates: &Certificates,
    options: impl FnOnce(&mut Options),
) -> (SocketAddr, DropGuard) {
    let mut opts = Options::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    options(&mut opts);
    let stop = CancellationToken::new();
    let server = Server::start(opts, certificates.resolver(), echo(), stop.clone())
        .await
        .unwrap();
    (server.address(), stop.drop_guard())
}

/// A TLS connection that trusts only the certificates of `ca` (PEM).
async fn connect(address: SocketAddr, ca: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(address).await?;
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::IpAddress(address.ip().into()), tcp)
        .await
}

/// Sends `head` and `body` on a new connection and reads the answer to its end:
/// (status code, body).
async fn exchange(
    address: SocketAddr,
    ca: &[u8],
    head: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut tls = connect(address, ca).await.map_err(|e| e.to_string())?;
    tls.write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(body).await.map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(WAIT, tls.read_to_end(&mut answer)).await;
    if answer.is_empty() {
        return Err(format!("no answer: {read:?}"));
    }
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").ok_or("no head")?;
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or("no status")?;
    Ok((status, body.to_owned()))
}

async fn post(
    address: SocketAddr,
    ca: &[u8],
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    exchange(address, ca, &head, body.as_bytes()).await
}

/// A directory laid out as kubelet mounts a Secret: `tls.crt` and `tls.key` link to
/// `..data/`, a link to the current version's directory, swapped at once.
struct MountedSecret {
    dir: PathBuf,
    versions: usize,
}

impl MountedSecret {
    fn new(cert: &str, key: &str) -> MountedSecret {
        let mut mounted = MountedSecret {
            dir: tempdir(),
            versions: 0,
        };
        mounted.write(cert, key);
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(Path::new("..data").join(name), mounted.dir.join(name))
                .unwrap();
        }
        mounted
    }

    /// A new version, swapped in by one rename of `..data`.
    fn write(&mut self, cert: &str, key: &str) {
        self.versions += 1;
        let version = format!("..version_{}", self.versions);
        std::fs::create_dir(self.dir.join(&version)).unwrap();
        std::fs::write(self.dir.join(&version).join("tls.crt"), cert).unwrap();
        std::fs::write(self.dir.join(&version).join("tls.key"), key).unwrap();
        std::os::unix::fs::symlink(&version, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
    }

    fn files(&self) -> Files {
        Files {
            poll: Duration::from_millis(20),
            ..Files::new(self.dir.join("tls.crt"), self.dir.join("tls.key"))
        }
    }
}

#[tokio::test]
async fn a_review_is_answered_to_a_client_that_trusts_the_ca_bundle() {
    let (chain, key, _) = signed();
    let mounted = MountedSecret::new(&chain, &key);
    let certificates = Certificates::start(Source::Files(mounted.files()))
        .await
        .unwrap();
    let ca = certificates.ca_bundle().borrow().clone();
    let (address, _stop) = serve(&certificates, |_| {}).await;

    let review = r#"{"kind":"AdmissionReview"}"#;
    assert_eq!(
        post(address, &ca, "/validate/k%C3%A9x%2Fa?timeout=10s", review).await,
        Ok((200, format!("validate/kéx/a {review}")))
    );
    // Kept alive: two requests on one connection.
    let mut tls = connect(address, &ca).await.unwrap();
    for n in 0..2 {
        let request = format!("POST /m{n} HTTP/1.1\r\nHost: w\r\nContent-Length: 2\r\n\r\n{{}}");
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut answer = vec![0; 512];
        let read = tokio::time::timeout(WAIT, tls.read(&mut answer))
            .await
            .unwrap()
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with(&format!("m{n} {{}}")),
            "{answer}"
        );
    }

    let (_, _, other_ca) = signed();
    let untrusting = post(address, other_ca.as_bytes(), "/validate", review).await;
    assert!(
        untrusting
            .as_ref()
            .is_err_and(|e| e.contains("invalid peer certificate")),
        "{untrusting:?}"
    );
}

#[tokio::test]
async fn other_methods_oversized_bodies_and_bad_paths_are_refused() {
    let (chain, key, _) = signed();
    let mounted = MountedSecret::new(&chain, &key);
    let certificates = Certificates::start(Source::Files(mounted.files()))
        .await
        .unwrap();
    let ca = certificates.ca_bundle().borrow().clone();
    let (address, _stop) = serve(&certificates, |o| o.max_body = 1024).await;

    for method in ["GET", "PUT", "DELETE"] {
        let head = format!("{method} /validate HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n");
        let (status, _) = exchange(address, &ca, &head, b"").await.unwrap();
        assert_eq!(status, 405, "{method}");
    }
    assert_eq!(
        post(address, &ca, "/v", &"x".repeat(1024))
            .await
            .map(|a| a.0),
        Ok(200)
    );
    assert_eq!(
        post(address, &ca, "/v", &"x".repeat(1025))
            .await
            .map(|a| a.0),
        Ok(413)
    );
    // Refused on its announced length, before it comes.
    let announced = "POST /v HTTP/1.1\r\nHost: w\r\nContent-Length: 1025\r\n\r\n";
    assert_eq!(
        exchange(address, &ca, announced, b"").await.map(|a| a.0),
        Ok(413)
    );
    // No length announced: counted as it comes.
    let chunk = "x".repeat(800);
    let chunked = format!(
        "POST /v HTTP/1.1\r\nHost: w\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n320\r\n{chunk}\r\n320\r\n{chunk}\r\n0\r\n\r\n"
    );
    assert_eq!(
        exchange(address, &ca, &chunked, b"").await.map(|a| a.0),
        Ok(413)
    );
    assert_eq!(
        post(address, &ca, "/v%FF", "{}").await.map(|a| a.0),
        Ok(400)
    );
}

/// The connection's end as the client sees it: its answer, or nothing.
async fn until_closed(mut stream: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server did not close the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn bad_handshakes_and_slow_clients_hold_only_their_own_connection() {
    let (chain, key, _) = signed();
    let mounted = MountedSecret::new(&chain, &key);
    let certificates = Certificates::start(Source::Files(mounted.files()))
        .await
        .unwrap();
    let ca = certificates.ca_bundle().borrow().clone();
    let short = Duration::from_millis(300);
    let (address, _stop) = serve(&certificates, |o| {
        (o.handshake_timeout, o.header_timeout, o.body_timeout) = (short, short, short);
    })
    .await;

    let mut plain = TcpStream::connect(address).await.unwrap();
    plain
        .write_all(b"POST /v HTTP/1.1\r\nHost: w\r\n\r\n")
        .await
        .unwrap();
    let silent = TcpStream::connect(address).await.unwrap();
    let mut no_head = connect(address, &ca).await.unwrap();
    no_head.write_all(b"POST /v HTTP/1.1\r\n").await.unwrap();
    let mut no_body = connect(address, &ca).await.unwrap();
    no_body
        .write_all(b"POST /v HTTP/1.1\r\nHost: w\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    // An answerer that panics loses its request only.
    assert!(post(address, &ca, "/panic", "{}").await.is_err());
    // Served meanwhile.
    assert_eq!(
        post(address, &ca, "/v", "{}").await,
        Ok((200, "v {}".to_owned()))
    );

    // A TLS alert, at most.
    assert!(!until_closed(plain).await.contains("HTTP"));
    assert_eq!(until_closed(silent).await, "");
    assert!(!until_closed(no_head).await.contains(" 200 "));
    assert!(until_closed(no_body).await.starts_with("HTTP/1.1 408"));
    assert_eq!(
        post(address, &ca, "/v", "{}").await,
        Ok((200, "v {}".to_owned()))
    );
}

#[tokio::test]
async fn connections_beyond_the_bound_wait_until_one_ends() {
    let (chain, key, _) = signed();
    let mounted = MountedSecret::new(&chain, &key);
    let certificates = Certificates::start(Source::Files(mounted.files()))
        .await
        .unwrap();
    let (address, _stop) = serve(&certificates, |o| o.max_connections = 2).await;
    let ca = certificates.ca_bundle().borrow().clone();
    let first = connect(address, &ca).await.unwrap();
    let second = connect(address, &ca).await.unwrap();
    // A third is not served while two are open...
    let third = post(address, &ca, "/validate", "{}");
    let mut third = std::pin::pin!(third);
    let waited = tokio::time::timeout(Duration::from_millis(300), third.as_mut()).await;
    assert!(waited.is_err(), "answered beyond the bound: {waited:?}");
    // ...and is, once one of them ends.
    drop(first);
    let answered = tokio::time::timeout(WAIT, third).await.expect("answered");
    assert_eq!(answered, Ok((200, "validate {}".to_owned())));
    drop(second);
}

#[tokio::test]
async fn the_server_stops_on_its_signal() {
    let (chain, key, _) = signed();
    let mounted = MountedSecret::new(&chain, &key);
    let certificates = Certificates::start(Source::Files(mounted.files()))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let options = Options::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = Server::start(options, certificates.resolver(), echo(), stop.clone())
        .await
        .unwrap();
    let address = server.address();
    let idle = connect(address, &certificates.ca_bundle().borrow())
        .await
        .unwrap();
    stop.cancel();
    tokio::time::timeout(WAIT, server.stopped())
        .await
        .expect("stopped");
    assert!(
        TcpStream::connect(address).await.is_err(),
        "still listening"
    );
    drop(idle);
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Waits until `n` lines contain `text`.
    async fn wait_for(&self, text: &str, n: usize) {
        let found = tokio::time::timeout(WAIT, async {
            while String::from_utf8_lossy(&self.0.lock().unwrap())
                .matches(text)
                .count()
                < n
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(found.is_ok(), "no log line with {text:?}");
    }
}

/// Connects with a client that trusts only `ca` until the handshake succeeds.
async fn until_trusted(address: SocketAddr, ca: &[u8]) {
    let trusted = tokio::time::timeout(WAIT, async {
        while connect(address, ca).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        trusted.is_ok(),
        "the server never served a certificate of that CA"
    );
}

#[tokio::test]
async fn files_rotated_while_running_are_served_and_a_broken_version_is_not() {
    // A current-thread runtime: the reloading task logs to this thread's subscriber.
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _logs = tracing::subscriber::set_default(subscriber);

    let (chain, key, ca) = signed();
    let mut mounted = MountedSecret::new(&chain, &key);
    let certificates = Certificates::start(Source::Files(mounted.files()))
        .await
        .unwrap();
    let mut bundle = certificates.ca_bundle();
    assert_eq!(*bundle.borrow_and_update(), ca.as_bytes());
    let (address, _stop) = serve(&certificates, |_| {}).await;
    assert!(connect(address, ca.as_bytes()).await.is_ok());

    // A broken version: logged, the old certificate kept.
    mounted.write(
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        &key,
    );
    captured.wait_for("keeps the certificate it had", 1).await;
    assert!(connect(address, ca.as_bytes()).await.is_ok());
    // Another: a new certificate with the old key.
    let (chain2, key2, ca2) = signed();
    mounted.write(&chain2, &key);
    captured.wait_for("keeps the certificate it had", 2).await;
    assert!(connect(address, ca.as_bytes()).await.is_ok());
    assert!(!bundle.has_changed().unwrap());

    // A good one: served from the next connection on, its CA told to the watchers.
    mounted.write(&chain2, &key2);
    tokio::time::timeout(WAIT, bundle.changed())
        .await
        .expect("told")
        .unwrap();
    assert_eq!(*bundle.borrow_and_update(), ca2.as_bytes());
    until_trusted(address, ca2.as_bytes()).await;
    assert!(
        connect(address, ca.as_bytes()).await.is_err(),
        "the old certificate is still served"
    );
    captured.wait_for("serves the new certificate", 1).await;
}

#[tokio::test]
async fn replicas_with_generated_certificates_serve_with_one_ca_and_follow_its_replacement() {
    let (_cluster, client) = cluster().await;
    let refreshing = |client: &kube::Client| Generated {
        refresh: Duration::from_millis(20),
        ..replica(client)
    };
    let one = Certificates::start(Source::Generated(refreshing(&client)))
        .await
        .unwrap();
    let two = Certificates::start(Source::Generated(refreshing(&client)))
        .await
        .unwrap();
    let mut bundle = one.ca_bundle();
    let ca = bundle.borrow_and_update().clone();
    assert_eq!(*two.ca_bundle().borrow(), ca);
    let (address_one, _stop_one) = serve(&one, |_| {}).await;
    let (address_two, _stop_two) = serve(&two, |_| {}).await;
    for address in [address_one, address_two] {
        assert_eq!(
            post(address, &ca, "/v", "{}").await,
            Ok((200, "v {}".to_owned()))
        );
    }

    // Another replica replaces the Secret (here: it was deleted, and made anew).
    let api =
        kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "default");
    api.delete(SECRET, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let three = Certificates::start(Source::Generated(replica(&client)))
        .await
        .unwrap();
    let new_ca = three.ca_bundle().borrow().clone();
    assert_ne!(new_ca, ca);
    tokio::time::timeout(WAIT, bundle.changed())
        .await
        .expect("told")
        .unwrap();
    assert_eq!(*bundle.borrow(), new_ca);
    until_trusted(address_one, &new_ca).await;
    until_trusted(address_two, &new_ca).await;
}

/// The API server's webhook client (kube-apiserver's behaviour) calls this server, trusting
/// the CA bundle of a certificate generated into a Secret on that same API server.
#[tokio::test]
async fn the_api_server_calls_this_server_with_the_generated_ca_bundle() {
    use base64::Engine;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    use serde_json::{Value, json};

    let (_cluster, client) = cluster().await;
    let certificates = Certificates::start(Source::Generated(replica(&client)))
        .await
        .unwrap();
    let refuse: Answerer = Arc::new(|path: String, body: Bytes| {
        Box::pin(async move {
            let review: Value = serde_json::from_slice(&body).unwrap_or_default();
            let answer = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "allowed": false,
                    "status": {"code": 403, "message": format!("refused by {path}")},
                },
            });
            Response::new(answer.to_string())
        })
    });
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let options = Options::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = Server::start(options, certificates.resolver(), refuse, stop)
        .await
        .unwrap();
    let ca_bundle =
        base64::engine::general_purpose::STANDARD.encode(&*certificates.ca_bundle().borrow());
    let configuration = serde_json::from_value(json!({
        "metadata": {"name": "kapsel"},
        "webhooks": [{
            "name": "refuse.kapsel.dev",
            "clientConfig": {
                "url": format!("https://{}/validate/config%20maps", server.address()),
                "caBundle": ca_bundle,
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap();
    let configurations: kube::Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = kube::Api::all(client.clone());
    configurations
        .create(&PostParams::default(), &configuration)
        .await
        .unwrap();

    let config_map: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "refused"}})).unwrap();
    let refused = kube::Api::<ConfigMap>::namespaced(client, "default")
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("not refused by the webhook: {refused}");
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "admission webhook \"refuse.kapsel.dev\" denied the request: refused by validate/config maps"
    );
}
