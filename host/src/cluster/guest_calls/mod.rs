//! The Kubernetes calls a guest makes while it handles an object (the WIT `get`, `list`,
//! `create`, `patch` and `delete` imports), and the Events it posts: checked (`checks`:
//! the resource, the guest's declared permissions, the namespaces the operator serves),
//! paced (`traffic`: a rate per guest), then sent (an Event by the poster, at the
//! guest's Event pace, in the background).
//!
//! Every answer goes back to the guest as a value; nothing here fails the handler call,
//! retries a request or panics on what a guest sends.

mod checks;
mod traffic;

use std::sync::{Arc, RwLock};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Map, Value};

use crate::cluster::discovery::Resource;
use crate::cluster::events::{EventPace, ObjectRef, event_namespace};
use crate::cluster::scope::Scope;
use crate::object_log::object_log;
use crate::runtime::{Caller, Guest, KubeError, KubeRequest};
use checks::{Action, Prepared, bad_request, prepare};

pub(crate) use checks::{SENSITIVE, guest_may};
pub(crate) use traffic::GuestTraffic;

/// The resources discovered last, shared by the run loop (which replaces them on every
/// rescan) and the guests' calls (which resolve selectors against them). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownResources(Arc<RwLock<Arc<[Resource]>>>);

impl KnownResources {
    /// Replaces the snapshot; calls already resolving keep the one they started with.
    pub(crate) fn replace(&self, discovered: &[Resource]) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::from(discovered);
    }

    /// The current snapshot.
    pub(crate) fn snapshot(&self) -> Arc<[Resource]> {
        Arc::clone(&self.0.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The current snapshot; if nothing was discovered yet (startup handlers run before
    /// the operator's first scan), a scan now.
    async fn current(&self, client: &Client) -> Arc<[Resource]> {
        let known = self.snapshot();
        if !known.is_empty() {
            return known;
        }
        match crate::cluster::discovery::scan(client).await {
            Ok(found) => {
                self.replace(&found);
                self.snapshot()
            }
            // The call then names no known resource, and says so to the guest.
            Err(_) => known,
        }
    }
}

/// What guests' Kubernetes calls and Events need from the operator: the cluster, what
/// discovery found, the namespaces served, and each guest's pace. Cheap to clone.
#[derive(Clone)]
pub(crate) struct KubeAccess {
    client: Client,
    known: KnownResources,
    scope: Scope,
    traffic: GuestTraffic,
}

impl KubeAccess {
    pub(crate) fn new(
        client: Client,
        known: KnownResources,
        scope: Scope,
        traffic: GuestTraffic,
    ) -> Self {
        Self {
            client,
            known,
            scope,
            traffic,
        }
    }

    /// Serves one Kubernetes call of `guest` while it handles `object` (whose namespace
    /// is the default one; `null` when the call is about no object).
    pub(crate) async fn call(
        &self,
        guest: &Guest,
        object: &Value,
        caller: &Caller,
        request: KubeRequest,
    ) -> Result<String, KubeError> {
        let known = self.known.current(&self.client).await;
        let object_namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let prepared = prepare(
            &caller.guest,
            &guest.describe().permissions,
            &known,
            &self.scope,
            object_namespace,
            request,
        );
        match prepared {
            Ok(prepared) => {
                let verb = prepared.action.verb();
                let until = caller.deadline.get();
                self.traffic.admit(&caller.guest, verb, until).await?;
                execute(&self.client, prepared, self.traffic.max_list_bytes()).await
            }
            Err(refused) => {
                if refused.code == 403 {
                    object_log!(
                        warn,
                        caller.object_ref(),
                        "Handler '{}' of guest '{}' was refused a Kubernetes call: {}",
                        caller.handler_id,
                        caller.guest,
                        refused.message
                    );
                }
                Err(refused)
            }
        }
    }
}

impl KubeAccess {
    /// Lets an Event of `guest` about `involved` go: in a namespace the operator serves,
    /// about an object the guest handles or may read (`own`: the object of the call,
    /// which it handles); answers the guest's Event budget, which it goes out at. A
    /// refusal says why.
    pub(crate) async fn admit_event(
        &self,
        guest: &Guest,
        caller: &Caller,
        involved: &ObjectRef,
        own: bool,
    ) -> Result<EventPace, KubeError> {
        checks::valid_reference(involved)?;
        let namespace = event_namespace(involved);
        if !self.scope.includes(namespace) {
            return Err(checks::outside_scope(&caller.guest, namespace));
        }
        if !own {
            let known = self.known.current(&self.client).await;
            checks::may_mention(guest, &known, involved)?;
        }
        Ok(self.traffic.event_pace(&caller.guest))
    }

    /// Lets an Event made of a log line of `caller` about the object it handles
    /// (`involved`) go, if its namespace is served: the guest's Event budget, which it
    /// goes out at; `None`: it is not posted.
    pub(crate) fn admit_logged_event(
        &self,
        caller: &Caller,
        involved: &ObjectRef,
    ) -> Option<EventPace> {
        self.scope
            .includes(event_namespace(involved))
            .then(|| self.traffic.event_pace(&caller.guest))
    }
}

/// Sends a checked request; answers the object (or list, of at most `max_list_bytes`) as
/// JSON, `""` for a deletion.
async fn execute(
    client: &Client,
    prepared: Prepared,
    max_list_bytes: usize,
) -> Result<String, KubeError> {
    let Prepared {
        resource,
        namespace,
        action,
    } = prepared;
    let ar = resource.api_resource();
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let object = match action {
        Action::Get { name } => api.get(&name).await,
        Action::List { label_selector } => {
            return list_paged(&api, &resource, label_selector.as_deref(), max_list_bytes).await;
        }
        Action::Create { mut body } => {
            fill_type(&mut body, &resource);
            let object: DynamicObject = serde_json::from_value(body)
                .map_err(|e| bad_request(format!("the body is not a Kubernetes object: {e}")))?;
            api.create(&PostParams::default(), &object).await
        }
        Action::Patch { name, patch } => {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
        Action::Delete { name } => {
            return api
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| String::new())
                .map_err(kube_error);
        }
    };
    to_json(&object.map_err(kube_error)?)
}

/// Objects asked for per page of a guest's list.
const LIST_PAGE: u32 = 500;

/// A list as `kubectl get -o json` shows it (every item with its apiVersion and kind,
/// which the API server leaves out of list items), read page by page and written out as
/// it comes: past `max_bytes` the guest is refused (413) and nothing more is read, so a
/// large collection costs the host at most the bound and a page.
async fn list_paged(
    api: &Api<DynamicObject>,
    resource: &Resource,
    label_selector: Option<&str>,
    max_bytes: usize,
) -> Result<String, KubeError> {
    let mut params = ListParams::default().limit(LIST_PAGE);
    if let Some(labels) = label_selector {
        params = params.labels(labels);
    }
    let mut items = String::new();
    loop {
        let page = api.list(&params).await.map_err(kube_error)?;
        for item in page.items {
            let mut item = serde_json::to_value(item).unwrap_or(Value::Null);
            fill_type(&mut item, resource);
            if !items.is_empty() {
                items.push(',');
            }
            items.push_str(&to_json(&item)?);
            if items.len() > max_bytes {
                return Err(list_too_large(resource, max_bytes));
            }
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => {
                let version = page.metadata.resource_version.unwrap_or_default();
                return list_text(resource, &version, &items);
            }
        }
    }
}

/// The list of `items` (their JSON, comma-separated) as of `resource_version`.
fn list_text(
    resource: &Resource,
    resource_version: &str,
    items: &str,
) -> Result<String, KubeError> {
    let mut root = Map::new();
    root.insert("apiVersion".to_owned(), Value::from(resource.api_version()));
    root.insert(
        "kind".to_owned(),
        Value::from(format!("{}List", resource.kind)),
    );
    root.insert(
        "metadata".to_owned(),
        serde_json::json!({"resourceVersion": resource_version}),
    );
    // Last: the items go where this empty array is, written once and never parsed again.
    root.insert("items".to_owned(), Value::Array(Vec::new()));
    let head = to_json(&Value::Object(root))?;
    let head = head.strip_suffix("[]}").unwrap_or(&head);
    Ok(format!("{head}[{items}]}}"))
}

fn list_too_large(resource: &Resource, max_bytes: usize) -> KubeError {
    KubeError {
        code: 413,
        reason: "RequestEntityTooLarge".to_owned(),
        message: format!(
            "the list of {} is larger than the {max_bytes} bytes a guest may be handed \
             (--max-list-bytes): list fewer with a label selector or a namespace",
            resource.plural
        ),
    }
}

/// Adds apiVersion and kind where an object lacks them, so guests need not repeat what
/// the selector already said.
fn fill_type(object: &mut Value, resource: &Resource) {
    if let Value::Object(map) = object {
        map.entry("apiVersion")
            .or_insert_with(|| Value::from(resource.api_version()));
        map.entry("kind")
            .or_insert_with(|| Value::from(resource.kind.clone()));
    }
}

fn to_json(value: &impl serde::Serialize) -> Result<String, KubeError> {
    serde_json::to_string(value)
        .map_err(|e| KubeError::local("Internal", format!("cannot serialise the answer: {e}")))
}

/// The API server's refusal as it gave it; anything else did not reach it (or its answer
/// could not be read), which the guest sees as code 0 with the whole error chain.
fn kube_error(error: kube::Error) -> KubeError {
    match error {
        kube::Error::Api(status) => KubeError {
            code: status.code,
            reason: status.reason,
            message: status.message,
        },
        other => KubeError::local("Unavailable", crate::error_chain(&other)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::checks::tests::{find, known};
    use super::*;

    #[test]
    fn listed_items_and_created_bodies_get_their_type() {
        let known = known();
        let configmaps = find(&known, "configmaps", "");
        let mut item = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        fill_type(&mut item, &configmaps);
        let text = list_text(&configmaps, "7", &format!("{item},{item}")).expect("a list");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(value["items"].as_array().map(Vec::len), Some(2));
        let empty: Value =
            serde_json::from_str(&list_text(&configmaps, "7", "").expect("a list")).expect("JSON");
        assert_eq!(empty["items"], json!([]));
        assert_eq!(value["kind"], "ConfigMapList");
        assert_eq!(value["apiVersion"], "v1");
        assert_eq!(value["metadata"]["resourceVersion"], "7");
        assert_eq!(value["items"][0]["kind"], "ConfigMap");
        assert_eq!(value["items"][0]["data"]["k"], "v");
        let mut body = json!({"kind": "Other", "metadata": {}});
        fill_type(&mut body, &configmaps);
        assert_eq!(
            body,
            json!({"kind": "Other", "metadata": {}, "apiVersion": "v1"})
        );
    }

    #[test]
    fn the_snapshot_is_replaced_not_mutated() {
        let known_resources = KnownResources::default();
        assert!(known_resources.snapshot().is_empty());
        let before = known_resources.snapshot();
        known_resources.replace(&known());
        assert!(before.is_empty());
        assert_eq!(known_resources.snapshot().len(), known().len());
    }
}
