//! What a login handler returns (Kopf's `ConnectionInfo`, KOPF.md §1.12): read from the
//! handler's JSON result, checked, and turned into the configuration of a client of the
//! cluster it names.
//!
//! Only data travels: a guest has no files, so Kopf's `ca_path`, `certificate_path` and
//! `private_key_path` are refused (with the field's name), as are Kopf's `trust_env` and
//! custom `aiohttp` sessions. Certificates and keys are PEM, or PEM in base64 (as Kopf
//! takes them, and as kubeconfigs carry them).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, NaiveDateTime, Utc};
use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

/// Credentials and where to use them: one login handler's result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConnectionInfo {
    /// The API server's URL (`https://host:port`).
    pub(crate) server: String,
    /// The certificate authorities to trust, PEM (or PEM in base64).
    #[serde(default)]
    ca_data: Option<String>,
    /// Do not verify the server's certificate.
    #[serde(default)]
    insecure: Option<bool>,
    /// HTTP basic authentication.
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    /// The `Authorization` scheme (RFC 7235): `Bearer` (the default with a token),
    /// `Basic`, `Digest`, ...
    #[serde(default)]
    scheme: Option<String>,
    #[serde(default)]
    token: Option<String>,
    /// A client certificate and its private key, PEM (or PEM in base64).
    #[serde(default)]
    certificate_data: Option<String>,
    #[serde(default)]
    private_key_data: Option<String>,
    /// The namespace of requests that name none.
    #[serde(default)]
    pub(crate) default_namespace: Option<String>,
    /// A proxy to reach the server through.
    #[serde(default)]
    proxy_url: Option<String>,
    /// Of several credentials, those of the highest priority are used.
    #[serde(default)]
    pub(crate) priority: i64,
    /// When the credentials stop being valid: RFC 3339, or without a zone (then UTC).
    #[serde(default, deserialize_with = "expiration")]
    pub(crate) expiration: Option<DateTime<Utc>>,
}

/// No credentials can be had: the login failed for good. Requests fail with it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot log in to the cluster: {0}")]
pub(crate) struct LoginError(pub(super) String);

/// Why a login handler's result cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CredentialsError {
    #[error("the credentials are not a ConnectionInfo: {0}")]
    Shape(String),
    #[error("both {0} and {1} are needed, or neither")]
    Pair(&'static str, &'static str),
    #[error("the {0} is not PEM, nor PEM in base64")]
    NotPem(&'static str),
    #[error("the scheme and token make no valid Authorization header")]
    Header,
    #[error("a client cannot be configured with them: {0}")]
    Config(String),
}

impl ConnectionInfo {
    /// The credentials in a login handler's result.
    ///
    /// # Errors
    /// Not an object of Kopf's fields (an unknown field, a path where data is needed, a
    /// wrong type, no server), or a certificate without its key.
    pub(crate) fn from_result(result: Value) -> Result<ConnectionInfo, CredentialsError> {
        let info: ConnectionInfo = serde_json::from_value(result)
            .map_err(|error| CredentialsError::Shape(error.to_string()))?;
        if info.certificate_data.is_some() != info.private_key_data.is_some() {
            return Err(CredentialsError::Pair(
                "certificate_data",
                "private_key_data",
            ));
        }
        Ok(info)
    }

