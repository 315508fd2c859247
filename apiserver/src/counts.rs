//! Request counts by client, verb, resource and status code: what
//! [`ApiServer::request_counts`](crate::ApiServer::request_counts) answers and `GET /metrics`
//! serves, as kube-apiserver's `apiserver_request_total` in Prometheus text (with a `client`
//! label more: the user agent's product, as for field managers), so that a benchmark or a
//! test can tell how many requests of which kind an operator made.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

/// What a request was, as counted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct RequestKind {
    /// The user agent up to its first `/` (`kubectl`, `kopf`, `kube-rs`...), as kube names
    /// field managers; at most 64 characters.
    pub client: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`;
    /// for paths that are no resource (discovery, OpenAPI, health), the HTTP method in
    /// lower case.
    pub verb: String,
    /// The API group ("" for core and for paths that are no resource).
    pub group: String,
    /// The resource's plural ("" for paths that are no resource).
    pub resource: String,
    /// The subresource (`status`, `scale`...), or "".
    pub subresource: String,
    /// The response's HTTP status code (a watch counts when its stream starts).
    pub code: u16,
}

/// One line of the counts: a kind of request and how many were answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestCount {
    /// What the requests were.
    pub kind: RequestKind,
    /// How many since the server started.
    pub count: u64,
}

/// The counts of one server.
#[derive(Debug, Default)]
pub(crate) struct RequestCounts(Mutex<HashMap<RequestKind, u64>>);

impl RequestCounts {
    /// Counts one answered request.
    pub(crate) fn record(&self, kind: RequestKind) {
        // One insert cannot leave the map inconsistent: recover from poisoning.
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(kind)
            .or_default() += 1;
    }

    /// Every count, sorted by kind.
    pub(crate) fn snapshot(&self) -> Vec<RequestCount> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut counts: Vec<RequestCount> = map
            .iter()
            .map(|(kind, count)| RequestCount {
                kind: kind.clone(),
                count: *count,
            })
            .collect();
        counts.sort_by(|a, b| a.kind.cmp(&b.kind));
        counts
    }

    /// The counts as Prometheus text (`apiserver_request_total`).
    pub(crate) fn prometheus(&self) -> String {
        let mut text = String::from(
            "# HELP apiserver_request_total Requests answered, by client (user agent product), \
             verb, group, resource, subresource and HTTP status code.\n\
             # TYPE apiserver_request_total counter\n",
        );
        for RequestCount { kind, count } in self.snapshot() {
            let _ = writeln!(
                text,
                "apiserver_request_total{{client=\"{}\",verb=\"{}\",group=\"{}\",resource=\"{}\",\
                 subresource=\"{}\",code=\"{}\"}} {count}",
                escape(&kind.client),
                escape(&kind.verb),
                escape(&kind.group),
                escape(&kind.resource),
                escape(&kind.subresource),
                kind.code,
            );
        }
        text
    }
}

/// The client label of a user agent: its product (up to the first `/`), at most 64
/// characters.
pub(crate) fn client_of(user_agent: &str) -> String {
    let product = user_agent.split('/').next().unwrap_or("").trim();
    product.chars().take(64).collect()
}

/// A label value in Prometheus text: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(client: &str, verb: &str, resource: &str, code: u16) -> RequestKind {
        RequestKind {
            client: client.into(),
            verb: verb.into(),
            group: "kopf.dev".into(),
            resource: resource.into(),
            subresource: String::new(),
            code,
        }
    }

    #[test]
    fn counts_each_kind_and_renders_prometheus_text() {
        let counts = RequestCounts::default();
        counts.record(kind("kopf", "patch", "kopfexamples", 200));
        counts.record(kind("kopf", "patch", "kopfexamples", 200));
        counts.record(kind("kube-rs", "list", "kopfexamples", 200));
        let snapshot = counts.snapshot();
        assert_eq!(snapshot.len(), 2);
        assert_eq!(snapshot[0].count, 2);
        assert_eq!(
            counts.prometheus().lines().nth(2),
            Some(
                "apiserver_request_total{client=\"kopf\",verb=\"patch\",group=\"kopf.dev\",\
                 resource=\"kopfexamples\",subresource=\"\",code=\"200\"} 2"
            )
        );
    }

    #[test]
    fn the_client_is_the_user_agents_product() {
        assert_eq!(client_of("kopf/1.45.0"), "kopf");
        assert_eq!(client_of("kubectl/v1.33.0 (linux/amd64)"), "kubectl");
        assert_eq!(client_of(""), "");
        assert_eq!(client_of(&"x".repeat(100)).len(), 64);
        assert_eq!(escape("a\"b\\"), "a\\\"b\\\\");
    }
}
