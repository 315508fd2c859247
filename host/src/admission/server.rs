//! The admission webhooks' HTTPS server: TLS (rustls, the certificate read at each
//! handshake, so a rotation needs no restart) and HTTP/1.1 on one address. A `POST
//! /<path>` with a body of at most `max_body` bytes is handed to the [`Answerer`] as the
//! path (without its leading `/`, percent-decoded; the query, such as kube-apiserver's
//! `?timeout=10s`, left out) and the body; its response is written back. Any other method
//! is answered 405, a larger body 413, a path that does not decode to UTF-8 400.
//!
//! Every connection is its own task, bounded in time: the TLS handshake, the request's
//! head and its body each have a timeout, so a bad handshake or a slow client holds only
//! its own connection. At most [`Options::max_connections`] are open at once: beyond
//! them, a new connection waits in the listen backlog until one ends, so a flood of
//! connections costs a bounded memory. The server stops accepting on its stop signal, and lets each open
//! connection finish the request it is in (for at most [`GRACE`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode, header};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::server::ResolvesServerCert;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What answers a request: called with the path (no leading `/`, percent-decoded) and
/// the body of each `POST`, it returns the response to write back. The admission
/// dispatch implements it (an `AdmissionReview` in, one out); it never sees other
/// methods, oversized bodies or undecodable paths.
pub(crate) type Answerer =
    Arc<dyn Fn(String, Bytes) -> BoxFuture<'static, Response<String>> + Send + Sync>;

/// How long open connections may finish their request once the server stops.
const GRACE: Duration = Duration::from_secs(5);

/// Where and how the server listens.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The address to listen on; port 0 picks a free one ([`Server::address`]).
    pub(crate) address: SocketAddr,
    /// The largest request body (kube-apiserver's webhook payloads stay under 3 MiB).
    pub(crate) max_body: usize,
    /// The longest TLS handshake.
    pub(crate) handshake_timeout: Duration,
    /// The longest wait for a request's head, counted from the end of the request before
    /// on a kept-alive connection: also how long an idle connection stays open. Longer
    /// than a slow client needs, so that kube-apiserver (which keeps connections for 90 s)
    /// seldom finds the one it reuses closed under its request.
    pub(crate) header_timeout: Duration,
    /// The longest wait for a request's body.
    pub(crate) body_timeout: Duration,
    /// The most connections open at once.
    pub(crate) max_connections: usize,
}

impl Options {
    pub(crate) fn new(address: SocketAddr) -> Options {
        Options {
            address,
            max_body: 8 << 20,
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            max_connections: usize::try_from(DEFAULT_MAX_CONNECTIONS).unwrap_or(usize::MAX),
        }
    }
}

/// The most connections open at once unless told otherwise: kube-apiserver keeps a few
/// per webhook and replica, and each connection holds its TLS and HTTP buffers.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 256;

/// Why the server cannot serve.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("cannot listen on {address} for admission webhooks")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The running server; it stops on the stop signal it was started with (dropping this
/// does not stop it).
#[derive(Debug)]
pub(crate) struct Server {
    address: SocketAddr,
    done: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Listens on `options.address` and serves until `stop`, with the certificate
    /// `certificates` resolves at each handshake.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub(crate) async fn start(
        options: Options,
        certificates: Arc<dyn ResolvesServerCert>,
        answer: Answerer,
        stop: CancellationToken,
    ) -> Result<Server, ServeError> {
        let bind = |source| ServeError::Bind {
            address: options.address,
            source,
        };
        let listener = TcpListener::bind(options.address).await.map_err(bind)?;
        let address = listener.local_addr().map_err(bind)?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bind(std::io::Error::other(e)))?
        .with_no_client_auth()
        .with_cert_resolver(certificates);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        tracing::info!("Serving admission webhooks on https://{address}.");
        let done = tokio::spawn(accept(listener, acceptor, answer, options, stop));
        Ok(Server { address, done })
    }

    /// The address bound (the port picked, for port 0).
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Waits until the server stopped and its connections ended.
    pub(crate) async fn stopped(self) {
        let _ = self.done.await;
    }
}

