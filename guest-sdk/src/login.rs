//! What a login handler returns: [`ConnectionInfo`], Kopf's `kopf.ConnectionInfo`
//! (KOPF.md §1.12), the credentials and the API server the operator uses.

use std::time::SystemTime;

use serde::Serialize;

/// The API server and the credentials to reach it with: what a
/// `#[kapsel::on::login]` handler returns (Kopf's `kopf.ConnectionInfo`), as
/// `kapsel::Result<ConnectionInfo>` or `Option<ConnectionInfo>` (`None`: no credentials
/// from this handler).
///
/// The host uses them for every request of the operator — its watches, its patches and
/// Events, the guests' own calls — until the API server refuses them (401) or they
/// expire; then it calls the login handlers again and sends the refused request once more
/// with the new credentials. Of the credentials of several login handlers, those of the
/// highest [`priority`](Self::priority) are used.
///
/// A guest has no files: certificates and keys are given as data, PEM (or PEM in base64),
/// where Kopf also takes paths.
///
/// ```
/// // Kopf: @kopf.on.login() def login_fn(**_): return kopf.ConnectionInfo(server=..., token=...)
/// #[kapsel::on::login(retries = 5, backoff = 2)]
/// fn login_fn(cause: &kapsel::Cause) -> kapsel::Result<kapsel::ConnectionInfo> {
///     let token = cause.memo().get("token").and_then(|t| t.as_str()).unwrap_or_default();
///     Ok(kapsel::ConnectionInfo::new("https://10.0.0.1:6443").token(token))
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The API server's URL, e.g. `https://10.0.0.1:6443`.
    pub server: String,
    /// The certificate authorities to trust: PEM, or PEM in base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_data: Option<String>,
    /// Do not verify the server's certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// HTTP basic authentication: the user name (with [`password`](Self::password)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// HTTP basic authentication: the password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The `Authorization` scheme: `Bearer` (the default with a token), or another one,
    /// sent as `<scheme> <token>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// The token of the `Authorization` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A client certificate: PEM, or PEM in base64 (with its key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_data: Option<String>,
    /// The client certificate's private key: PEM, or PEM in base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_data: Option<String>,
    /// The namespace of requests that name none (Events about cluster-wide objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_namespace: Option<String>,
    /// A proxy to reach the server through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Of several login handlers' credentials, those of the highest priority are used.
    pub priority: i64,
    /// When the credentials stop being valid (RFC 3339): the host logs in again then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiration: Option<String>,
}

impl ConnectionInfo {
    /// Credentials for the API server at `server`; add what it needs with the setters.
    pub fn new(server: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            ca_data: None,
            insecure: None,
            username: None,
            password: None,
            scheme: None,
            token: None,
            certificate_data: None,
            private_key_data: None,
            default_namespace: None,
            proxy_url: None,
            priority: 0,
            expiration: None,
        }
    }

    /// The certificate authorities to trust, PEM (or PEM in base64).
    #[must_use]
    pub fn ca_data(mut self, pem: impl Into<String>) -> Self {
        self.ca_data = Some(pem.into());
        self
    }

    /// Do not verify the server's certificate.
    #[must_use]
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = Some(insecure);
        self
    }

    /// HTTP basic authentication.
    #[must_use]
    pub fn basic(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self.password = Some(password.into());
        self
    }

    /// A bearer token.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The `Authorization` scheme of the token, when not `Bearer`.
    #[must_use]
    pub fn scheme(mut self, scheme: impl Into<String>) -> Self {
        self.scheme = Some(scheme.into());
        self
    }

    /// A client certificate and its private key, PEM (or PEM in base64).
    #[must_use]
    pub fn client_certificate(
        mut self,
        certificate_pem: impl Into<String>,
        private_key_pem: impl Into<String>,
    ) -> Self {
        self.certificate_data = Some(certificate_pem.into());
        self.private_key_data = Some(private_key_pem.into());
        self
    }

    /// The namespace of requests that name none.
    #[must_use]
    pub fn default_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.default_namespace = Some(namespace.into());
        self
    }

    /// A proxy to reach the server through.
    #[must_use]
    pub fn proxy_url(mut self, url: impl Into<String>) -> Self {
        self.proxy_url = Some(url.into());
        self
    }

    /// Its priority among several login handlers' credentials (default 0).
    #[must_use]
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// When the credentials stop being valid.
    #[must_use]
    pub fn expiration(mut self, time: SystemTime) -> Self {
        self.expiration = Some(crate::time::format_rfc3339(time));
        self
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[test]
    fn serialises_with_kopfs_names_leaving_out_what_is_unset() {
        let info = ConnectionInfo::new("https://h:6443")
            .token("t")
            .ca_data("-----BEGIN CERTIFICATE-----")
            .priority(5)
            .expiration(SystemTime::UNIX_EPOCH + Duration::from_secs(86_400));
        assert_eq!(
            serde_json::to_value(&info).expect("JSON"),
            json!({
                "server": "https://h:6443",
                "token": "t",
                "ca_data": "-----BEGIN CERTIFICATE-----",
                "priority": 5,
                "expiration": "1970-01-02T00:00:00Z",
            })
        );
        let client = ConnectionInfo::new("s")
            .client_certificate("c", "k")
            .basic("u", "p");
        let value = serde_json::to_value(&client).expect("JSON");
        assert_eq!(value["certificate_data"], "c");
        assert_eq!(value["private_key_data"], "k");
        assert_eq!(
            (&value["username"], &value["password"]),
            (&json!("u"), &json!("p"))
        );
    }
}
