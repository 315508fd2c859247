//! `kapsel rbac --crd FILE...`: an in-process API server that serves the built-in
//! resources and the CRDs of the given files, so that the guests' selectors resolve as
//! they will on the cluster, without one.

use std::path::{Path, PathBuf};

use kapsel_apiserver::ApiServer;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

/// Why the offline cluster is not there.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OfflineError {
    /// The in-process API server did not start (not the input's fault).
    #[error("cannot start the in-process API server: {0}")]
    Start(String),
    /// A CRD file cannot be read.
    #[error("cannot read the CRD file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    /// A CRD file is not YAML.
    #[error("the CRD file {} is not YAML: {reason}", path.display())]
    NotYaml { path: PathBuf, reason: String },
    /// A CRD file holds no CRD.
    #[error(
        "the CRD file {} holds no CustomResourceDefinition (apiextensions.k8s.io/v1)",
        path.display()
    )]
    NoCrd { path: PathBuf },
    /// The API server refused a CRD, as a cluster would.
    #[error("the CRD file {}: {name} is refused: {reason}", path.display())]
    Refused {
        path: PathBuf,
        name: String,
        reason: String,
    },
}

impl OfflineError {
    /// Whether the input is at fault (the command exits 2 then, else 1).
    pub(crate) fn is_input_error(&self) -> bool {
        !matches!(self, OfflineError::Start(_))
    }
}

/// An in-process API server with the CRDs of `files` created, and a client of it. The
/// server stops when it is dropped.
///
/// # Errors
/// A file that cannot be read, is not YAML, holds no CRD or one the server refuses (each
/// naming the file); a server that does not start.
pub(crate) async fn cluster(files: &[PathBuf]) -> Result<(ApiServer, kube::Client), OfflineError> {
    let mut crds = Vec::new();
    for path in files {
        let found = crds_in(path)?;
        if found.is_empty() {
            return Err(OfflineError::NoCrd { path: path.clone() });
        }
        crds.extend(found.into_iter().map(|crd| (path, crd)));
    }
    let start = |e: &dyn std::error::Error| OfflineError::Start(kapsel_host::error_chain(e));
    // Only its discovery of the CRDs is read: no node or kubelet is needed.
    let server = ApiServer::start(kapsel_apiserver::Config::default().kubelet(false))
        .await
        .map_err(|e| start(&e))?;
    let client = kapsel_host::testing::client_for(&server.url()).map_err(|e| start(&e))?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    for (path, crd) in crds {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or("a CRD without a name")
            .to_owned();
        let refused = |reason: String| OfflineError::Refused {
            path: path.clone(),
            name: name.clone(),
            reason,
        };
        let object: DynamicObject =
            serde_json::from_value(crd).map_err(|e| refused(e.to_string()))?;
        api.create(&PostParams::default(), &object)
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => refused(status.message),
                other => start(&other),
            })?;
    }
    Ok((server, client))
}

/// The CustomResourceDefinitions of a YAML file; other documents are skipped (a file of
/// CRDs often carries objects of them too).
fn crds_in(path: &Path) -> Result<Vec<Value>, OfflineError> {
    let text = std::fs::read_to_string(path).map_err(|e| OfflineError::Unreadable {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let mut crds = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value =
            serde::Deserialize::deserialize(document).map_err(|e| OfflineError::NotYaml {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        if value["kind"] == "CustomResourceDefinition"
            && value["apiVersion"] == "apiextensions.k8s.io/v1"
        {
            crds.push(value);
        }
    }
    Ok(crds)
}

fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}
