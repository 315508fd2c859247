//! The replay's cluster before the operator starts: the recorded resources served again
//! (a CRD for each custom one), and the objects that existed.

use std::collections::HashMap;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::super::objects::{self, ObjectError, Written};
use super::plan::Identity;
use super::{
    Action, Address, address_of, describe, is_empty, namespace_of, strip_server_fields, text,
};
use crate::cluster::{FindError, Resource, find_kind};
use crate::recording::ResourceInfo;

/// Why the replay's cluster cannot be set up, or a recorded change not made again.
#[derive(Debug, thiserror::Error)]
pub(super) enum SeedError {
    #[error("{key}: {source}")]
    Crd {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot create the CRD for {key}: {source}")]
    CrdRefused {
        key: String,
        #[source]
        source: kube::Error,
    },
    #[error("{key} is not served: {source}")]
    NotServed {
        key: String,
        #[source]
        source: FindError,
    },
    #[error("the recording does not describe the resource {key}")]
    Undescribed { key: String },
    /// `object` as the report names it: its resource, namespace and name.
    #[error("deleting {object}: {source}")]
    Delete {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("patching {object}: {source}")]
    Patch {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("patching the status of {object}: {source}")]
    PatchStatus {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// The status of an object created as recorded.
    #[error("{object}: the status: {source}")]
    Status {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create the namespace {name}: {source}")]
    Namespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    Resource(#[from] FindError),
}

/// The replay cluster's resources, as the recording names them.
#[derive(Default)]
pub(super) struct Resources {
    infos: HashMap<String, ResourceInfo>,
    served: HashMap<String, Resource>,
}

impl Resources {
    /// Makes the cluster serve a recorded resource: custom ones get a CRD.
    pub(super) async fn serve(
        &mut self,
        client: &Client,
        info: &ResourceInfo,
    ) -> Result<(), SeedError> {
        self.infos.insert(info.key.clone(), info.clone());
        if let Ok(resource) = find_kind(client, &info.api_version(), &info.kind).await {
            self.served.insert(info.key.clone(), resource);
            return Ok(());
        }
        let crds: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &kube::api::ApiResource {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                plural: "customresourcedefinitions".into(),
            },
        );
        let crd: DynamicObject =
            serde_json::from_value(crd_for(info)).map_err(|source| SeedError::Crd {
                key: info.key.clone(),
                source,
            })?;
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => {
                return Err(SeedError::CrdRefused {
                    key: info.key.clone(),
                    source,
                });
            }
        }
        // A new CRD is served once the server has established it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match find_kind(client, &info.api_version(), &info.kind).await {
                Ok(resource) => {
                    self.served.insert(info.key.clone(), resource);
                    return Ok(());
                }
                Err(source) if tokio::time::Instant::now() >= deadline => {
                    return Err(SeedError::NotServed {
                        key: info.key.clone(),
                        source,
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    fn resource(&self, key: &str) -> Result<&Resource, SeedError> {
        self.served.get(key).ok_or_else(|| SeedError::Undescribed {
            key: key.to_owned(),
        })
    }

    fn api(
        &self,
        client: &Client,
        at: &Address,
    ) -> Result<(Api<DynamicObject>, &Resource), SeedError> {
        let resource = self.resource(&at.0)?;
        let namespace = at.1.as_deref().unwrap_or("default");
        Ok((objects::api(client, resource, namespace), resource))
    }

    /// Creates an object as recorded, deleting it again if it was being deleted.
    pub(super) async fn create(
        &self,
        client: &Client,
        key: &str,
        body: &Value,
    ) -> Result<Vec<Written>, SeedError> {
        let mut written = create_object(client, body).await?;
        if body.pointer("/metadata/deletionTimestamp").is_some() {
            written.extend(self.delete(client, &address_of(key, body)).await?);
        }
        Ok(written)
    }

    async fn delete(&self, client: &Client, at: &Address) -> Result<Vec<Written>, SeedError> {
        let (api, resource) = self.api(client, at)?;
        match api.delete(&at.2, &Default::default()).await {
            // Still there (held by finalizers): the operator must see the deletion.
            Ok(deleted) => Ok(deleted
                .left()
                .and_then(|o| objects::version_of(resource, &o))
                .into_iter()
                .collect()),
            // Already gone in the replay: the comparison will tell if that matters.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
            Err(source) => Err(SeedError::Delete {
                object: describe(at),
                source,
            }),
        }
    }

    async fn patch(
        &self,
        client: &Client,
        at: &Address,
        patch: &Value,
        status: bool,
    ) -> Result<Vec<Written>, SeedError> {
        let (api, resource) = self.api(client, at)?;
        let params = PatchParams::default();
        let sent = if status {
            api.patch_status(&at.2, &params, &Patch::Merge(patch)).await
        } else {
            api.patch(&at.2, &params, &Patch::Merge(patch)).await
        };
        match sent {
            Ok(object) => Ok(objects::version_of(resource, &object).into_iter().collect()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
            Err(source) => Err(SeedError::Patch {
                object: describe(at),
                source,
            }),
        }
    }

    pub(super) async fn perform(
        &self,
        client: &Client,
        action: &Action,
    ) -> Result<Vec<Written>, SeedError> {
        match action {
            Action::Wait => Ok(Vec::new()),
            Action::Create(key, body) => self.create(client, key, body).await,
            Action::Patch { at, main, status } => {
                let mut written = Vec::new();
                let has_status = self
                    .resource(&at.0)?
                    .subresources
                    .iter()
                    .any(|s| s == "status");
                if let Some(main) = main {
                    written.extend(self.patch(client, at, main, false).await?);
                }
                if let Some(status) = status {
                    let patch = json!({ "status": status });
                    written.extend(self.patch(client, at, &patch, has_status).await?);
                }
                Ok(written)
            }
            Action::Delete(at) => self.delete(client, at).await,
            Action::Release(at) => {
                let patch = json!({"metadata": {"finalizers": null}});
                self.patch(client, at, &patch, false).await
            }
            Action::PatchUnwatched {
                object,
                main,
                status,
            } => patch_unwatched(client, object, main.as_ref(), status.as_ref()).await,
        }
    }
}

/// Changes an object that no stream watches (found by its kind, not by a recorded
/// resource) as somebody else changed it.
async fn patch_unwatched(
    client: &Client,
    (api_version, kind, namespace, name): &Identity,
    main: Option<&Value>,
    status: Option<&Value>,
) -> Result<Vec<Written>, SeedError> {
    let resource = find_kind(client, api_version, kind).await?;
    let api = objects::api(client, &resource, namespace.as_deref().unwrap_or("default"));
    let params = PatchParams::default();
    let described = format!("{} {}", resource.key(), name);
    let mut written = Vec::new();
    if let Some(main) = main {
        let patched = api
            .patch(name, &params, &Patch::Merge(main))
            .await
            .map_err(|source| SeedError::Patch {
                object: described.clone(),
                source,
            })?;
        written.extend(objects::version_of(&resource, &patched));
    }
    if let Some(status) = status {
        let patched = merge_status(&api, &resource, name, status)
            .await
            .map_err(|source| SeedError::PatchStatus {
                object: described.clone(),
                source,
            })?;
        written.extend(objects::version_of(&resource, &patched));
    }
    Ok(written)
}

/// Creates an object as recorded (its namespace first, if missing), status included.
/// Merges `status` into an object's status: through the subresource where the resource
/// has one (the object's own endpoint would ignore it), else into the object.
async fn merge_status(
    api: &Api<DynamicObject>,
    resource: &Resource,
    name: &str,
    status: &Value,
) -> Result<DynamicObject, kube::Error> {
    let patch = json!({ "status": status });
    let params = PatchParams::default();
    if resource.subresources.iter().any(|s| s == "status") {
        api.patch_status(name, &params, &Patch::Merge(&patch)).await
    } else {
        api.patch(name, &params, &Patch::Merge(&patch)).await
    }
}

pub(super) async fn create_object(
    client: &Client,
    body: &Value,
) -> Result<Vec<Written>, SeedError> {
    if let Some(namespace) = namespace_of(body) {
        ensure_namespace(client, namespace).await?;
    }
    let mut fresh = strip_server_fields(body);
    let status = fresh.as_object_mut().and_then(|o| o.remove("status"));
    let (resource, created) = objects::apply_object(client, &fresh).await?;
    let mut written: Vec<Written> = objects::version_of(&resource, &created)
        .into_iter()
        .collect();
    if let Some(status) = status.filter(|s| !is_empty(s)) {
        let name = text(body, "/metadata/name").unwrap_or_default();
        let api = objects::api(client, &resource, namespace_of(body).unwrap_or("default"));
        let patched = merge_status(&api, &resource, name, &status)
            .await
            .map_err(|source| SeedError::Status {
                object: format!("{} {name}", resource.key()),
                source,
            })?;
        written.extend(objects::version_of(&resource, &patched));
    }
    Ok(written)
}

async fn ensure_namespace(client: &Client, name: &str) -> Result<(), SeedError> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(SeedError::Namespace {
            name: name.to_owned(),
            source,
        }),
    }
}

/// A CRD that serves a recorded custom resource (any content: the schema keeps
/// unknown fields).
fn crd_for(info: &ResourceInfo) -> Value {
    let mut names = json!({
        "plural": info.plural,
        "kind": info.kind,
        "singular": if info.singular.is_empty() { info.kind.to_lowercase() } else { info.singular.clone() },
    });
    if !info.short_names.is_empty() {
        names["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        names["categories"] = json!(info.categories);
    }
    let mut version = json!({
        "name": info.version,
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
    });
    if info.subresources.iter().any(|s| s == "status") {
        version["subresources"] = json!({"status": {}});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", info.plural, info.group)},
        "spec": {
            "group": info.group,
            "names": names,
            "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version],
        },
    })
}
