//! Authentication: who a request is, from its `Authorization: Bearer` token, as
//! kube-apiserver's token authenticators see it. The server's admin token and the
//! configured static tokens name their users; ServiceAccount tokens are JWTs the server
//! signed (`jwt`), valid while their account exists with the uid they name. A request
//! without a bearer token is `system:anonymous`; one with a token that is not valid gets
//! 401. Over TLS, a client certificate the server's client CA signed names its user
//! first, as kube's x509 authenticator does (the server issued it, so it knows whose it
//! is without parsing it).

mod jwt;

use crate::meta::meta_str;
use crate::store::Store;
use crate::tls::{Certificates, ClientCa, ClientCertificate};
use jwt::SigningKey;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// The issuer (`iss`) of ServiceAccount tokens, and the audience the server accepts:
/// kube-apiserver's usual `--service-account-issuer`.
pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The group whose members may do anything (kube's `system:masters`).
pub(crate) const MASTERS: &str = "system:masters";
pub(crate) const AUTHENTICATED: &str = "system:authenticated";
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";

/// The name of the admin user of the server's own kubeconfig.
pub(crate) const ADMIN: &str = "kapsel-admin";

/// An authenticated (or anonymous) user, as authorizers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
}

impl User {
    pub(crate) fn anonymous() -> User {
        User {
            name: "system:anonymous".into(),
            groups: vec![UNAUTHENTICATED.into()],
        }
    }

    /// `system:serviceaccount:NS:NAME` with its groups.
    pub(crate) fn service_account(ns: &str, name: &str) -> User {
        User {
            name: format!("system:serviceaccount:{ns}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.into(),
            ],
        }
    }

    /// A member of `system:masters`: allowed everything, before and without RBAC.
    pub(crate) fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// A bearer token and the user it names, for [`crate::Config::static_token`] (kube's
/// `--token-auth-file` entries).
#[derive(Clone, PartialEq, Eq)]
pub struct StaticToken {
    /// The bearer token.
    pub token: String,
    /// The user name.
    pub user: String,
    /// The user's groups (`system:authenticated` is added, as kube does).
    pub groups: Vec<String>,
}

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken")
            .field("user", &self.user)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

/// The server's secrets: the ServiceAccount token signing key and the admin token. Kept
/// in the state file's snapshots, so tokens and kubeconfigs outlive a restart.
#[derive(Debug)]
pub(crate) struct Credentials {
    key: SigningKey,
    admin_token: String,
    /// The HTTPS certificates (served with RBAC on).
    pub(crate) tls: Certificates,
}

impl Credentials {
    pub(crate) fn generate() -> Result<Credentials, String> {
        let mut bytes = [0u8; 32];
        rand::fill(&mut bytes);
        let admin_token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Credentials {
            key: SigningKey::generate()?,
            admin_token,
            tls: Certificates::generate()?,
        })
    }

    /// The credentials a state file holds ([`Credentials::to_json`]).
    pub(crate) fn from_json(v: &Value) -> Result<Credentials, String> {
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("the credentials have no {k}"))
        };
        Ok(Credentials {
            key: SigningKey::from_base64(text("serviceAccountSigningKey")?)?,
            admin_token: text("adminToken")?.to_string(),
            tls: match v.get("tls") {
                Some(t) => Certificates::from_json(t)?,
                None => Certificates::generate()?,
            },
        })
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({"serviceAccountSigningKey": self.key.to_base64(), "adminToken": self.admin_token, "tls": self.tls.to_json()})
    }

    pub(crate) fn admin_token(&self) -> &str {
        &self.admin_token
    }
}

/// Why a token was not accepted (for the log; clients get only 401).
pub(crate) type Rejection = String;

/// kube's bearer token authenticator's answer for a token no authenticator knows.
pub(crate) const INVALID_TOKEN: &str = "invalid bearer token";

