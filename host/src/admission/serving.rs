//! The admission webhooks as the operator serves them ([`AdmissionServer`], Kopf's
//! `settings.admission`): the certificate, the HTTPS server answering reviews through
//! `dispatch`, and the managed configurations pointing at it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::certificates::{self, Certificates, Files, Generated, Source};
use super::dispatch::Dispatch;
use super::managed::{Manager, Target};
use super::server::{Answerer, Options, Server};
use crate::activities::Context;
use crate::limits::Limits;
use crate::runtime::ServedGuests;

/// The admission webhooks an operator serves (Kopf's `settings.admission.server` and
/// `managed`): where its HTTPS server listens, its certificate, and the webhook
/// configurations it keeps pointing at it.
///
/// ```
/// # use kapsel_host::AdmissionServer;
/// let admission = AdmissionServer::new("0.0.0.0:9443".parse().unwrap())
///     .managed("kopfexamples.example.com")
///     .service("operators", "kex-operator", 443);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionServer {
    listen: SocketAddr,
    certificate: Option<(PathBuf, PathBuf)>,
    secret: Option<(String, String)>,
    managed: Option<String>,
    service: Option<(String, String, u16)>,
    url: Option<String>,
    remove_on_exit: bool,
    max_connections: u32,
}

impl AdmissionServer {
    /// Serves HTTPS on `listen` (port 0: a free port), with a certificate generated into a
    /// Secret unless [`AdmissionServer::certificate`] gives one; manages no configuration
    /// unless [`AdmissionServer::managed`] names one.
    #[must_use]
    pub fn new(listen: SocketAddr) -> AdmissionServer {
        AdmissionServer {
            listen,
            certificate: None,
            secret: None,
            managed: None,
            service: None,
            url: None,
            remove_on_exit: false,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// The serving certificate and its key, PEM files (a chain: the CA bundle is its last
    /// certificate), read again whenever their content changes (a mounted Secret).
    #[must_use]
    pub fn certificate(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.certificate = Some((cert.into(), key.into()));
        self
    }

    /// The Secret a generated certificate is kept in, shared by every replica (default:
    /// the operator's namespace, `<managed name or "kapsel">-admission-tls`).
    #[must_use]
    pub fn secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.secret = Some((namespace.into(), name.into()));
        self
    }

    /// Manages the `ValidatingWebhookConfiguration` and `MutatingWebhookConfiguration` of
    /// this name: a webhook per admission handler, kept true on reloads and certificate
    /// changes.
    #[must_use]
    pub fn managed(mut self, name: impl Into<String>) -> Self {
        self.managed = Some(name.into());
        self
    }

    /// The managed configurations reach the server through this Service (and a generated
    /// certificate covers its DNS names).
    #[must_use]
    pub fn service(
        mut self,
        namespace: impl Into<String>,
        name: impl Into<String>,
        port: u16,
    ) -> Self {
        self.service = Some((namespace.into(), name.into(), port));
        self
    }

    /// The managed configurations reach the server at this URL (default, without a
    /// Service: `https://<listen address>`, `127.0.0.1` for an unspecified one).
    #[must_use]
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// On exit, removes the webhooks of the handlers that are not `persistent` from the
    /// managed configurations (Kopf's cleanup); by default every webhook stays.
    #[must_use]
    pub fn remove_on_exit(mut self) -> Self {
        self.remove_on_exit = true;
        self
    }

    /// The most connections open at once unless [`AdmissionServer::max_connections`]
    /// says otherwise: kube-apiserver keeps a few per webhook and replica, and each
    /// connection holds its TLS and HTTP buffers.
    pub const DEFAULT_MAX_CONNECTIONS: u32 = super::server::DEFAULT_MAX_CONNECTIONS;

    /// The most connections open at once: beyond them, a new connection waits in the
    /// listen backlog until one ends, so a flood of connections costs a bounded memory.
    #[must_use]
    pub fn max_connections(mut self, connections: u32) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// The URL the managed configurations name, once the server listens on `bound`.
    fn url_for(&self, bound: SocketAddr) -> String {
        self.url.clone().unwrap_or_else(|| {
            let ip = match bound.ip() {
                ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                ip => ip,
            };
            format!("https://{}", SocketAddr::new(ip, bound.port()))
        })
    }

    /// What a generated certificate covers: the Service's names, the URL's host, and the
    /// loopback names for development.
    fn certificate_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if let Some((namespace, name, _)) = &self.service {
            names.extend(certificates::service_names(name, namespace));
        }
        if let Some(host) = self.url.as_deref().and_then(url_host) {
            names.push(host);
        }
        names.push("localhost".to_owned());
        for address in certificates::address_names(self.listen) {
            if !names.contains(&address) {
                names.push(address);
            }
        }
        names
    }
}

/// The host of an `https://host[:port][/path]` URL, without IPv6 brackets.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next()?;
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next()?
    } else {
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
    };
    (!host.is_empty()).then(|| host.to_owned())
}

