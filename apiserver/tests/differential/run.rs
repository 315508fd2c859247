//! One check's run on one server: the requests it sends, each recorded with its answer
//! (normalised) as a step of the transcript that is compared with the other server's.

use crate::normalise::normalise;
use crate::server::{Reply, Request, Server};
use serde_json::{Value, json};

/// The content types of the four kinds of patch.
pub(crate) const MERGE: &str = "application/merge-patch+json";
pub(crate) const JSON_PATCH: &str = "application/json-patch+json";
pub(crate) const STRATEGIC: &str = "application/strategic-merge-patch+json";
pub(crate) const APPLY: &str = "application/apply-patch+yaml";

/// A check's requests to one server, and what it recorded of them.
pub(crate) struct Run {
    server: Server,
    /// The check's own namespace (made before it runs), the same name on both servers.
    pub(crate) ns: String,
    /// This run's token, for cluster-scoped names (a CRD's group, a namespace).
    pub(crate) token: String,
    steps: Vec<Value>,
}

impl Run {
    pub(crate) fn new(server: Server, ns: String, token: String) -> Run {
        Run {
            server,
            ns,
            token,
            steps: Vec::new(),
        }
    }

    pub(crate) fn into_steps(self) -> Vec<Value> {
        self.steps
    }

    /// The path of the ConfigMaps of the check's namespace (and `/name` when given).
    pub(crate) fn configmaps(&self, name: &str) -> String {
        let base = format!("/api/v1/namespaces/{}/configmaps", self.ns);
        if name.is_empty() {
            base
        } else {
            format!("{base}/{name}")
        }
    }

    /// Sends a request and records it as `step`; answers the body as sent (not
    /// normalised, so that a check can use its resourceVersion).
    pub(crate) async fn call(&mut self, step: &str, request: &Request<'_>) -> Value {
        let reply = self.server.send(request).await;
        let mut body = reply.body.clone();
        normalise(&mut body);
        self.steps.push(json!({
            "step": step,
            "status": reply.status,
            "contentType": reply.content_type,
            "body": body,
        }));
        reply.body
    }

    /// Sends a request without recording it (the setup of what a check compares).
    pub(crate) async fn quietly(&self, request: &Request<'_>) -> Reply {
        self.server.send(request).await
    }

    pub(crate) async fn get(&mut self, step: &str, path: &str) -> Value {
        self.call(step, &request("GET", path, None, None)).await
    }

    /// A GET with an Accept header (a Table, aggregated discovery).
    pub(crate) async fn get_as(&mut self, step: &str, path: &str, accept: &str) -> Value {
        let mut get = request("GET", path, None, None);
        get.accept = Some(accept);
        self.call(step, &get).await
    }

    pub(crate) async fn post(&mut self, step: &str, path: &str, body: &Value) -> Value {
        self.call(
            step,
            &request("POST", path, Some("application/json"), Some(body)),
        )
        .await
    }

    pub(crate) async fn put(&mut self, step: &str, path: &str, body: &Value) -> Value {
        self.call(
            step,
            &request("PUT", path, Some("application/json"), Some(body)),
        )
        .await
    }

    pub(crate) async fn patch(
        &mut self,
        step: &str,
        path: &str,
        kind: &str,
        body: &Value,
    ) -> Value {
        self.call(step, &request("PATCH", path, Some(kind), Some(body)))
            .await
    }

    pub(crate) async fn delete(
        &mut self,
        step: &str,
        path: &str,
        options: Option<&Value>,
    ) -> Value {
        let content_type = options.map(|_| "application/json");
        self.call(step, &request("DELETE", path, content_type, options))
            .await
    }

    /// Sends raw bytes (a body that is not JSON, say).
    pub(crate) async fn send_bytes(
        &mut self,
        step: &str,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> Value {
        let mut raw = request(method, path, Some(content_type), None);
        raw.body = Some(body.to_vec());
        self.call(step, &raw).await
    }

    /// Opens a watch, reads `count` events (see [`Server::watch`]) and records them.
    pub(crate) async fn watch(&mut self, step: &str, path: &str, count: usize) -> Vec<Value> {
        let events = self.server.watch(path, count).await;
        let mut recorded = Value::Array(events.clone());
        normalise(&mut recorded);
        self.steps.push(json!({"step": step, "events": recorded}));
        events
    }

    /// Records a fact the check derived from answers (a resourceVersion changed, say).
    pub(crate) fn note(&mut self, step: &str, fact: Value) {
        self.steps.push(json!({"step": step, "fact": fact}));
    }
}

/// A request with a JSON body.
pub(crate) fn request<'a>(
    method: &'a str,
    path: &'a str,
    content_type: Option<&'a str>,
    body: Option<&Value>,
) -> Request<'a> {
    Request {
        method,
        path,
        content_type,
        accept: None,
        body: body.map(|b| b.to_string().into_bytes()),
    }
}

/// The resourceVersion of an object as answered.
pub(crate) fn rv(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