    /// Whether they have expired at `now`.
    pub(crate) fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expiration.is_some_and(|expiration| now >= expiration)
    }

    /// The configuration of a client that uses them: as a kubeconfig with one cluster and
    /// one user would give it (kube reads the certificates, the key and the proxy), with
    /// an `Authorization` header of the scheme where it is not `Bearer`.
    ///
    /// # Errors
    /// A certificate or key that is not PEM, a scheme or token that cannot be a header,
    /// or what kube refuses (a server that is not a URL, unreadable certificates).
    pub(crate) async fn config(&self) -> Result<kube::Config, CredentialsError> {
        let bearer = self
            .scheme
            .as_deref()
            .is_none_or(|scheme| scheme.eq_ignore_ascii_case("bearer"));
        let mut user = json!({});
        if let Some(token) = self.token.as_ref().filter(|_| bearer) {
            user["token"] = json!(token);
        }
        if let (Some(username), Some(password)) = (&self.username, &self.password) {
            user["username"] = json!(username);
            user["password"] = json!(password);
        }
        if let Some(certificate) = &self.certificate_data {
            user["client-certificate-data"] = json!(base64_pem(certificate, "certificate_data")?);
        }
        if let Some(key) = &self.private_key_data {
            user["client-key-data"] = json!(base64_pem(key, "private_key_data")?);
        }
        let mut cluster = json!({"server": self.server});
        if let Some(ca) = &self.ca_data {
            cluster["certificate-authority-data"] = json!(base64_pem(ca, "ca_data")?);
        }
        if let Some(insecure) = self.insecure {
            cluster["insecure-skip-tls-verify"] = json!(insecure);
        }
        if let Some(proxy) = &self.proxy_url {
            cluster["proxy-url"] = json!(proxy);
        }
        let mut context = json!({"cluster": "login", "user": "login"});
        if let Some(namespace) = &self.default_namespace {
            context["namespace"] = json!(namespace);
        }
        let kubeconfig = json!({
            "clusters": [{"name": "login", "cluster": cluster}],
            "users": [{"name": "login", "user": user}],
            "contexts": [{"name": "login", "context": context}],
            "current-context": "login",
        });
        let kubeconfig = serde_json::from_value(kubeconfig)
            .map_err(|error| CredentialsError::Config(error.to_string()))?;
        let options = kube::config::KubeConfigOptions::default();
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|error| CredentialsError::Config(error.to_string()))?;
        if let Some(header) = self.authorization(bearer)? {
            config
                .headers
                .push((HeaderName::from_static("authorization"), header));
        }
        Ok(config)
    }

    /// Kopf's `Authorization` header for a scheme other than `Bearer`: `<scheme> <token>`,
    /// or the scheme alone.
    fn authorization(&self, bearer: bool) -> Result<Option<HeaderValue>, CredentialsError> {
        let (Some(scheme), false) = (&self.scheme, bearer) else {
            return Ok(None);
        };
        let text = match &self.token {
            Some(token) => format!("{scheme} {token}"),
            None => scheme.clone(),
        };
        let mut header = HeaderValue::from_str(&text).map_err(|_| CredentialsError::Header)?;
        header.set_sensitive(true);
        Ok(Some(header))
    }
}

/// PEM text as a kubeconfig's `*-data` fields hold it (base64), from PEM or PEM in base64.
fn base64_pem(data: &str, field: &'static str) -> Result<String, CredentialsError> {
    let data = data.trim();
    if data.starts_with("-----BEGIN ") {
        return Ok(STANDARD.encode(data));
    }
    let decoded = STANDARD
        .decode(data)
        .map_err(|_| CredentialsError::NotPem(field))?;
    match std::str::from_utf8(&decoded).map(str::trim) {
        Ok(pem) if pem.starts_with("-----BEGIN ") => Ok(STANDARD.encode(pem)),
        _ => Err(CredentialsError::NotPem(field)),
    }
}

/// An expiration time: RFC 3339, or without a zone (UTC, as Kopf takes a naive time).
fn expiration<'de, D>(deserializer: D) -> Result<Option<DateTime<Utc>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let Some(text) = Option::<String>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if let Ok(time) = DateTime::parse_from_rfc3339(&text) {
        return Ok(Some(time.with_timezone(&Utc)));
    }
    NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f")
        .map(|naive| Some(naive.and_utc()))
        .map_err(|_| {
            serde::de::Error::custom(format!("the expiration {text:?} is not an RFC 3339 time"))
        })
}

#[cfg(test)]
pub(in crate::cluster) mod tests {
    use super::*;

