//! The webhook configurations the operator manages (Kopf's `settings.admission.managed`):
//! one `ValidatingWebhookConfiguration` and one `MutatingWebhookConfiguration` of a given
//! name, each holding a webhook per admission handler of that kind, built by Kopf's
//! conventions (its name from the handler's id, its rules from the resources it selects,
//! `sideEffects`, `failurePolicy`, `matchPolicy: Equivalent`, the labels filter as its
//! `objectSelector`), pointing at the operator's webhook server by URL or Service with
//! the server's CA bundle.

use std::collections::HashSet;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::handlers::AdmissionHandler;
use crate::cluster::Resource;
use crate::handlers::Matcher;

/// Where the API server reaches the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `https://host:port`, as seen from the API server (development, the dev cluster).
    Url(String),
    /// A Service in front of the operator's pods.
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
}

/// How the API server reaches the webhook server: where, and the CA it trusts it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientConfig {
    pub(crate) target: Target,
    /// PEM.
    pub(crate) ca_bundle: Vec<u8>,
}

impl ClientConfig {
    /// The `clientConfig` of the webhook served at `path` (below the server's root).
    fn for_path(&self, path: &str) -> Value {
        let mut config = match &self.target {
            Target::Url(url) => json!({"url": format!("{}/{path}", url.trim_end_matches('/'))}),
            Target::Service {
                namespace,
                name,
                port,
            } => json!({"service": {
                "namespace": namespace, "name": name, "port": port, "path": format!("/{path}"),
            }}),
        };
        if !self.ca_bundle.is_empty() {
            config["caBundle"] =
                json!(base64::engine::general_purpose::STANDARD.encode(&self.ca_bundle));
        }
        config
    }
}

/// Which configuration: validating or mutating webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Validating,
    Mutating,
}

impl Kind {
    pub(crate) const BOTH: [Kind; 2] = [Kind::Validating, Kind::Mutating];

    fn api_resource(self) -> ApiResource {
        let (kind, plural) = match self {
            Kind::Validating => (
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            ),
            Kind::Mutating => (
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            ),
        };
        ApiResource {
            group: "admissionregistration.k8s.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "admissionregistration.k8s.io/v1".to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        }
    }

    fn holds(self, handler: &AdmissionHandler) -> bool {
        handler.is_mutating() == (self == Kind::Mutating)
    }
}

/// The webhooks of `kind` for `handlers` (only the persistent ones when `persistent_only`),
/// each with a rule per resource of `resources` it selects. `timeout` is the longest an
/// API server waits for an answer.
pub(crate) fn webhooks(
    kind: Kind,
    handlers: &[AdmissionHandler],
    resources: &[Resource],
    (suffix, client): (&str, &ClientConfig),
    timeout: Duration,
    persistent_only: bool,
) -> Vec<Value> {
    let mut names = HashSet::new();
    handlers
        .iter()
        .filter(|h| kind.holds(h) && (!persistent_only || h.declaration.persistent))
        .map(|handler| {
            let declaration = &handler.declaration;
            let mut name = webhook_name(&[handler.id()], suffix);
            if !names.insert(name.clone()) {
                // Two guests declare the same id: the guest's name tells them apart.
                name = webhook_name(&[handler.id(), handler.guest.name()], suffix);
                names.insert(name.clone());
            }
            let operations = if declaration.operations.is_empty() {
                vec!["*".to_owned()]
            } else {
                declaration.operations.clone()
            };
            let rules: Vec<Value> = resources
                .iter()
                .filter(|r| handler.selects(r))
                .map(|r| {
                    let plural = match &declaration.subresource {
                        Some(sub) => format!("{}/{sub}", r.plural),
                        None => r.plural.clone(),
                    };
                    json!({
                        "apiGroups": [r.group], "apiVersions": [r.version],
                        "resources": [plural], "operations": operations, "scope": "*",
                    })
                })
                .collect();
            let mut webhook = json!({
                "name": name,
                "sideEffects": if declaration.side_effects { "NoneOnDryRun" } else { "None" },
                "failurePolicy": if declaration.ignore_failures { "Ignore" } else { "Fail" },
                "matchPolicy": "Equivalent",
                "rules": rules,
                "clientConfig": client.for_path(&handler.path()),
                "timeoutSeconds": timeout.as_secs().clamp(1, 30),
                "admissionReviewVersions": ["v1", "v1beta1"],
            });
            if let Some(selector) = object_selector(handler) {
                webhook["objectSelector"] = selector;
            }
            webhook
        })
        .collect()
}

/// Kopf's webhook names: the id's parts joined by dots, `_` as `-`, anything else that a
/// DNS subdomain refuses as its hex bytes, then the suffix.
fn webhook_name(parts: &[&str], suffix: &str) -> String {
    let mut name = String::new();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            name.push('.');
        }
        for c in part.chars() {
            match c {
                '/' => name.push('.'),
                '_' => name.push('-'),
                c if c.is_ascii_alphanumeric() || c == '.' || c == '-' => {
                    name.push(c.to_ascii_lowercase());
                }
                c => {
                    let mut buffer = [0; 4];
                    for byte in c.encode_utf8(&mut buffer).bytes() {
                        name.push_str(&format!("{byte:02x}"));
                    }
                }
            }
        }
    }
    if suffix.is_empty() {
        name
    } else {
        format!("{name}.{suffix}")
    }
}

