//! The credentials vault (Kopf's `Vault`, KOPF.md §1.12): the credentials the login
//! handlers gave, each with a client of its own, and the operator's one client over them
//! ([`Vault::client`]), which every request of the operator goes through — watches, its
//! patches and Events, the guests' calls.
//!
//! A request uses the credentials of the highest priority (the first given, where Kopf
//! picks one at random); expired ones are dropped first. When the API server answers 401,
//! those credentials are invalidated and the request is sent once more with the next
//! ones; when none are left, every request waits while the login handlers are called
//! again (by the authenticator, above this layer: it waits for [`Vault::wanted`] and
//! answers with [`Vault::populate`] or [`Vault::fail`]). Credentials once found invalid
//! are not taken again from the same handler (the last three are remembered, as Kopf
//! does), so that a handler returning the same refused token cannot loop forever.
//!
//! An operator without login handlers has no vault: its client is the one the
//! environment names (kubeconfig, in-cluster), or the one the application gave.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use chrono::Utc;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use kube::client::Body;
use tokio::sync::watch;
use tower::BoxError;

use super::credentials::{ConnectionInfo, CredentialsError, LoginError};

/// Invalid credentials remembered per login handler (Kopf keeps the last three).
const REMEMBERED_INVALID: usize = 3;

/// The credentials of the login handlers, shared by every request (cheap to clone).
#[derive(Clone)]
pub(crate) struct Vault {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Told of every change of the state, to wake those who wait on it.
    changes: watch::Sender<()>,
}

#[derive(Default)]
struct State {
    /// Usable credentials, in the order given.
    items: Vec<Arc<Item>>,
    /// Per login handler, its last credentials the API server refused.
    invalid: HashMap<String, Vec<ConnectionInfo>>,
    /// Credentials are needed: the login handlers are to be called.
    wanted: bool,
    /// The login failed for good.
    failure: Option<LoginError>,
}

/// One login handler's credentials and the client that uses them.
pub(crate) struct Item {
    /// The login handler (its activity key).
    key: String,
    info: ConnectionInfo,
    client: kube::Client,
}

