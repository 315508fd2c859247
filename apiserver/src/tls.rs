//! HTTPS beside HTTP on the one port (with RBAC on): kubectl (client-go) sends a
//! kubeconfig's token only over TLS, so the server's kubeconfig names `https://` with the
//! server's own CA, while plain-HTTP clients keep working. A connection whose first byte
//! opens a TLS handshake gets TLS; any other is served as plain HTTP. The CA and the
//! serving certificate (for 127.0.0.1 and localhost) are made once and kept with the
//! state file's credentials.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::either::Either;

/// The serving certificate and the CA that signed it.
#[derive(Clone)]
pub(crate) struct Certificates {
    /// The CA certificate (PEM), for kubeconfigs' `certificate-authority-data`.
    pub(crate) ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates").finish_non_exhaustive()
    }
}

impl Certificates {
    /// A fresh CA and a certificate it signed for 127.0.0.1 and localhost.
    pub(crate) fn generate() -> Result<Certificates, String> {
        let fail = |e: rcgen::Error| format!("cannot make the TLS certificates: {e}");
        let ca_key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name = rcgen::DistinguishedName::new();
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "kapsel-ca");
        let ca = ca.self_signed(&ca_key).map_err(fail)?;
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut leaf =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
                .map_err(fail)?;
        leaf.distinguished_name = rcgen::DistinguishedName::new();
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "kapsel-apiserver");
        let leaf = leaf.signed_by(&key, &ca, &ca_key).map_err(fail)?;
        Ok(Certificates {
            ca_pem: ca.pem(),
            cert_der: leaf.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    pub(crate) fn from_json(v: &Value) -> Result<Certificates, String> {
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("the TLS credentials have no {k}"))
        };
        let der = |k: &str| {
            STANDARD
                .decode(text(k)?)
                .map_err(|e| format!("the TLS credentials' {k} is not base64: {e}"))
        };
        Ok(Certificates {
            ca_pem: text("ca")?.to_string(),
            cert_der: der("certificate")?,
            key_der: der("key")?,
        })
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({"ca": self.ca_pem, "certificate": STANDARD.encode(&self.cert_der), "key": STANDARD.encode(&self.key_der)})
    }

    fn acceptor(&self) -> Result<TlsAcceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth().with_single_cert(
                    vec![CertificateDer::from(self.cert_der.clone())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
                )
            })
            .map_err(|e| format!("cannot use the TLS certificate: {e}"))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// A connection, plain or TLS.
pub(crate) type Conn = Either<TcpStream, TlsStream<TcpStream>>;

/// Accepts TCP connections and hands on each, after its TLS handshake if it starts one;
/// handshakes run in their own tasks, so a slow client holds up no other.
pub(crate) struct DualListener {
    conns: mpsc::Receiver<(Conn, SocketAddr)>,
    addr: SocketAddr,
}

impl DualListener {
    pub(crate) fn new(listener: TcpListener, certs: &Certificates) -> Result<DualListener, String> {
        let acceptor = certs.acceptor()?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (tx, conns) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    // The server stopped: let go of the port.
                    () = tx.closed() => return,
                };
                let (tcp, peer) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let (tx, acceptor) = (tx.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let mut first = [0u8; 1];
                    // A TLS record of type handshake (22) opens every TLS connection.
                    let tls = matches!(tcp.peek(&mut first).await, Ok(1) if first[0] == 22);
                    let conn = if tls {
                        match acceptor.accept(tcp).await {
                            Ok(s) => Either::Right(s),
                            Err(e) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                return;
                            }
                        }
                    } else {
                        Either::Left(tcp)
                    };
                    let _ = tx.send((conn, peer)).await;
                });
            }
        });
        Ok(DualListener { conns, addr })
    }
}

impl axum::serve::Listener for DualListener {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        match self.conns.recv().await {
            Some(c) => c,
            // The accepting task is gone (it never ends by itself): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}