/// The handler's label filters as a label selector (Kopf's `objectSelector`), if it has
/// any. (Stacked registrations with different filters: the first one's.)
fn object_selector(handler: &AdmissionHandler) -> Option<Value> {
    let labels = &handler.specs.first()?.filters.labels;
    let expressions: Vec<Value> = labels
        .iter()
        .map(|(key, matcher)| match matcher {
            Matcher::Equals(value) => json!({"key": key, "operator": "In", "values": [value]}),
            Matcher::Present => json!({"key": key, "operator": "Exists"}),
            Matcher::Absent => json!({"key": key, "operator": "DoesNotExist"}),
        })
        .collect();
    (!expressions.is_empty()).then(|| json!({"matchExpressions": expressions}))
}

/// Why a managed configuration could not be written.
#[derive(Debug, thiserror::Error)]
#[error("could not write the {kind} {name}: {source}")]
pub(crate) struct ManageError {
    kind: &'static str,
    name: String,
    #[source]
    source: kube::Error,
}

/// Writes `webhooks` into the configuration `name` of `kind`, creating it when absent (an
/// existing one is kept: try-or-fail, as Kopf does, so that `create` and `patch` are the
/// only verbs needed).
pub(crate) async fn apply(
    client: &kube::Client,
    kind: Kind,
    name: &str,
    webhooks: Vec<Value>,
) -> Result<(), ManageError> {
    let resource = kind.api_resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let error = |source| ManageError {
        kind: if kind == Kind::Mutating {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        },
        name: name.to_owned(),
        source,
    };
    let fresh = DynamicObject::new(name, &resource);
    match api.create(&PostParams::default(), &fresh).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(source) => return Err(error(source)),
    }
    let patch = json!({"webhooks": webhooks});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(error)?;
    Ok(())
}

