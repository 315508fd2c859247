//! The operator's HTTP endpoints: liveness (Kopf's `--liveness`, KOPF.md §9) with the probe
//! handlers' results, and `/metrics` (Prometheus text format).
//!
//! Nothing is served unless asked for. The metrics are served beside the liveness
//! endpoint (at `/metrics` on the same address), or on their own URL.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::activities::{self, Finished};
use crate::metrics::{self, Metrics};
use crate::runtime::{HandlerKind, ServedGuests, Slots};

/// How long probe results are reused (Kopf's hard-coded 10 s): a burst of requests
/// costs one round of probe calls.
const PROBE_CACHE_AGE: Duration = Duration::from_secs(10);

/// The longest one liveness request waits for the probes, retries included. Kopf retries
/// a failing probe inside the request for as long as its errors mode says (a request can
/// hang forever); here a retry that would end past this budget fails the request instead.
const PROBE_BUDGET: Duration = Duration::from_secs(10);

/// Where metrics are served beside the liveness endpoint, or when their URL has no path.
const METRICS_PATH: &str = "/metrics";

/// The key of the liveness answer that lists the guest files whose new version a reload
/// refused (file → why), while the versions before them keep serving. Not a valid Rust
/// function name, so no handler id the SDK derives can clash with it.
const REFUSED_GUESTS: &str = "refused-guests";

/// An `http://host:port/path` URL to serve on. As in Kopf, only `http` is accepted, the
/// host defaults to `localhost` and the port to 80.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    port: u16,
    path: String,
}

impl Endpoint {
    /// Parses a URL such as `http://0.0.0.0:8080/healthz` or `http://:8080/healthz`.
    ///
    /// # Errors
    /// Why the URL cannot be served.
    pub fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        let error = |problem: String| EndpointError {
            url: url.to_owned(),
            problem,
        };
        let rest = url
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
            .map(|_| &url[7..])
            .ok_or_else(|| error("only http:// URLs can be served".to_owned()))?;
        if rest.contains(['?', '#', '@']) {
            return Err(error(
                "a query, fragment or user cannot be served".to_owned(),
            ));
        }
        let (authority, path) = rest
            .find('/')
            .map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
        let (host, port) = match authority.rsplit_once(':') {
            // `[::1]` alone: the colon is inside the brackets.
            Some((host, port)) if !port.contains(']') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| error(format!("bad port {port:?}")))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        // The router reads these as parameters and wildcards.
        if path.contains(['{', '}', '*', ':']) {
            return Err(error("the path cannot contain {, }, * or :".to_owned()));
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Ok(Endpoint {
            host: if host.is_empty() { "localhost" } else { host }.to_owned(),
            port,
            path: path.to_owned(),
        })
    }

    fn address(&self) -> (String, u16) {
        (self.host.clone(), self.port)
    }
}

/// Why a URL cannot be served as an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url}: {problem}")]
pub struct EndpointError {
    url: String,
    problem: String,
}

/// What to serve: the liveness endpoint and/or the metrics on their own URL.
#[derive(Debug, Clone, Default)]
pub(crate) struct Endpoints {
    pub(crate) liveness: Option<String>,
    pub(crate) metrics: Option<String>,
}

/// Why the endpoints could not be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("bad endpoint URL {0}")]
    Url(EndpointError),
    #[error("cannot listen on {host}:{port}")]
    Bind {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("the liveness and metrics endpoints are the same URL path: {0}")]
    SamePath(String),
}

/// The running endpoints; dropping this stops them.
#[derive(Debug)]
pub(crate) struct Served {
    _stop: DropGuard,
}

