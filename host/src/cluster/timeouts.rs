//! The time limits of the operator's requests, Kopf's `networking` and `watching`
//! timeouts (KOPF.md §6.2, §13), as a layer over the operator's client, whoever built it
//! (the environment's, the application's, the vault's). Each request reads the settings
//! as they are when it starts, as Kopf does: a startup handler's change applies to the
//! requests after it.
//!
//! - A request other than a watch: its answer must start within `networking.connect_timeout`
//!   and be read whole within `networking.request_timeout`; else it fails as timed out
//!   (a failure `requests::retried` retries).
//! - A watch: its answer must start within `watching.connect_timeout` (else
//!   `networking.connect_timeout`, else `networking.request_timeout`), else it fails; then
//!   it ends, as if the server had ended it, once it has lasted `watching.client_timeout`
//!   or has been silent (bookmarks included) for `watching.inactivity_timeout` — the
//!   watcher then watches again from where it was.
//!
//! Kopf's `connect_timeout` bounds the connection only (aiohttp's `sock_connect`); a
//! client handed over whole shows no connection to time, so here it bounds the wait for
//! the answer to start, the connection included.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame};
use kube::client::Body;
use tokio::time::{Sleep, sleep};
use tower::BoxError;

use crate::settings::{Settings, SharedSettings, seconds};

/// The client `client`, its requests bounded in time as `settings` say at each request.
pub(crate) fn bounded(client: kube::Client, settings: SharedSettings) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let limits = settings.read(|settings| Limits::of(&request, settings));
        limits.send(client, request)
    });
    kube::Client::new(service, namespace)
}

/// A request that took longer than a setting allows.
#[derive(Debug, thiserror::Error)]
#[error("the request took longer than {} s ({setting})", limit.as_secs_f64())]
pub(crate) struct TimedOut {
    setting: &'static str,
    limit: Duration,
}

/// The limits of one request.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Limits {
    /// Until its answer starts (the headers), with the setting that says so.
    start: Option<(Duration, &'static str)>,
    /// From its start to its answer's end.
    total: Option<(Duration, &'static str)>,
    /// Between two pieces of the answer.
    silence: Option<Duration>,
    /// A watch ends quietly at its limits (the watcher goes on from where it was); any
    /// other request fails.
    watch: bool,
}

impl Limits {
    fn of(request: &Request<Body>, settings: &Settings) -> Limits {
        let networking = &settings.networking;
        let limit = |value: Option<f64>, setting| value.map(|v| (seconds(v), setting));
        let request_timeout = limit(networking.request_timeout, "networking.request_timeout");
        let connect_timeout = limit(networking.connect_timeout, "networking.connect_timeout");
        if is_watch(request) {
            let watching = &settings.watching;
            Limits {
                start: limit(watching.connect_timeout, "watching.connect_timeout")
                    .or(connect_timeout)
                    .or(request_timeout),
                total: limit(watching.client_timeout, "watching.client_timeout"),
                silence: Some(seconds(watching.inactivity_timeout)),
                watch: true,
            }
        } else {
            let start = match (connect_timeout, request_timeout) {
                (Some(connect), Some(total)) => {
                    Some(if connect.0 <= total.0 { connect } else { total })
                }
                (connect, total) => connect.or(total),
            };
            Limits {
                start,
                total: request_timeout,
                silence: None,
                watch: false,
            }
        }
    }

    /// Sends `request` with `client`, within these limits.
    async fn send(
        self,
        client: kube::Client,
        request: Request<Body>,
    ) -> Result<Response<Bounded>, BoxError> {
        let started = tokio::time::Instant::now();
        let sent = client.send(request);
        let response = match self.start {
            Some((limit, setting)) => tokio::time::timeout(limit, sent)
                .await
                .map_err(|_| TimedOut { setting, limit })??,
            None => sent.await?,
        };
        let deadline = self.total.map(|(limit, setting)| {
            (
                Box::pin(tokio::time::sleep_until(started + limit)),
                limit,
                setting,
            )
        });
        Ok(response.map(|inner| Bounded {
            inner,
            deadline,
            silence: self.silence.map(|limit| (limit, Box::pin(sleep(limit)))),
            watch: self.watch,
        }))
    }
}

/// Whether a request is a watch (`?watch=true`, as kube sends it, or `watch=1`).
fn is_watch(request: &Request<Body>) -> bool {
    request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

/// An answer's body, bounded in time.
struct Bounded {
    inner: Body,
    deadline: Option<(Pin<Box<Sleep>>, Duration, &'static str)>,
    /// The longest silence, and the timer of the current one.
    silence: Option<(Duration, Pin<Box<Sleep>>)>,
    watch: bool,
}

impl HttpBody for Bounded {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some((limit, timer)) = &mut this.silence {
                    timer.as_mut().reset(tokio::time::Instant::now() + *limit);
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if let Some((timer, limit, setting)) = &mut this.deadline
            && timer.as_mut().poll(cx).is_ready()
        {
            if this.watch {
                tracing::debug!("A watch request lasted its {setting}; watching again.");
                return Poll::Ready(None);
            }
            let error = TimedOut {
                setting,
                limit: *limit,
            };
            return Poll::Ready(Some(Err(error.into())));
        }
        if let Some((limit, timer)) = &mut this.silence
            && timer.as_mut().poll(cx).is_ready()
        {
            tracing::debug!(
                "A watch stream was silent for {} s (watching.inactivity_timeout); watching again.",
                limit.as_secs_f64()
            );
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str) -> Request<Body> {
        Request::get(uri).body(Body::from(Vec::new())).unwrap()
    }

    #[test]
    fn watches_and_other_requests_have_their_own_limits() {
        let mut settings = Settings::default();
        let other = Limits::of(&request("/api/v1/pods?limit=500"), &settings);
        let five_minutes = Some((Duration::from_secs(300), "networking.request_timeout"));
        assert_eq!(
            (other.start, other.total, other.watch),
            (five_minutes, five_minutes, false)
        );
        let watch = Limits::of(
            &request("/api/v1/pods?watch=true&timeoutSeconds=65"),
            &settings,
        );
        assert_eq!(watch.start, five_minutes, "Kopf's fallback");
        assert_eq!((watch.total, watch.watch), (None, true));
        assert_eq!(watch.silence, Some(Duration::from_secs(70)));

        settings.set("networking.connect_timeout", "7").unwrap();
        settings.set("networking.request_timeout", "null").unwrap();
        let other = Limits::of(&request("/api/v1/pods"), &settings);
        let seven = Some((Duration::from_secs(7), "networking.connect_timeout"));
        assert_eq!((other.start, other.total), (seven, None));
        assert_eq!(
            Limits::of(&request("/api/v1/pods?watch=1"), &settings).start,
            seven
        );
        settings.set("watching.connect_timeout", "3").unwrap();
        settings.set("watching.client_timeout", "30").unwrap();
        let watch = Limits::of(&request("/api/v1/pods?watch=true"), &settings);
        assert_eq!(
            (watch.start, watch.total),
            (
                Some((Duration::from_secs(3), "watching.connect_timeout")),
                Some((Duration::from_secs(30), "watching.client_timeout"))
            )
        );
    }
}