/// The changes of the cluster's CRDs (after their initial listing): what a handler
/// selects may be served from then on, or no longer.
fn crd_events(
    client: &kube::Client,
) -> futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>> {
    let crds = ApiResource {
        group: "apiextensions.k8s.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "apiextensions.k8s.io/v1".to_owned(),
        kind: "CustomResourceDefinition".to_owned(),
        plural: "customresourcedefinitions".to_owned(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crds);
    watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed()
}

/// What keeps the managed configurations true.
pub(crate) struct Manager {
    pub(crate) client: kube::Client,
    /// The configurations' name (Kopf's `settings.admission.managed`), also the suffix of
    /// their webhooks' names.
    pub(crate) name: String,
    pub(crate) target: Target,
    /// The server's CA bundle (PEM), as it changes.
    pub(crate) ca_bundle: tokio::sync::watch::Receiver<bytes::Bytes>,
    /// Told of every reload of the guests.
    pub(crate) reloads: tokio::sync::watch::Receiver<u64>,
    /// The longest an API server waits for an answer.
    pub(crate) timeout: Duration,
    /// On exit, leave only the persistent handlers' webhooks (Kopf's behaviour); else
    /// leave every webhook as it is.
    pub(crate) remove_on_exit: bool,
}

/// How often discovery is asked again anyway (CRDs are watched: a resource they serve
/// is seen at once).
const RESCAN_EVERY: Duration = Duration::from_secs(60);

/// A failed write is tried again after this long.
const RETRY_AFTER: Duration = Duration::from_secs(5);

impl Manager {
    /// Writes the configurations now, and again whenever the CA bundle changes, the
    /// guests are reloaded or discovery finds other resources, until `stop`.
    pub(crate) async fn run(
        mut self,
        dispatch: std::sync::Arc<super::dispatch::Dispatch>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let mut written: Option<[Vec<Value>; 2]> = None;
        let mut crds = crd_events(&self.client);
        loop {
            let handlers = dispatch.handlers();
            let resources = dispatch.resources().await;
            let client = ClientConfig {
                target: self.target.clone(),
                ca_bundle: self.ca_bundle.borrow_and_update().to_vec(),
            };
            let wanted = Kind::BOTH.map(|kind| {
                webhooks(
                    kind,
                    &handlers,
                    &resources,
                    (&self.name, &client),
                    self.timeout,
                    false,
                )
            });
            let mut retry = false;
            if written.as_ref() != Some(&wanted) {
                tracing::info!("Reconfiguring the admission webhooks {}.", self.name);
                for (kind, hooks) in Kind::BOTH.into_iter().zip(wanted.clone()) {
                    if let Err(error) = apply(&self.client, kind, &self.name, hooks).await {
                        tracing::error!("{error}");
                        retry = true;
                    }
                }
                written = (!retry).then_some(wanted);
            }
            let wait = if retry { RETRY_AFTER } else { RESCAN_EVERY };
            tokio::select! {
                () = stop.cancelled() => break,
                // A CRD came, changed (became established) or went: its resources too. A
                // listing's end counts (a CRD may have come between the operator's first
                // discovery and the listing), not its items one by one.
                Some(event) = crds.next() => {
                    if let Ok(
                        watcher::Event::Apply(_)
                        | watcher::Event::Delete(_)
                        | watcher::Event::InitDone,
                    ) = event
                    {
                        dispatch.rescan().await;
                    }
                }
                changed = self.ca_bundle.changed() => if changed.is_err() { break },
                changed = self.reloads.changed() => match changed {
                    Ok(()) => dispatch.rescan().await,
                    // The operator is gone: nothing is served any more.
                    Err(_) => break,
                },
                () = tokio::time::sleep(wait) => dispatch.rescan().await,
            }
        }
        if self.remove_on_exit {
            self.remove_transient(&dispatch).await;
        }
    }

    /// Leaves only the persistent handlers' webhooks (Kopf's cleanup at exit).
    async fn remove_transient(&self, dispatch: &super::dispatch::Dispatch) {
        tracing::info!("Cleaning up the admission webhooks {}.", self.name);
        let handlers = dispatch.handlers();
        let resources = dispatch.resources().await;
        let client = ClientConfig {
            target: self.target.clone(),
            ca_bundle: self.ca_bundle.borrow().to_vec(),
        };
        for kind in Kind::BOTH {
            let hooks = webhooks(
                kind,
                &handlers,
                &resources,
                (&self.name, &client),
                self.timeout,
                true,
            );
            if let Err(error) = apply(&self.client, kind, &self.name, hooks).await {
                tracing::error!("{error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kopfs_conventions() {
        assert_eq!(
            webhook_name(&["validate_fn"], "kex.kapsel.dev"),
            "validate-fn.kex.kapsel.dev"
        );
        assert_eq!(webhook_name(&["a/b"], ""), "a.b");
        assert_eq!(webhook_name(&["Check!"], "s"), "check21.s");
        assert_eq!(webhook_name(&["check", "guest_a"], "s"), "check.guest-a.s");
    }

    #[test]
    fn a_client_config_points_at_the_handlers_path_with_the_ca() {
        let url = ClientConfig {
            target: Target::Url("https://127.0.0.1:9443/".to_owned()),
            ca_bundle: b"PEM".to_vec(),
        };
        assert_eq!(
            url.for_path("guest/check"),
            json!({"url": "https://127.0.0.1:9443/guest/check", "caBundle": "UEVN"})
        );
        let service = ClientConfig {
            target: Target::Service {
                namespace: "ops".to_owned(),
                name: "kex".to_owned(),
                port: 443,
            },
            ca_bundle: Vec::new(),
        };
        assert_eq!(
            service.for_path("guest/check"),
            json!({"service": {"namespace": "ops", "name": "kex", "port": 443, "path": "/guest/check"}})
        );
    }
}