/// Starts serving `endpoints`; nothing when none is given.
///
/// # Errors
/// A URL that cannot be served, or an address that cannot be bound.
pub(crate) async fn serve(
    endpoints: &Endpoints,
    guests: &ServedGuests,
    activities: &activities::Context,
    metrics: &Metrics,
) -> Result<Option<Served>, ServeError> {
    let parse = |url: &String| Endpoint::parse(url).map_err(ServeError::Url);
    let liveness = endpoints.liveness.as_ref().map(parse).transpose()?;
    let metrics_at = match endpoints.metrics.as_ref().map(parse).transpose()? {
        Some(mut endpoint) => {
            if endpoint.path == "/" {
                METRICS_PATH.clone_into(&mut endpoint.path);
            }
            Some(endpoint)
        }
        None => liveness.as_ref().map(|l| Endpoint {
            path: METRICS_PATH.to_owned(),
            ..l.clone()
        }),
    };
    if liveness.is_none() && metrics_at.is_none() {
        return Ok(None);
    }
    let state = Liveness::new(guests.clone(), activities.clone(), metrics.clone());
    let mut routers: BTreeMap<(String, u16), Router<Liveness>> = BTreeMap::new();
    if let Some(endpoint) = &liveness {
        let router = routers.entry(endpoint.address()).or_default();
        *router = std::mem::take(router).route(&endpoint.path, get(liveness_response));
    }
    if let Some(endpoint) = &metrics_at {
        if liveness.as_ref() == Some(endpoint) {
            // Only possible with `--liveness http://…/metrics` and no own metrics URL:
            // the liveness endpoint keeps its path.
            if endpoints.metrics.is_some() {
                return Err(ServeError::SamePath(endpoint.path.clone()));
            }
        } else {
            let router = routers.entry(endpoint.address()).or_default();
            *router = std::mem::take(router).route(&endpoint.path, get(metrics_response));
        }
    }
    let stop = CancellationToken::new();
    for ((host, port), router) in routers {
        let listener = tokio::net::TcpListener::bind((host.as_str(), port))
            .await
            .map_err(|source| ServeError::Bind {
                host: host.clone(),
                port,
                source,
            })?;
        let bound = listener
            .local_addr()
            .map_or_else(|_| format!("{host}:{port}"), |a| a.to_string());
        let paths: Vec<&str> = [&liveness, &metrics_at]
            .into_iter()
            .flatten()
            .filter(|e| e.host == host && e.port == port)
            .map(|e| e.path.as_str())
            .collect();
        tracing::info!("Serving {} on http://{bound}.", paths.join(" and "));
        let app = router.with_state(state.clone());
        let stopped = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::error!("The HTTP endpoint on {bound} failed: {error}");
            }
        });
    }
    Ok(Some(Served {
        _stop: stop.drop_guard(),
    }))
}

/// What liveness says about an operator: whether its loops run, its calls get slots, and
/// its probe handlers succeed. Served by the liveness endpoint; `kapsel test`'s `healthy`
/// asks it too.
#[derive(Clone)]
pub(crate) struct Liveness {
    probes: Arc<Probes>,
    metrics: Metrics,
    /// The guests' call slots, and how long handler calls may wait with no slot handed
    /// out before they count as starved.
    slots: Option<(Arc<Slots>, Duration)>,
}

impl Liveness {
    pub(crate) fn new(
        guests: ServedGuests,
        context: activities::Context,
        metrics: Metrics,
    ) -> Self {
        // One runtime serves every guest, before and after reloads: its slots are these.
        let slots = guests.guests().first().map(|guest| {
            let runtime = guest.runtime();
            (Arc::clone(runtime.slots()), runtime.limits().starved_after)
        });
        Liveness {
            probes: Arc::new(Probes::new(guests, context)),
            metrics,
            slots,
        }
    }

    /// The probes' results (cached for a while, as Kopf's); an error when one of the
    /// operator's loops died, handler calls are starved of slots, or a probe failed.
    /// Guest files whose new version a reload refused are listed under
    /// [`REFUSED_GUESTS`], without failing: the versions before them still serve.
    pub(crate) async fn check(&self) -> Result<Map<String, Value>, Unhealthy> {
        let dead = self.metrics.dead_loops();
        if !dead.is_empty() {
            return Err(Unhealthy::LoopsDied(dead));
        }
        if let Some((slots, after)) = &self.slots
            && let Some(starved) = slots.starved(*after)
        {
            return Err(Unhealthy::Starved(starved));
        }
        let mut results = self.probes.report().await?;
        let refused = self.probes.guests.refused();
        if !refused.is_empty() {
            let refused = refused
                .into_iter()
                .map(|(path, error)| (path.display().to_string(), Value::String(error)))
                .collect();
            results.insert(REFUSED_GUESTS.to_owned(), Value::Object(refused));
        }
        Ok(results)
    }
}

