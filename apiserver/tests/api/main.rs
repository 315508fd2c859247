//! Tests of the embedded API server over HTTP, with kube-rs and with raw requests.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test by panicking"
)]

mod aggregated_discovery;
mod apply;
mod bodies;
mod certificates;
mod cluster_objects;
mod component_status;
mod counting;
mod crud;
mod discovery;
mod faults;
mod field_validation;
mod kubelet;
mod lifecycle;
mod other_project;
mod patching;
mod persistence;
mod rbac;
mod robustness;
mod selection;
mod sharding;
mod token_review;
mod watching;
mod webhooks;

use kapsel_apiserver::{ApiServer, Config};
use kube::Client;
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server on a free port plus a kube-rs client for it.
pub(crate) async fn start() -> (ApiServer, Client) {
    start_with(Config::default().bookmark_interval(Duration::from_millis(200))).await
}

pub(crate) async fn start_with(config: Config) -> (ApiServer, Client) {
    let server = ApiServer::start(config).await.unwrap();
    let client = client_for(&server).await;
    (server, client)
}

/// A kube-rs client configured from the server's own kubeconfig.
pub(crate) async fn client_for(server: &ApiServer) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A raw HTTP/1.1 response.
#[derive(Debug)]
pub(crate) struct Raw {
    pub(crate) code: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Raw {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The lines of a watch stream, parsed.
    pub(crate) fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Sends one request on a fresh connection and reads the whole response (de-chunked).
pub(crate) async fn raw(
    server: &ApiServer,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Raw {
    raw_with(server, method, path, content_type, &[], body).await
}

/// [`raw`] with extra request headers.
pub(crate) async fn raw_with(
    server: &ApiServer,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Raw {
    raw_at(server.addr(), method, path, content_type, headers, body).await
}

/// [`raw_with`] to a server at any address (one in another process).
pub(crate) async fn raw_at(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Raw {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        req.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("response in time")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let code = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Raw {
        code,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n..];
        s = s.strip_prefix("\r\n").unwrap_or(s);
    }
    out
}

pub(crate) async fn post(server: &ApiServer, path: &str, body: Value) -> Raw {
    raw(
        server,
        "POST",
        path,
        Some("application/json"),
        body.to_string().as_bytes(),
    )
    .await
}

pub(crate) async fn get(server: &ApiServer, path: &str) -> Raw {
    raw(server, "GET", path, None, b"").await
}

/// The kopfexamples CRD (a copy of the shared reference file).
pub(crate) fn kopf_crd() -> Value {
    let text = include_str!("data/kopfexamples-crd.yaml");
    serde_yaml::from_str(text).unwrap()
}

/// Creates the kopfexamples CRD ([`kopf_crd`]); it must be accepted.
pub(crate) async fn create_kopf_crd(server: &ApiServer) {
    let r = post(
        server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        kopf_crd(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
}

/// Asserts a Status error with this code and reason.
/// The Status of an API error; panics on any other error.
pub(crate) fn api_status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(status) => *status,
        other => panic!("not an API error: {other:?}"),
    }
}

pub(crate) fn assert_status(r: &Raw, code: u16, reason: &str) {
    assert_eq!(r.code, code, "{}", r.body);
    let v = r.json();
    assert_eq!(v["kind"], "Status", "{}", r.body);
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["status"], "Failure");
    assert_eq!(v["reason"], reason, "{}", r.body);
    assert_eq!(v["code"], code);
    assert!(
        r.header("content-type")
            .unwrap_or("")
            .starts_with("application/json")
    );
}