    /// A CA, and a client certificate with its key, made for the test.
    pub(in crate::cluster) fn certificates() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).expect("ca");
        let key = rcgen::KeyPair::generate().expect("key");
        let client = rcgen::CertificateParams::new(vec!["operator".to_owned()])
            .expect("params")
            .signed_by(&key, &ca, &ca_key)
            .expect("client");
        (ca.pem(), client.pem(), key.serialize_pem())
    }

    fn info(value: Value) -> ConnectionInfo {
        ConnectionInfo::from_result(value).expect("valid credentials")
    }

    #[tokio::test]
    async fn a_token_is_a_bearer_token_and_the_server_the_cluster() {
        let config = info(json!({"server": "https://10.0.0.1:6443", "token": "abc", "insecure": true, "default_namespace": "ops"}))
            .config()
            .await
            .expect("config");
        assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
        assert_eq!(
            config
                .auth_info
                .token
                .as_ref()
                .map(|t| t.expose_secret().to_owned()),
            Some("abc".to_owned())
        );
        assert!(config.accept_invalid_certs);
        assert_eq!(config.default_namespace, "ops");
        assert!(
            config.headers.is_empty(),
            "kube's auth layer sends the bearer token"
        );
    }

    use secrecy::ExposeSecret as _;

    #[tokio::test]
    async fn other_schemes_are_sent_as_written_and_basic_auth_as_kube_sends_it() {
        let config = info(json!({"server": "https://h", "scheme": "Digest", "token": "xyz", "username": "u", "password": "p"}))
            .config()
            .await
            .expect("config");
        assert!(config.auth_info.token.is_none());
        assert_eq!(config.auth_info.username.as_deref(), Some("u"));
        let (name, value) = &config.headers[0];
        assert_eq!(
            (name.as_str(), value.to_str().ok()),
            ("authorization", Some("Digest xyz"))
        );
        assert!(value.is_sensitive());
    }

    #[tokio::test]
    async fn certificates_and_keys_are_taken_as_pem_or_base64_pem() {
        let (ca, certificate, key) = certificates();
        for encode in [false, true] {
            let data = |pem: &str| {
                if encode {
                    STANDARD.encode(pem)
                } else {
                    pem.to_owned()
                }
            };
            let config = info(json!({
                "server": "https://127.0.0.1:6443",
                "ca_data": data(&ca),
                "certificate_data": data(&certificate),
                "private_key_data": data(&key),
            }))
            .config()
            .await
            .expect("config");
            let roots = config.root_cert.as_ref().expect("the CA");
            assert_eq!(roots.len(), 1);
            assert_eq!(
                config.auth_info.client_certificate_data.as_deref(),
                Some(STANDARD.encode(certificate.trim()).as_str())
            );
            assert!(config.auth_info.client_key_data.is_some());
        }
    }

    #[tokio::test]
    async fn what_cannot_be_used_is_refused_with_its_field() {
        let refused = |value: Value| {
            ConnectionInfo::from_result(value)
                .expect_err("refused")
                .to_string()
        };
        assert!(refused(json!({"token": "t"})).contains("server"));
        assert!(refused(json!({"server": "s", "ca_path": "/etc/ca"})).contains("ca_path"));
        assert!(
            refused(json!({"server": "s", "certificate_data": "x"})).contains("private_key_data")
        );
        assert!(refused(json!({"server": "s", "expiration": "soon"})).contains("soon"));
        assert!(refused(json!(null)).contains("ConnectionInfo"));
        let not_pem = info(json!({"server": "https://h", "ca_data": "bm90IHBlbQ=="}))
            .config()
            .await
            .expect_err("not PEM");
        assert!(not_pem.to_string().contains("ca_data"), "{not_pem}");
        let not_a_url = info(json!({"server": "::"})).config().await;
        assert!(not_a_url.is_err());
    }

    #[test]
    fn expiration_is_rfc3339_or_naive_utc() {
        let zoned = info(json!({"server": "s", "expiration": "2030-01-01T01:00:00+01:00"}));
        let naive = info(json!({"server": "s", "expiration": "2030-01-01T00:00:00"}));
        assert_eq!(zoned.expiration, naive.expiration);
        let at = |text: &str| {
            DateTime::parse_from_rfc3339(text)
                .expect("time")
                .with_timezone(&Utc)
        };
        assert!(!naive.expired(at("2029-12-31T23:59:59Z")));
        assert!(naive.expired(at("2030-01-01T00:00:00Z")));
        assert!(!info(json!({"server": "s"})).expired(at("2999-01-01T00:00:00Z")));
    }
}
