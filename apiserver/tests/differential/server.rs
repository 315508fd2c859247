//! One server under comparison, reached through kube-rs's client from a kubeconfig: raw
//! requests (status, content type and body as sent) and watch streams read event by event.

use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::Value;
use std::time::Duration;

/// How long a watch waits for the events a check expects before it records what came.
const WATCH_WAIT: Duration = Duration::from_secs(5);

/// A server: the real kube-apiserver or the dev cluster.
#[derive(Clone)]
pub(crate) struct Server {
    client: kube::Client,
}

/// An answer as the server sent it.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    /// The body parsed as JSON, or as a string when it is not JSON.
    pub(crate) body: Value,
}

/// A request: method, path with its query, content type and body, and extra headers.
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) content_type: Option<&'a str>,
    pub(crate) accept: Option<&'a str>,
    pub(crate) body: Option<Vec<u8>>,
}

impl Server {
    pub(crate) async fn from_kubeconfig(yaml: &str) -> Server {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).expect("a kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a client configuration from the kubeconfig");
        let client = kube::Client::try_from(config).expect("a client");
        Server { client }
    }

    async fn response(&self, request: &Request<'_>) -> http::Response<Body> {
        let mut builder = http::Request::builder()
            .method(request.method)
            .uri(request.path);
        if let Some(content_type) = request.content_type {
            builder = builder.header(http::header::CONTENT_TYPE, content_type);
        }
        if let Some(accept) = request.accept {
            builder = builder.header(http::header::ACCEPT, accept);
        }
        let body = request.body.clone().map_or_else(Body::empty, Body::from);
        let request = builder.body(body).expect("a request");
        self.client.send(request).await.expect("an answer")
    }

    /// Sends one request and reads its whole answer.
    pub(crate) async fn send(&self, request: &Request<'_>) -> Reply {
        let response = self.response(request).await;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = response
            .into_body()
            .collect_bytes()
            .await
            .expect("the body");
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply {
            status,
            content_type,
            body,
        }
    }

    /// Opens a watch and reads `count` events, or what came within [`WATCH_WAIT`] (or
    /// until the server ends the stream). A refused watch is one event: its status and
    /// body.
    pub(crate) async fn watch(&self, path: &str, count: usize) -> Vec<Value> {
        let request = Request {
            method: "GET",
            path,
            content_type: None,
            accept: None,
            body: None,
        };
        let response = self.response(&request).await;
        let status = response.status().as_u16();
        if status != 200 {
            let bytes = response.into_body().collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return vec![serde_json::json!({"refused": status, "body": body})];
        }
        let mut body = response.into_body();
        let mut events = Vec::new();
        let mut pending = Vec::<u8>::new();
        let deadline = tokio::time::Instant::now() + WATCH_WAIT;
        while events.len() < count {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(Some(Err(e))) => panic!("the watch stream broke: {e}"),
                Ok(None) | Err(_) => break,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                    events.push(event);
                }
            }
        }
        events
    }
}