/// Accepts connections until `stop`, each served in a task of its own.
async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    answer: Answerer,
    options: Options,
    stop: CancellationToken,
) {
    let connections = TaskTracker::new();
    let open = Arc::new(tokio::sync::Semaphore::new(options.max_connections.max(1)));
    loop {
        // At the bound, the next connection waits in the listen backlog.
        if open.available_permits() == 0 {
            tracing::debug!(
                "{} admission connections are open, the most allowed: the next waits until one ends.",
                options.max_connections
            );
        }
        let permit = tokio::select! {
            () = stop.cancelled() => break,
            permit = Arc::clone(&open).acquire_owned() => permit,
        };
        let Ok(permit) = permit else { break };
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, _)) => {
                let served = connection(
                    tcp,
                    acceptor.clone(),
                    Arc::clone(&answer),
                    options.clone(),
                    stop.clone(),
                );
                connections.spawn(async move {
                    served.await;
                    drop(permit);
                });
            }
            Err(error) => {
                // Out of file descriptors, or a connection reset before it was accepted.
                tracing::debug!("Accepting an admission connection failed: {error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// One connection: its handshake, then its requests until it closes or the server stops.
async fn connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    answer: Answerer,
    options: Options,
    stop: CancellationToken,
) {
    let tls = match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!("An admission client's TLS handshake failed: {error}");
            return;
        }
        Err(_) => {
            tracing::debug!("An admission client's TLS handshake took too long.");
            return;
        }
    };
    let limits = (options.max_body, options.body_timeout);
    let service = hyper::service::service_fn(move |request| {
        let answer = Arc::clone(&answer);
        async move { Ok::<_, Infallible>(respond(request, answer, limits).await) }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    let served = http.serve_connection(TokioIo::new(tls), service);
    let mut served = std::pin::pin!(served);
    let result = tokio::select! {
        result = served.as_mut() => result,
        () = stop.cancelled() => {
            served.as_mut().graceful_shutdown();
            match tokio::time::timeout(GRACE, served.as_mut()).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!("An admission connection ended with an error: {error}");
    }
}

/// The response to one request.
async fn respond(
    request: Request<Incoming>,
    answer: Answerer,
    (max_body, body_timeout): (usize, Duration),
) -> Response<String> {
    if request.method() != Method::POST {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only POST is served");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return response;
    }
    let Some(path) = percent_decoded(request.uri().path().trim_start_matches('/')) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "the path is not percent-encoded UTF-8",
        );
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        closing(plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the request body is larger than {max_body} bytes"),
        ))
    };
    if declared.is_some_and(|n| n > max_body as u64) {
        return too_large();
    }
    let body =
        match tokio::time::timeout(body_timeout, read_body(request.into_body(), max_body)).await {
            Ok(Ok(Some(body))) => body,
            Ok(Ok(None)) => return too_large(),
            Ok(Err(error)) => {
                return closing(plain(
                    StatusCode::BAD_REQUEST,
                    &format!("cannot read the request body: {error}"),
                ));
            }
            Err(_) => {
                return closing(plain(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body took too long",
                ));
            }
        };
    answer(path, body).await
}

/// The body, or `None` past `max` bytes.
async fn read_body(mut body: Incoming, max: usize) -> Result<Option<Bytes>, hyper::Error> {
    let mut read = BytesMut::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame?.into_data() {
            if read.len() + data.len() > max {
                return Ok(None);
            }
            read.extend_from_slice(&data);
        }
    }
    Ok(Some(read.freeze()))
}

fn plain(status: StatusCode, text: &str) -> Response<String> {
    let mut response = Response::new(format!("{text}\n"));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The response, closing the connection after it (its request's body is left unread).
fn closing(mut response: Response<String>) -> Response<String> {
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// `%XX` escapes decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decoded(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_percent_decoded() {
        assert_eq!(
            percent_decoded("validate/a%2Fb%20c").as_deref(),
            Some("validate/a/b c")
        );
        assert_eq!(percent_decoded("%C3%A9").as_deref(), Some("é"));
        assert_eq!(percent_decoded(""), Some(String::new()));
        for bad in ["%", "%2", "%zz", "%FF", "%+1"] {
            assert_eq!(percent_decoded(bad), None, "{bad}");
        }
    }
}
