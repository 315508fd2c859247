//! The HTTPS call of a webhook: one POST of a JSON body to `clientConfig.url`, trusting
//! `caBundle` (PEM), with the webhook's timeout; the answer's status and body.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer read from a webhook.
const MAX_ANSWER: u64 = 16 << 20;

/// POSTs `body` to the `https://` `url` and returns the answer's status code and body.
/// The server's certificate must be for `server_name` (a Service's DNS name when the URL
/// names one of its endpoints), else for the URL's host.
/// The error is the failure as the caller reports it (kube's "failed to call webhook").
pub(crate) async fn post(
    url: &str,
    server_name: Option<&str>,
    ca_bundle: Option<&[u8]>,
    body: &[u8],
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let (host, port, path) = split_url(url)?;
    let call = async {
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("Post {url:?}: dial tcp {host}:{port}: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(ca_bundle)?));
        let name = server_name.map_or_else(|| host.clone(), str::to_owned);
        let name = ServerName::try_from(name).map_err(|e| e.to_string())?;
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("Post {url:?}: tls: {e}"))?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-apiserver-admission\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let io = |e: std::io::Error| format!("Post {url:?}: {e}");
        tls.write_all(head.as_bytes()).await.map_err(io)?;
        tls.write_all(body).await.map_err(io)?;
        tls.flush().await.map_err(io)?;
        let mut answer = Vec::new();
        let read = (&mut tls).take(MAX_ANSWER).read_to_end(&mut answer).await;
        // A server that closes without TLS's close_notify still sent its whole answer.
        if let Err(e) = read
            && answer.is_empty()
        {
            return Err(io(e));
        }
        parse_answer(&answer).map_err(|e| format!("Post {url:?}: {e}"))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "Post {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

/// The system's root certificates, read once (those that do not parse are left out).
fn system_roots() -> &'static rustls::RootCertStore {
    static ROOTS: std::sync::OnceLock<rustls::RootCertStore> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        roots
    })
}

/// The TLS client: the CA bundle's certificates as roots, the system's without one.
fn client_config(ca_bundle: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    let roots = match ca_bundle {
        None => system_roots().clone(),
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("invalid caBundle: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("invalid caBundle: {e}"))?;
            }
            roots
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Host, port and path of an `https://` URL (kube admits no other scheme).
fn split_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("Post {url:?}: 'https' is the only allowed URL scheme"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    // An IPv6 address is in brackets: `[::1]:8443`.
    let (host, port) = match authority.strip_prefix('[').and_then(|a| a.split_once(']')) {
        Some((host, rest)) => (host, rest.strip_prefix(':')),
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("Post {url:?}: invalid port {p:?}"))?,
    };
    Ok((host.to_string(), port, path.to_string()))
}

/// An HTTP/1.1 answer's status code and body (by Content-Length, chunked, or to the end).
fn parse_answer(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("malformed HTTP response")?;
    let body = &raw[end + 4..];
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        return Ok((status, unchunk(body)?));
    }
    let body = match header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        Some(n) => body.get(..n).ok_or("unexpected EOF")?,
        None => body,
    };
    Ok((status, body.to_vec()))
}

/// A chunked body's data.
fn unchunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("unexpected EOF")?;
        let size_text = String::from_utf8_lossy(&body[..eol]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "malformed chunk")?;
        body = &body[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(body.get(..size).ok_or("unexpected EOF")?);
        body = body.get(size + 2..).ok_or("unexpected EOF")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_answers_are_read() {
        assert_eq!(
            split_url("https://127.0.0.1:8443/validate?x=1").unwrap(),
            ("127.0.0.1".into(), 8443, "/validate?x=1".into())
        );
        assert_eq!(
            split_url("https://h").unwrap(),
            ("h".into(), 443, "/".into())
        );
        assert!(split_url("http://h/").is_err());
        assert_eq!(
            split_url("https://[::1]:8443/v").unwrap(),
            ("::1".into(), 8443, "/v".into())
        );
        assert_eq!(
            split_url("https://[::1]").unwrap(),
            ("::1".into(), 443, "/".into())
        );
        assert!(split_url("https://h:x/").is_err());
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}xx";
        assert_eq!(parse_answer(plain).unwrap(), (200, b"{}".to_vec()));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        assert_eq!(parse_answer(chunked).unwrap(), (200, b"{}".to_vec()));
        assert!(parse_answer(b"garbage").is_err());
    }
}
