//! The cluster side of cases: the objects a case creates, patches, reads and deletes,
//! through the same client the host uses, and the Events posted about them.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::format::{Source, Target};
use crate::cluster::{FindError, Resource, find_kind, find_resource};

/// An object the case wrote: its resource (key), uid and resourceVersion.
pub(super) type Written = (String, String, String);

/// What the runner remembers of a write: the resource, the object's uid and version.
pub(super) fn version_of(resource: &Resource, object: &DynamicObject) -> Option<Written> {
    Some((
        resource.key(),
        object.metadata.uid.clone()?,
        object.metadata.resource_version.clone()?,
    ))
}

/// Why the case's objects cannot be read, written or looked at.
#[derive(Debug, thiserror::Error)]
pub(super) enum ObjectError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not valid YAML: {source}", path.display())]
    NotYaml {
        path: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("an object needs apiVersion, kind and metadata.name")]
    Unnamed,
    /// A review's object comes from a file of another number of documents.
    #[error("{} holds {found} objects: a review's object is one", path.display())]
    NotOne { path: PathBuf, found: usize },
    #[error(transparent)]
    Resource(#[from] FindError),
    #[error("{kind}/{name}: {source}")]
    Malformed {
        kind: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// The object could be neither created nor merged into the existing one.
    #[error("{kind}/{name}: {source}")]
    Refused {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Another request about an object failed.
    #[error(transparent)]
    Request(kube::Error),
}

/// Creates the objects of a source, or merges them into existing ones; returns their
/// uids and resourceVersions.
pub(super) async fn apply(client: &Client, source: &Source) -> Result<Vec<Written>, ObjectError> {
    let objects = match source {
        Source::Object(object) => vec![object.clone()],
        Source::File(path) => read_manifests(path)?,
    };
    let mut written = Vec::new();
    for object in objects {
        let (resource, applied) = apply_object(client, &object).await?;
        written.extend(version_of(&resource, &applied));
    }
    Ok(written)
}

/// The one object of a source (an admission review's): inline, or a file's only document.
pub(super) fn one_object(source: &Source) -> Result<Value, ObjectError> {
    let object = match source {
        Source::Object(object) => object.clone(),
        Source::File(path) => {
            let mut objects = read_manifests(path)?;
            if objects.len() != 1 {
                return Err(ObjectError::NotOne {
                    path: path.clone(),
                    found: objects.len(),
                });
            }
            objects.remove(0)
        }
    };
    let named = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    if named("/apiVersion") && named("/kind") && named("/metadata/name") {
        Ok(object)
    } else {
        Err(ObjectError::Unnamed)
    }
}

/// Merge-patches the object `target` names; the version written.
pub(super) async fn merge(
    client: &Client,
    target: &Target,
    merge: &Value,
) -> Result<Vec<Written>, ObjectError> {
    let (api, resource) = api_for(client, target).await?;
    let object = api
        .patch(&target.name, &PatchParams::default(), &Patch::Merge(merge))
        .await
        .map_err(ObjectError::Request)?;
    Ok(version_of(&resource, &object).into_iter().collect())
}

/// Deletes the object `target` names; its version when it stays, held by finalizers (the
/// operator must see the deletion).
pub(super) async fn delete(client: &Client, target: &Target) -> Result<Vec<Written>, ObjectError> {
    let (api, resource) = api_for(client, target).await?;
    let deleted = api
        .delete(&target.name, &Default::default())
        .await
        .map_err(ObjectError::Request)?;
    Ok(deleted
        .left()
        .and_then(|o| version_of(&resource, &o))
        .into_iter()
        .collect())
}

fn read_manifests(path: &Path) -> Result<Vec<Value>, ObjectError> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).map_err(|source| ObjectError::Unreadable {
        path: path.to_owned(),
        source,
    })?;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).map_err(|source| ObjectError::NotYaml {
            path: path.to_owned(),
            source,
        })?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

pub(super) async fn apply_object(
    client: &Client,
    object: &Value,
) -> Result<(Resource, DynamicObject), ObjectError> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let (Some(api_version), Some(kind), Some(name)) =
        (text("/apiVersion"), text("/kind"), text("/metadata/name"))
    else {
        return Err(ObjectError::Unnamed);
    };
    let resource = find_kind(client, api_version, kind).await?;
    let namespace = text("/metadata/namespace").unwrap_or("default");
    let api = api(client, &resource, namespace);
    let typed: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|source| ObjectError::Malformed {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    let applied = match api.create(&PostParams::default(), &typed).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            api.patch(name, &PatchParams::default(), &Patch::Merge(object))
                .await
        }
        Err(e) => Err(e),
    };
    applied
        .map(|object| (resource, object))
        .map_err(|source| ObjectError::Refused {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        })
}

pub(super) fn api(client: &Client, resource: &Resource, namespace: &str) -> Api<DynamicObject> {
    let ar = resource.api_resource();
    if resource.namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

pub(super) async fn api_for(
    client: &Client,
    target: &Target,
) -> Result<(Api<DynamicObject>, Resource), ObjectError> {
    let resource = find_resource(client, &target.resource).await?;
    Ok((
        api(client, &resource, target.namespace_or_default()),
        resource,
    ))
}

pub(super) async fn get(client: &Client, target: &Target) -> Result<Option<Value>, ObjectError> {
    let (api, _) = api_for(client, target).await?;
    let object = api
        .get_opt(&target.name)
        .await
        .map_err(ObjectError::Request)?;
    Ok(object.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
}

pub(super) async fn events_about(
    client: &Client,
    target: &Target,
) -> Result<Vec<Value>, ObjectError> {
    let resource = find_resource(client, &target.resource).await?;
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        if resource.namespaced {
            target.namespace_or_default()
        } else {
            "default"
        },
        &kube::api::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Event".into(),
            plural: "events".into(),
        },
    );
    let list = events
        .list(&ListParams::default())
        .await
        .map_err(ObjectError::Request)?;
    Ok(list
        .items
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .filter(|e| {
            e.pointer("/involvedObject/name").and_then(Value::as_str) == Some(&target.name)
                && e.pointer("/involvedObject/kind").and_then(Value::as_str) == Some(&resource.kind)
        })
        .collect())
}