/// Why the admission webhooks cannot be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServingError {
    #[error(transparent)]
    Certificate(#[from] certificates::CertificateError),
    #[error(transparent)]
    Serve(#[from] super::server::ServeError),
}

/// The webhooks being served; [`Serving::stop`] ends them.
pub(crate) struct Serving {
    server: Server,
    manager: Option<tokio::task::JoinHandle<()>>,
    stop: CancellationToken,
    _certificates: Certificates,
}

impl Serving {
    /// Stops serving, and lets the manager clean up (when asked to).
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        if let Some(manager) = self.manager {
            let _ = manager.await;
        }
        self.server.stopped().await;
    }
}

/// Everything the webhooks need of the operator.
pub(crate) struct Operator<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) served: &'a ServedGuests,
    pub(crate) limits: Arc<Limits>,
    pub(crate) context: Context,
    /// The operator's namespace: the default of a generated certificate's Secret.
    pub(crate) namespace: &'a str,
}

/// Serves `config`'s webhooks for the guests `operator` serves (whichever they are after
/// a reload).
///
/// # Errors
/// The certificate cannot be loaded or generated; the address cannot be bound.
pub(crate) async fn serve(
    config: &AdmissionServer,
    operator: Operator<'_>,
) -> Result<Serving, ServingError> {
    let source = match &config.certificate {
        Some((cert, key)) => Source::Files(Files::new(cert.clone(), key.clone())),
        None => {
            let (namespace, secret) = config.secret.clone().unwrap_or_else(|| {
                let prefix = config.managed.as_deref().unwrap_or("kapsel");
                (
                    operator.namespace.to_owned(),
                    format!("{prefix}-admission-tls"),
                )
            });
            Source::Generated(Generated::new(
                operator.client.clone(),
                namespace,
                secret,
                config.certificate_names(),
            ))
        }
    };
    let certificates = Certificates::start(source).await?;
    let resources = match crate::cluster::scan(operator.client).await {
        Ok(resources) => resources,
        Err(error) => {
            tracing::warn!(
                "admission: discovery failed (asked again at the first review): {error}"
            );
            Vec::new()
        }
    };
    let dispatch = Arc::new(Dispatch::new(
        operator.served.clone(),
        Arc::clone(&operator.limits),
        operator.context,
        (Some(operator.client.clone()), resources),
    ));
    let answering = Arc::clone(&dispatch);
    let answer: Answerer = Arc::new(move |path, body| {
        let dispatch = Arc::clone(&answering);
        Box::pin(async move { dispatch.answer(&path, &body).await })
    });
    let stop = CancellationToken::new();
    let mut options = Options::new(config.listen);
    options.max_connections = usize::try_from(config.max_connections).unwrap_or(usize::MAX);
    let server = Server::start(options, certificates.resolver(), answer, stop.clone()).await?;
    let manager = config.managed.as_ref().map(|name| {
        let target = match &config.service {
            Some((namespace, service, port)) => Target::Service {
                namespace: namespace.clone(),
                name: service.clone(),
                port: *port,
            },
            None => Target::Url(config.url_for(server.address())),
        };
        let manager = Manager {
            client: operator.client.clone(),
            name: name.clone(),
            target,
            ca_bundle: certificates.ca_bundle(),
            reloads: operator.served.reloads(),
            timeout: webhook_timeout(&operator.limits),
            remove_on_exit: config.remove_on_exit,
        };
        tokio::spawn(manager.run(dispatch, stop.clone()))
    });
    Ok(Serving {
        server,
        manager,
        stop,
        _certificates: certificates,
    })
}

/// The `timeoutSeconds` of the managed webhooks: past the admission calls' budget, with
/// room for waiting on a slot; at least kube's default of 10 s, at most its 30 s.
fn webhook_timeout(limits: &Limits) -> Duration {
    (limits.admission_deadline + Duration::from_secs(1))
        .max(Duration::from_secs(10))
        .min(Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_defaults_to_the_listen_address_on_loopback() {
        let any = AdmissionServer::new("0.0.0.0:9443".parse().unwrap());
        assert_eq!(
            any.url_for("0.0.0.0:9443".parse().unwrap()),
            "https://127.0.0.1:9443"
        );
        let given = any.clone().url("https://op.example:8443/hooks");
        assert_eq!(
            given.url_for("0.0.0.0:9443".parse().unwrap()),
            "https://op.example:8443/hooks"
        );
        let v6 = AdmissionServer::new("[::1]:9443".parse().unwrap());
        assert_eq!(
            v6.url_for("[::1]:9443".parse().unwrap()),
            "https://[::1]:9443"
        );
    }

    #[test]
    fn a_generated_certificate_covers_the_service_the_url_and_loopback() {
        let config = AdmissionServer::new("0.0.0.0:9443".parse().unwrap())
            .service("ops", "kex", 443)
            .url("https://op.example:8443");
        let names = config.certificate_names();
        for name in [
            "kex.ops.svc",
            "kex.ops.svc.cluster.local",
            "op.example",
            "localhost",
            "127.0.0.1",
        ] {
            assert!(names.contains(&name.to_owned()), "{name} in {names:?}");
        }
        assert_eq!(url_host("https://[::1]:9443/x").as_deref(), Some("::1"));
        assert_eq!(url_host("https://host").as_deref(), Some("host"));
    }
}
