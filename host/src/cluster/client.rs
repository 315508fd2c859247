//! The HTTP client the operator talks to its cluster with.
//!
//! kube's own stack — TLS, connect and write timeouts, authentication, extra headers —
//! with two differences. It never retries a request: a request is retried in one place,
//! [`retried`](super::requests::retried), with Kopf's backoffs, for the operator's own
//! writes (patches, Events); the guests' calls are answered as the server answered them,
//! once (SECURITY.md), and watches resume with kube-runtime's backoff. (kube's
//! `server_retry` layer, retrying 429, 503 and 504 up to 15 times with delays up to
//! 1,000 s, sat under both and multiplied what the server saw.) And the pool of idle
//! connections is bounded: kube-rs speaks HTTP/1.1 only, so every request in flight
//! holds a connection of its own, and hyper's default pool keeps each of them once it is
//! idle, without limit, for 90 s, memory an operator has no use for after a burst
//! (docs/performance.md). client-go bounds the same pool (25 per host, 90 s); Kopf's
//! aiohttp keeps idle connections 15 s.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

/// Idle connections kept per API server. Requests beyond this many at once still get a
/// connection each; only what is idle beyond it is closed. The host's steady traffic
/// (patches of objects in their turn, Events, guests' calls) reuses these, and so does a
/// burst: 1,000 kopfexamples created at once (`make bench`) keep ~100 requests in flight,
/// and with a smaller pool each connection beyond it was closed as it came back and
/// opened again for the next request (on a real cluster, a TLS handshake each, on both
/// sides; figures: docs/performance.md). Kopf's aiohttp keeps up to 100.
pub(crate) const IDLE_CONNECTIONS: usize = 64;

/// How long an idle connection is kept (hyper's and client-go's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A client of the cluster `config` describes, as `kube::Client::try_from` builds it but
/// without retries (`config.default_retry` is not read) and with a bounded pool of idle
/// connections.
///
/// # Errors
/// As `kube::Client::try_from`: the TLS settings or the credentials cannot be used.
pub fn kube_client(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() {
        // kube's own builder knows the proxies this build supports (or says it does not);
        // told not to retry, it adds no retry layer either.
        config.default_retry = false;
        return kube::Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut connector =
        hyper_timeout::TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let pool = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .pool_max_idle_per_host(IDLE_CONNECTIONS)
        .pool_idle_timeout(IDLE_TIMEOUT)
        // With a timer, connections idle past the timeout are closed in the background;
        // without one, only when the pool is next asked.
        .pool_timer(TokioTimer::new())
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pool);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// A client of the cluster the environment names, as `kube::Client::try_default`: the
/// kubeconfig (`KUBECONFIG`, `~/.kube/config`), else the in-cluster service account.
///
/// # Errors
/// No configuration can be inferred, or [`kube_client`] fails with it.
pub async fn default_kube_client() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    kube_client(config)
}

#[cfg(test)]
mod tests {
    use futures::{StreamExt, TryStreamExt, future::join_all};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kapsel_apiserver::{ApiServer, Config};
    use kube::Api;
    use kube::api::WatchParams;

    use super::*;

    /// Open TCP connections from this process's network namespace to `port` on
    /// 127.0.0.1: the client's ends (the server's ends have `port` as their local port).
    fn connections_to(port: u16) -> usize {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let remote = format!("0100007F:{port:04X}");
        table
            .lines()
            .skip(1)
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // State 01: ESTABLISHED.
                fields.get(2) == Some(&remote.as_str()) && fields.get(3) == Some(&"01")
            })
            .count()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_connections_beyond_the_bound_are_closed_after_a_burst() {
        let server = ApiServer::start(Config::default()).await.unwrap();
        let config = kube::Config::new(server.url().parse().unwrap());
        let port = config.cluster_url.port_u16().unwrap();
        let client = kube_client(config).unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");

        // Watches that end after a second each: every one holds a connection meanwhile.
        // Half again the bound: enough to go past it, and two sockets each (this process
        // is also the server) stay far below a default limit of 1,024 open files.
        let burst = IDLE_CONNECTIONS * 3 / 2;
        let watches = (0..burst).map(|_| {
            let api = api.clone();
            async move {
                let events = api.watch(&WatchParams::default().timeout(1), "0").await?;
                events.boxed().try_collect::<Vec<_>>().await
            }
        });
        // Sampled until the last watch has ended, however slowly they start.
        let watches = join_all(watches);
        tokio::pin!(watches);
        let mut peak = 0;
        let ended = loop {
            peak = peak.max(connections_to(port));
            tokio::select! {
                ended = &mut watches => break ended,
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        };
        assert!(ended.iter().all(Result::is_ok), "{ended:?}");
        assert!(peak > IDLE_CONNECTIONS, "the burst used {peak} connections");

        // The idle ones beyond the bound close as they come back (hyper's default keeps
        // them all for 90 s).
        let mut open = connections_to(port);
        for _ in 0..400 {
            if open <= IDLE_CONNECTIONS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            open = connections_to(port);
        }
        assert!(open <= IDLE_CONNECTIONS, "{open} connections stay open");
    }
}