/// 200 with the probes' results as a JSON object; 500 when a probe fails or one of the
/// operator's loops died.
async fn liveness_response(State(health): State<Liveness>) -> Response {
    match health.check().await {
        Ok(results) => axum::Json(Value::Object(results)).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": error.to_string()})),
        )
            .into_response(),
    }
}

async fn metrics_response(State(health): State<Liveness>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        health.metrics.render(),
    )
        .into_response()
}

/// Why the operator is not alive: the liveness endpoint's `error`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unhealthy {
    /// The names of the operator's loops that died.
    #[error("operator loops died: {}", .0.join(", "))]
    LoopsDied(Vec<String>),
    /// Handler calls wait for call slots that are not handed out (why, with figures).
    #[error("{0}")]
    Starved(String),
    /// The probes did not finish within their budget.
    #[error("the probes took longer than {0:?}")]
    ProbesTooSlow(Duration),
    /// Each failed probe, and how it failed.
    #[error("{}", .0.join("; "))]
    ProbesFailed(Vec<String>),
}

/// The probe handlers of every guest served, and their last results.
struct Probes {
    guests: ServedGuests,
    context: activities::Context,
    /// When the last successful round ended, and its results. Holding the lock through a
    /// round makes concurrent requests share it.
    cache: tokio::sync::Mutex<Option<(Instant, Map<String, Value>)>>,
}

impl Probes {
    fn new(guests: ServedGuests, context: activities::Context) -> Probes {
        Probes {
            guests,
            context,
            cache: tokio::sync::Mutex::default(),
        }
    }

    /// The probes' results, fresh or at most [`PROBE_CACHE_AGE`] old.
    ///
    /// # Errors
    /// What failed, when a probe failed for good (failures are not cached).
    async fn report(&self) -> Result<Map<String, Value>, Unhealthy> {
        let mut cache = self.cache.lock().await;
        if let Some((at, results)) = cache.as_ref()
            && at.elapsed() < PROBE_CACHE_AGE
        {
            return Ok(results.clone());
        }
        // The guests of now: a reload may have changed them since the last round.
        let probes = activities::of_kind(&self.guests.guests(), HandlerKind::Probe);
        let round = activities::run_all(&probes, &self.context, Some(PROBE_BUDGET));
        // Each call is bounded by its deadline and retries by the budget; this bounds
        // the wait for a call permit too.
        let finished = tokio::time::timeout(PROBE_BUDGET + Duration::from_secs(1), round)
            .await
            .map_err(|_| Unhealthy::ProbesTooSlow(PROBE_BUDGET))?;
        let mut results = Map::new();
        let mut errors = Vec::new();
        for (probe, finished) in probes.iter().zip(finished) {
            match finished {
                Finished::Done(Some(value)) => {
                    results.insert(probe.key.clone(), value);
                }
                Finished::Done(None) => {}
                Finished::Failed(error) => errors.push(format!("probe '{}' {error}", probe.key)),
            }
        }
        if !errors.is_empty() {
            return Err(Unhealthy::ProbesFailed(errors));
        }
        *cache = Some((Instant::now(), results.clone()));
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(host: &str, port: u16, path: &str) -> Endpoint {
        Endpoint {
            host: host.into(),
            port,
            path: path.into(),
        }
    }

    #[test]
    fn endpoints_parse_like_kopf() {
        let parse = |url| Endpoint::parse(url);
        assert_eq!(
            parse("http://0.0.0.0:8080/healthz"),
            Ok(endpoint("0.0.0.0", 8080, "/healthz"))
        );
        assert_eq!(
            parse("http://:8080/healthz"),
            Ok(endpoint("localhost", 8080, "/healthz"))
        );
        assert_eq!(parse("HTTP://example"), Ok(endpoint("example", 80, "/")));
        assert_eq!(
            parse("http://[::1]:9090/m"),
            Ok(endpoint("::1", 9090, "/m"))
        );
        assert_eq!(parse("http://[::]/x/y"), Ok(endpoint("::", 80, "/x/y")));
        for bad in [
            "https://0.0.0.0:8080/healthz",
            "0.0.0.0:8080",
            "http://host:port/x",
            "http://host:99999/x",
            "http://host/x?y=1",
            "http://user@host/x",
            "http://host/{x}",
            "http://host/x/*rest",
            "http://host/:x",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