/// A token's user as a TokenReview reports it.
#[derive(Debug, Clone)]
pub(crate) struct Reviewed {
    pub(crate) user: User,
    /// The user's uid (a ServiceAccount's; other users have none).
    pub(crate) uid: String,
    /// kube's `authentication.kubernetes.io/credential-id` extra (`JTI=…`).
    pub(crate) credential_id: Option<String>,
    /// The audiences asked for that the token is for.
    pub(crate) audiences: Vec<String>,
}

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn go_quoted(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Turns requests' tokens into users.
#[derive(Debug)]
pub(crate) struct Authenticator {
    credentials: Credentials,
    tokens: HashMap<String, User>,
    /// What signs client certificates (with RBAC on: TLS is served then).
    client_ca: Option<ClientCa>,
    /// The users of the client certificates issued, by their DER.
    certificates: Mutex<HashMap<Vec<u8>, User>>,
}

/// A token's time claims, seconds since the epoch.
fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Authenticator {
    pub(crate) fn new(
        credentials: Credentials,
        static_tokens: &[StaticToken],
        client_ca: Option<ClientCa>,
    ) -> Authenticator {
        let mut tokens = HashMap::new();
        tokens.insert(
            credentials.admin_token.clone(),
            User {
                name: ADMIN.into(),
                groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            },
        );
        for t in static_tokens {
            let mut groups = t.groups.clone();
            if !groups.iter().any(|g| g == AUTHENTICATED) {
                groups.push(AUTHENTICATED.into());
            }
            tokens.insert(
                t.token.clone(),
                User {
                    name: t.user.clone(),
                    groups,
                },
            );
        }
        Authenticator {
            credentials,
            tokens,
            client_ca,
            certificates: Mutex::default(),
        }
    }

    /// A client certificate for `user` in `groups` (and `system:authenticated`), which
    /// authenticates the TLS connections that present it while the server runs.
    pub(crate) fn issue_certificate(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<ClientCertificate, String> {
        let ca = self
            .client_ca
            .as_ref()
            .ok_or("client certificates need TLS, which the server serves with RBAC on")?;
        let issued = ca.issue(user)?;
        let mut groups = groups.to_vec();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        self.certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                issued.der.clone(),
                User {
                    name: user.to_owned(),
                    groups,
                },
            );
        Ok(issued)
    }

    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The user of a request with this `Authorization` header: anonymous without a bearer
    /// token (kube's anonymous authenticator), an error for a token that is not valid.
    pub(crate) fn authenticate(
        &self,
        store: &Store,
        authorization: Option<&str>,
        certificate: Option<&[u8]>,
    ) -> Result<User, Rejection> {
        if let Some(der) = certificate {
            let issued = self
                .certificates
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(user) = issued.get(der) {
                return Ok(user.clone());
            }
        }
        // kube's bearer token authenticator: `Bearer TOKEN`, the scheme in any case; any
        // other header (Basic, a bare token, an empty one) is not a bearer token.
        let header = authorization.unwrap_or("").trim();
        let mut parts = header.splitn(3, ' ');
        let scheme = parts.next().unwrap_or("");
        let token = parts.next().unwrap_or("");
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Ok(User::anonymous());
        }
        if let Some(user) = self.tokens.get(token) {
            return Ok(user.clone());
        }
        self.service_account_user(store, token)
    }

    /// The user of a ServiceAccount token, checked as kube's validator does: signed by
    /// this server, for its issuer and audience, in time, and naming an account that
    /// exists with the uid it had when the token was issued.
    fn service_account_user(&self, store: &Store, token: &str) -> Result<User, Rejection> {
        self.service_account_review(store, token, &[ISSUER.to_string()])
            .map(|reviewed| reviewed.user)
    }

    /// A bearer token reviewed for `audiences` (kube's TokenReview): the user it names,
    /// with the audiences of the token among them, or why not, in kube's words. The
    /// admin's and the static tokens are good for the API server's audience only, as
    /// kube's audience-agnostic token authenticators.
    pub(crate) fn review(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Result<Reviewed, Rejection> {
        if let Some(user) = self.tokens.get(token) {
            if !audiences.iter().any(|a| a == ISSUER) {
                return Err(INVALID_TOKEN.into());
            }
            return Ok(Reviewed {
                user: user.clone(),
                uid: String::new(),
                credential_id: None,
                audiences: vec![ISSUER.into()],
            });
        }
        self.service_account_review(store, token, audiences)
    }

    /// [`Authenticator::review`] of a ServiceAccount token.
    fn service_account_review(
        &self,
        store: &Store,
        token: &str,
        wanted: &[String],
    ) -> Result<Reviewed, Rejection> {
        // A token this server did not sign, or of another issuer, is not one kube's
        // ServiceAccount authenticator looks at: no authenticator knows it.
        let claims = self.credentials.key.verify(token).ok_or(INVALID_TOKEN)?;
        if claims.get("iss").and_then(Value::as_str) != Some(ISSUER) {
            return Err(INVALID_TOKEN.into());
        }
        let audiences: Vec<String> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => Vec::new(),
        };
        let matched: Vec<String> = wanted
            .iter()
            .filter(|a| audiences.contains(a))
            .cloned()
            .collect();
        if matched.is_empty() {
            return Err(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted(&audiences),
                go_quoted(wanted)
            ));
        }
        let now = unix_now();
        let time = |k: &str| claims.get(k).and_then(Value::as_i64);
        if time("exp").is_none_or(|exp| now >= exp) {
            return Err("service account token has expired".into());
        }
        if time("nbf").is_some_and(|nbf| now < nbf) {
            return Err("service account token is not valid yet".into());
        }
        let private = claims
            .get("kubernetes.io")
            .ok_or("service account token claims could not be validated due to unexpected validation error")?;
        let text = |p: &str| private.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (ns, name, uid) = (
            text("/namespace"),
            text("/serviceaccount/name"),
            text("/serviceaccount/uid"),
        );
        let user = User::service_account(ns, name);
        if claims.get("sub").and_then(Value::as_str) != Some(user.name.as_str()) {
            return Err(INVALID_TOKEN.into());
        }
        let res = (String::new(), "serviceaccounts".to_string());
        let sa = store
            .get(&res, &(ns.to_string(), name.to_string()))
            .ok_or_else(|| format!("serviceaccounts \"{name}\" not found"))?;
        if meta_str(sa, "uid") != uid {
            return Err(format!(
                "service account UID ({}) does not match claim ({uid})",
                meta_str(sa, "uid")
            ));
        }
        if !meta_str(sa, "deletionTimestamp").is_empty() {
            return Err(format!("service account {ns}/{name} has been deleted"));
        }
        Ok(Reviewed {
            user,
            uid: uid.to_string(),
            credential_id: claims
                .get("jti")
                .and_then(Value::as_str)
                .map(|jti| format!("JTI={jti}")),
            audiences: matched,
        })
    }

    /// A token for the ServiceAccount `sa` (a stored object), with kube's claims, valid
    /// for `seconds` from now; returns it with its expiry (seconds since the epoch).
    pub(crate) fn issue(
        &self,
        sa: &Value,
        audiences: &[String],
        seconds: i64,
    ) -> Result<(String, i64), String> {
        let (ns, name) = (meta_str(sa, "namespace"), meta_str(sa, "name"));
        let now = unix_now();
        let exp = now.saturating_add(seconds);
        let claims = json!({
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "iss": ISSUER,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": {
                "namespace": ns,
                "serviceaccount": {"name": name, "uid": meta_str(sa, "uid")},
            },
            "nbf": now,
            "sub": User::service_account(ns, name).name,
        });
        Ok((self.credentials.key.sign(&claims)?, exp))
    }
}
