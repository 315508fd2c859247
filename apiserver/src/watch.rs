//! WATCH: newline-delimited JSON events, replayed from the history and then live, with
//! bookmarks, timeouts, selectors and 410 Gone.

use crate::objects::{Presented, Scope};
use crate::selectors::Selectors;
use crate::state::Shared;
use crate::status::{ApiError, json_body};
use crate::store::{Event, EventType};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// What a watch request asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchParams {
    pub(crate) selectors: Selectors,
    pub(crate) resource_version: Option<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) bookmarks: bool,
    pub(crate) send_initial_events: Option<bool>,
    pub(crate) rv_match: Option<String>,
    /// Send each object as a one-row Table (`kubectl get -w`).
    pub(crate) table: Option<crate::table::Columns>,
    /// Send only metadata (`PartialObjectMetadata`).
    pub(crate) meta_only: bool,
}

/// An event's line with its object as this watcher wants it: the object, its metadata or
/// a one-row Table.
fn event_line(scope: &Scope, p: &WatchParams, ty: &str, obj: &Value) -> Bytes {
    match &p.table {
        Some(cols) => {
            let rv = crate::store::meta_str(obj, "resourceVersion");
            let table = cols.table(
                scope,
                std::slice::from_ref(obj),
                json!({"resourceVersion": rv}),
            );
            line(ty, &table)
        }
        None if p.meta_only => line(ty, &crate::table::partial(obj)),
        None => line(ty, &Presented::new(&scope.rt, obj)),
    }
}

fn line(ty: &str, object: &impl serde::Serialize) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a, T> {
        #[serde(rename = "type")]
        ty: &'a str,
        object: &'a T,
    }
    let mut b = json_body(&Line { ty, object });
    b.push(b'\n');
    Bytes::from(b)
}

fn bookmark(scope: &Scope, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": scope.rt.kind, "apiVersion": scope.rt.api_version(), "metadata": meta}),
    )
}

/// What one watcher sees of an event: kube turns a change that moves an object into or out
/// of the watcher's selection into ADDED or DELETED.
fn translate(scope: &Scope, p: &WatchParams, ev: &Event) -> Option<Bytes> {
    let sel = &p.selectors;
    if ev.res != scope.res() {
        return None;
    }
    if let Some(ns) = &scope.ns
        && crate::store::meta_str(&ev.object, "namespace") != ns
    {
        return None;
    }
    let now = sel.matches(&ev.object);
    let ty = match ev.ty {
        EventType::Modified => {
            let before = ev.old.as_ref().filter(|o| sel.matches(o));
            match (before, now) {
                (Some(_), true) => "MODIFIED",
                (None, true) => "ADDED",
                (Some(old), false) => {
                    // kube's cacher: the object as the watcher last saw it (it matched
                    // then), at the change's resourceVersion.
                    let mut left = Value::clone(old);
                    crate::meta::meta_mut(&mut left)
                        .insert("resourceVersion".into(), json!(ev.rv.to_string()));
                    return Some(event_line(scope, p, "DELETED", &left));
                }
                (None, false) => return None,
            }
        }
        other if now => other.as_str(),
        _ => return None,
    };
    Some(event_line(scope, p, ty, &ev.object))
}

/// Starts a watch: validates, snapshots under the lock, and streams from a task.
pub(crate) fn start(
    shared: &Arc<Shared>,
    scope: Scope,
    p: WatchParams,
) -> Result<Response, ApiError> {
    if p.send_initial_events.is_some() && p.rv_match.as_deref() != Some("NotOlderThan") {
        return Err(ApiError::invalid_options(
            "ListOptions",
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if p.send_initial_events == Some(true) && !p.bookmarks {
        return Err(ApiError::invalid_options(
            "ListOptions",
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is only supported with resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
        ));
    }
    let rv = p.resource_version.as_deref().filter(|r| !r.is_empty());
    let from = match rv {
        None | Some("0") => None,
        Some(r) => Some(r.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {r:?}: must be a non-negative integer"
            ))
        })?),
    };
    let initial_events = p.send_initial_events.unwrap_or(from.is_none());
    let mut first: Vec<Bytes> = Vec::new();
    let start_rv;
    let rx: broadcast::Receiver<Arc<Event>>;
    {
        let store = shared.lock();
        start_rv = store.rv();
        if initial_events {
            for (_, o) in store.list(&scope.res(), scope.ns.as_deref()) {
                if p.selectors.matches(o) {
                    first.push(event_line(&scope, &p, "ADDED", o));
                }
            }
            if p.send_initial_events == Some(true) {
                first.push(bookmark(&scope, start_rv, true));
            }
            rx = store.subscribe();
        } else if let Some(from) = from {
            match store.watch_from(from) {
                Ok((replay, r)) => {
                    first.extend(replay.iter().filter_map(|e| translate(&scope, &p, e)));
                    rx = r;
                }
                Err(oldest) => {
                    let err =
                        ApiError::gone(format!("too old resource version: {from} ({oldest})"));
                    let body = line("ERROR", &err.to_status());
                    return Ok(stream_response(futures::stream::iter([
                        Ok::<_, Infallible>(body),
                    ])));
                }
            }
        } else {
            rx = store.subscribe();
        }
    }
    let (tx, out) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let closer = shared.closer.subscribe();
    let interval = shared.bookmark_interval;
    tokio::spawn(pump(Pump {
        scope,
        params: p,
        first,
        last_rv: start_rv,
        events: rx,
        out: tx,
        closer,
        interval,
    }));
    Ok(stream_response(
        tokio_stream::wrappers::ReceiverStream::new(out),
    ))
}

fn stream_response<S>(s: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    let mut resp = Response::new(Body::from_stream(s));
    crate::status::set_json(&mut resp);
    resp
}

/// One watch's whole state, for its task.
struct Pump {
    scope: Scope,
    params: WatchParams,
    /// What the client gets first (the initial listing, or the history since its version).
    first: Vec<Bytes>,
    /// The last resourceVersion sent (bookmarks carry it).
    last_rv: u64,
    /// The store's events.
    events: broadcast::Receiver<Arc<Event>>,
    /// The response body's lines.
    out: mpsc::Sender<Result<Bytes, Infallible>>,
    /// Bumped to close every watch (fault injection, shutdown).
    closer: tokio::sync::watch::Receiver<u64>,
    /// How often a bookmark goes out, when asked for.
    interval: Duration,
}

/// The watcher's task: feeds the client until timeout, a dropped connection, a fault or
/// shutdown, or until it falls too far behind.
async fn pump(pump: Pump) {
    let Pump {
        scope,
        params: p,
        first,
        mut last_rv,
        events: mut rx,
        out: tx,
        mut closer,
        interval,
    } = pump;
    for b in first {
        if tx.send(Ok(b)).await.is_err() {
            return;
        }
    }
    // An absurd timeout (beyond the clock's range) means none.
    let deadline = p
        .timeout
        .and_then(|t| tokio::time::Instant::now().checked_add(t));
    let timeout = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let period = interval.max(Duration::from_millis(10));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    last_rv = ev.rv;
                    if let Some(b) = translate(&scope, &p, &ev)
                        && tx.send(Ok(b)).await.is_err()
                    {
                        return;
                    }
                }
                // Lagged: too slow to keep up; closed: the server is going away.
                Err(_) => return,
            },
            _ = ticks.tick(), if p.bookmarks => {
                if tx.send(Ok(bookmark(&scope, last_rv, false))).await.is_err() {
                    return;
                }
            }
            _ = &mut timeout => return,
            _ = closer.changed() => return,
            _ = tx.closed() => return,
        }
    }
}
