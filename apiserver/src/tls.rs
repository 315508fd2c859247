//! HTTPS beside HTTP on the one port (with RBAC on): kubectl (client-go) sends a
//! kubeconfig's token only over TLS, so the server's kubeconfig names `https://` with the
//! server's own CA, while plain-HTTP clients keep working. A connection whose first byte
//! opens a TLS handshake gets TLS; any other is served as plain HTTP. The CA and the
//! serving certificate (for 127.0.0.1 and localhost) are made once and kept with the
//! state file's credentials.
//!
//! Client certificates (kube's x509 authenticator, for tests of clients that log in with
//! one): a TLS client may present a certificate signed by the server's client CA
//! ([`ClientCa`], made at each start and never kept, so what it signed is valid until
//! the server stops); one that presents none is served as before. The certificate a
//! connection presented travels with each of its requests as its [`Peer`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
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

    fn acceptor(&self, client_ca: &ClientCa) -> Result<TlsAcceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(client_ca.certificate.der().to_vec()))
            .map_err(|e| format!("cannot use the client CA: {e}"))?;
        // Clients without a certificate are served too (tokens, anonymous).
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("cannot verify client certificates: {e}"))?;
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_client_cert_verifier(verifier).with_single_cert(
                    vec![CertificateDer::from(self.cert_der.clone())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
                )
            })
            .map_err(|e| format!("cannot use the TLS certificate: {e}"))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// The CA that signs client certificates, for this run of the server only.
pub(crate) struct ClientCa {
    certificate: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa").finish_non_exhaustive()
    }
}

/// A client certificate the client CA signed: PEM, with its key, and its DER (what the
/// connection presents).
pub(crate) struct ClientCertificate {
    pub(crate) certificate_pem: String,
    pub(crate) key_pem: String,
    pub(crate) der: Vec<u8>,
}

impl ClientCa {
    pub(crate) fn generate() -> Result<ClientCa, String> {
        let fail = |e: rcgen::Error| format!("cannot make the client CA: {e}");
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kapsel-client-ca");
        let certificate = params.self_signed(&key).map_err(fail)?;
        Ok(ClientCa { certificate, key })
    }

    /// A client certificate for `user` (its common name), for TLS client authentication.
    pub(crate) fn issue(&self, user: &str) -> Result<ClientCertificate, String> {
        let fail = |e: rcgen::Error| format!("cannot make a client certificate: {e}");
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, user);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let signed = params
            .signed_by(&key, &self.certificate, &self.key)
            .map_err(fail)?;
        Ok(ClientCertificate {
            certificate_pem: signed.pem(),
            key_pem: key.serialize_pem(),
            der: signed.der().to_vec(),
        })
    }
}

/// A connection, plain or TLS.
pub(crate) type Conn = Either<TcpStream, TlsStream<TcpStream>>;

/// What the server knows of a connection's client: the certificate it presented (DER),
/// if any.
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    pub(crate) certificate: Option<Vec<u8>>,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, DualListener>>
    for Peer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, DualListener>) -> Peer {
        stream.remote_addr().clone()
    }
}

/// Accepts TCP connections and hands on each, after its TLS handshake if it starts one;
/// handshakes run in their own tasks, so a slow client holds up no other.
pub(crate) struct DualListener {
    conns: mpsc::Receiver<(Conn, Peer)>,
}

impl DualListener {
    pub(crate) fn new(
        listener: TcpListener,
        certs: &Certificates,
        client_ca: &ClientCa,
    ) -> Result<DualListener, String> {
        let acceptor = certs.acceptor(client_ca)?;
        let (tx, conns) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    // The server stopped: let go of the port.
                    () = tx.closed() => return,
                };
                let (tcp, _) = match accepted {
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
                    let mut certificate = None;
                    let conn = if tls {
                        match acceptor.accept(tcp).await {
                            Ok(s) => {
                                certificate = s
                                    .get_ref()
                                    .1
                                    .peer_certificates()
                                    .and_then(|c| c.first())
                                    .map(|c| c.to_vec());
                                Either::Right(s)
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                return;
                            }
                        }
                    } else {
                        Either::Left(tcp)
                    };
                    let _ = tx.send((conn, Peer { certificate })).await;
                });
            }
        });
        Ok(DualListener { conns })
    }
}

impl axum::serve::Listener for DualListener {
    type Io = Conn;
    type Addr = Peer;

    async fn accept(&mut self) -> (Conn, Peer) {
        match self.conns.recv().await {
            Some(c) => c,
            // The accepting task is gone (it never ends by itself): accept nothing more.
            None => std::future::pending().await,
        }
    }

    /// The listener's own side: no client, no certificate.
    fn local_addr(&self) -> std::io::Result<Peer> {
        Ok(Peer { certificate: None })
    }
}