impl Vault {
    /// An empty vault, which wants credentials at once (the initial login).
    pub(crate) fn new() -> Vault {
        let (changes, _) = watch::channel(());
        Vault {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    wanted: true,
                    ..State::default()
                }),
                changes,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.inner.changes.send_replace(());
    }

    /// The operator's client: every request goes through the vault's credentials. Its
    /// default namespace is that of the credentials it starts with (`default` without one).
    pub(crate) fn client(&self) -> kube::Client {
        let namespace = self
            .state()
            .items
            .first()
            .and_then(|item| item.info.default_namespace.clone())
            .unwrap_or_else(|| "default".to_owned());
        kube::Client::new(
            Authenticated {
                vault: self.clone(),
            },
            namespace,
        )
    }

    /// Waits until credentials are wanted: at first, and when none are left.
    pub(crate) async fn wanted(&self) {
        let mut changes = self.inner.changes.subscribe();
        loop {
            if self.state().wanted {
                return;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Adds what the login handlers gave, `(handler key, credentials)`, each with a
    /// client of its own; credentials the API server refused before are left out.
    /// Requests waiting for credentials go on. Returns how many credentials are usable.
    ///
    /// # Errors
    /// Credentials of which no client can be made (the handler's key and why); nothing is
    /// added then.
    pub(crate) async fn populate(
        &self,
        given: Vec<(String, ConnectionInfo)>,
    ) -> Result<usize, (String, CredentialsError)> {
        self.fill(given, false).await
    }

    /// As [`Vault::populate`], but what is given replaces every credential the vault had
    /// (a reload changed the login handlers: those of the old version must not be used
    /// again) — unless none of it is usable, when the vault keeps what it had.
    pub(crate) async fn replace(
        &self,
        given: Vec<(String, ConnectionInfo)>,
    ) -> Result<usize, (String, CredentialsError)> {
        self.fill(given, true).await
    }

    async fn fill(
        &self,
        given: Vec<(String, ConnectionInfo)>,
        whole: bool,
    ) -> Result<usize, (String, CredentialsError)> {
        let mut items = Vec::new();
        for (key, info) in given {
            let refused = self
                .state()
                .invalid
                .get(&key)
                .is_some_and(|invalid| invalid.contains(&info));
            if refused {
                tracing::warn!(
                    "Login handler '{key}' gave credentials the API server refused already; \
                     they are not used."
                );
                continue;
            }
            let built = match info.config().await {
                Ok(config) => super::kube_client(config)
                    .map_err(|error| CredentialsError::Config(error.to_string())),
                Err(error) => Err(error),
            };
            let client = built.map_err(|error| (key.clone(), error))?;
            items.push(Arc::new(Item { key, info, client }));
        }
        if whole && items.is_empty() {
            return Ok(0);
        }
        let usable = {
            let mut state = self.state();
            if whole {
                state.items.clear();
            }
            for item in items {
                state.items.retain(|old| old.key != item.key);
                state.items.push(item);
            }
            state.wanted = false;
            state.items.len()
        };
        self.changed();
        Ok(usable)
    }

    /// The login failed for good: every request, waiting or to come, fails.
    pub(crate) fn fail(&self, message: String) {
        self.state().failure = Some(LoginError(message));
        self.changed();
    }

    /// The credentials to send a request with: the first of the highest priority that
    /// has not expired, waiting while the login handlers are called.
    async fn select(&self) -> Result<Arc<Item>, LoginError> {
        let mut changes = self.inner.changes.subscribe();
        loop {
            let (newly_wanted, expired) = {
                let mut state = self.state();
                if let Some(failure) = &state.failure {
                    return Err(failure.clone());
                }
                let now = Utc::now();
                let before = state.items.len();
                state.items.retain(|item| !item.info.expired(now));
                let was_wanted = state.wanted;
                if state.items.is_empty() {
                    state.wanted = true;
                }
                if !state.wanted {
                    let top = state.items.iter().map(|item| item.info.priority).max();
                    let chosen = state
                        .items
                        .iter()
                        .find(|item| Some(item.info.priority) == top);
                    if let Some(item) = chosen {
                        return Ok(Arc::clone(item));
                    }
                }
                (!was_wanted, before != state.items.len())
            };
            if expired {
                tracing::info!("Login credentials have expired.");
            }
            if newly_wanted {
                self.changed();
            }
            if changes.changed().await.is_err() {
                return Err(LoginError("the operator is stopping".to_owned()));
            }
        }
    }

    /// The API server refused `item`'s credentials: they are not used again, and when
    /// none are left, the login handlers are called.
    fn invalidate(&self, item: &Arc<Item>) {
        {
            let mut state = self.state();
            // Another request may have invalidated them already, and a login replaced them.
            let Some(position) = state.items.iter().position(|i| Arc::ptr_eq(i, item)) else {
                return;
            };
            state.items.remove(position);
            let invalid = state.invalid.entry(item.key.clone()).or_default();
            if invalid.len() == REMEMBERED_INVALID {
                invalid.remove(0);
            }
            invalid.push(item.info.clone());
            if state.items.is_empty() {
                state.wanted = true;
            }
        }
        tracing::info!(
            "The API server refused the credentials of login handler '{}' (401 Unauthorized).",
            item.key
        );
        self.changed();
    }

    /// Sends a request with the current credentials; after a 401, once more with the
    /// next (after a new login if none are left).
    async fn send(&self, request: Request<Body>) -> Result<Response<Body>, BoxError> {
        let (head, body) = request.into_parts();
        // Kept to be sent again: the operator's requests have small bodies (a patch, an
        // Event, a guest's object), and watches none.
        let body = body.collect_bytes().await?;
        let mut attempts = 2;
        loop {
            attempts -= 1;
            let item = self.select().await?;
            let request = Request::from_parts(head.clone(), Body::from(body.clone()));
            let response = item.client.send(request).await?;
            if response.status() != StatusCode::UNAUTHORIZED {
                return Ok(response);
            }
            self.invalidate(&item);
            if attempts == 0 {
                return Ok(response);
            }
        }
    }
}

/// The operator's client's service: each request through [`Vault::send`].
#[derive(Clone)]
struct Authenticated {
    vault: Vault,
}

impl tower::Service<Request<Body>> for Authenticated {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<Body>, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let vault = self.vault.clone();
        Box::pin(async move { vault.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kapsel_apiserver::{ApiServer, Config};
    use kube::Api;
    use serde_json::json;

    use super::*;

    fn info(server: &str, token: &str, extra: serde_json::Value) -> ConnectionInfo {
        let mut value = json!({"server": server, "token": token});
        if let (Some(value), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            value.extend(extra.clone());
        }
        ConnectionInfo::from_result(value).expect("credentials")
    }

    async fn server() -> ApiServer {
        let config = Config::default()
            .rbac(true)
            .static_token("good", "operator", ["system:masters"])
            .static_token("better", "operator", ["system:masters"]);
        ApiServer::start(config).await.expect("server")
    }

    /// Answers every login with `tokens`' next, as the authenticator does; counts logins.
    fn authenticator(vault: &Vault, url: String, tokens: Vec<&'static str>) -> Arc<Mutex<usize>> {
        let logins = Arc::new(Mutex::new(0));
        let (vault, counted) = (vault.clone(), Arc::clone(&logins));
        tokio::spawn(async move {
            for token in tokens {
                vault.wanted().await;
                *counted.lock().expect("count") += 1;
                let given = vec![("login".to_owned(), info(&url, token, json!({})))];
                vault.populate(given).await.expect("usable");
            }
            vault.wanted().await;
            vault.fail("no more tokens".to_owned());
        });
        logins
    }

    #[tokio::test]
    async fn a_refused_token_is_replaced_by_a_new_login_and_the_request_sent_again() {
        let server = server().await;
        let vault = Vault::new();
        let logins = authenticator(&vault, server.url(), vec!["revoked", "good"]);
        let api: Api<ConfigMap> = Api::namespaced(vault.client(), "default");
        let list = api
            .list(&Default::default())
            .await
            .expect("listed after a re-login");
        assert!(list.items.is_empty());
        assert_eq!(*logins.lock().expect("count"), 2);
        // The new token stays in use: no further login.
        api.list(&Default::default()).await.expect("listed");
        assert_eq!(*logins.lock().expect("count"), 2);
        let codes: Vec<u16> = server
            .request_counts()
            .iter()
            .map(|c| c.kind.code)
            .collect();
        assert!(codes.contains(&401) && codes.contains(&200), "{codes:?}");
    }

    #[tokio::test]
    async fn a_second_refusal_is_the_callers_and_a_failed_login_fails_requests() {
        let server = server().await;
        let vault = Vault::new();
        let logins = authenticator(&vault, server.url(), vec!["bad", "worse"]);
        let api: Api<ConfigMap> = Api::namespaced(vault.client(), "default");
        let error = api.list(&Default::default()).await.expect_err("401 twice");
        assert!(
            matches!(&error, kube::Error::Api(status) if status.code == 401),
            "{error:?}"
        );
        assert_eq!(
            *logins.lock().expect("count"),
            2,
            "sent once more, not again"
        );
        let error = api.list(&Default::default()).await.expect_err("no login");
        assert!(format!("{error:?}").contains("no more tokens"), "{error:?}");
    }

    /// kube's TLS stack takes a client certificate and key as the vault's client's
    /// identity. (The embedded API server does no TLS client authentication: what the
    /// server makes of the certificate is not tested here.)
    #[tokio::test]
    async fn a_client_certificate_makes_a_client() {
        let (ca, certificate, key) = crate::cluster::credentials::tests::certificates();
        let given = json!({"server": "https://127.0.0.1:6443", "ca_data": ca,
                           "certificate_data": certificate, "private_key_data": key});
        let given = vec![(
            "cert".to_owned(),
            ConnectionInfo::from_result(given).expect("credentials"),
        )];
        assert_eq!(Vault::new().populate(given).await.expect("a client"), 1);
        let broken = json!({"server": "https://127.0.0.1:6443", "certificate_data": certificate,
                            "private_key_data": ca});
        let broken = vec![(
            "cert".to_owned(),
            ConnectionInfo::from_result(broken).expect("credentials"),
        )];
        let (key, error) = Vault::new().populate(broken).await.expect_err("no key");
        assert_eq!(key, "cert");
        assert!(
            error.to_string().contains("cannot be configured"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn refused_credentials_are_not_taken_again_and_priority_and_expiry_choose() {
        let server = server().await;
        let url = server.url();
        let vault = Vault::new();
        let given = vec![
            ("low".to_owned(), info(&url, "good", json!({}))),
            (
                "high".to_owned(),
                info(&url, "bad", json!({"priority": 10})),
            ),
        ];
        assert_eq!(vault.populate(given).await.expect("usable"), 2);
        let api: Api<ConfigMap> = Api::namespaced(vault.client(), "default");
        api.list(&Default::default())
            .await
            .expect("the high one refused, the low one used");
        // The refused token is not taken again from the same handler.
        let again = vec![(
            "high".to_owned(),
            info(&url, "bad", json!({"priority": 10})),
        )];
        assert_eq!(vault.populate(again).await.expect("usable"), 1);
        // Expired credentials are dropped before use: this token would be refused.
        let expired = vec![(
            "high".to_owned(),
            info(
                &url,
                "revoked",
                json!({"priority": 10, "expiration": "2000-01-01T00:00:00Z"}),
            ),
        )];
        assert_eq!(vault.populate(expired).await.expect("usable"), 2);
        api.list(&Default::default())
            .await
            .expect("the expired one dropped, the low one used");
        let unauthorized: u64 = server
            .request_counts()
            .iter()
            .filter(|c| c.kind.code == 401)
            .map(|c| c.count)
            .sum();
        assert_eq!(unauthorized, 1, "only the first refusal");
    }

    /// A reload's login replaces every credential: those of a login handler the new
    /// version no longer has are not used again; none usable, the vault keeps its own.
    #[tokio::test]
    async fn replacing_credentials_drops_those_of_handlers_gone() {
        let server = server().await;
        let url = server.url();
        let vault = Vault::new();
        let old = vec![
            ("old".to_owned(), info(&url, "good", json!({}))),
            ("kept".to_owned(), info(&url, "good", json!({}))),
        ];
        assert_eq!(vault.populate(old).await.expect("usable"), 2);
        let new = vec![("new".to_owned(), info(&url, "better", json!({})))];
        assert_eq!(vault.replace(new).await.expect("usable"), 1);
        let keys: Vec<String> = vault.state().items.iter().map(|i| i.key.clone()).collect();
        assert_eq!(keys, ["new"]);
        assert_eq!(vault.replace(Vec::new()).await.expect("nothing"), 0);
        assert_eq!(vault.state().items.len(), 1, "nothing usable: kept");
    }
}
