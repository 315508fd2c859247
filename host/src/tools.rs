//! What the `kapsel` command's developer tools ask of the library: the handlers a guest
//! declares (`kapsel inspect`) and the RBAC an operator of guests needs (`kapsel rbac`,
//! [`RbacRequest`]).

use std::path::{Path, PathBuf};

use crate::Error;
use crate::cluster::Scope;
use crate::limits::Limits;
use crate::runtime::{self, Runtime};

/// The handlers a guest declares, as JSON (what `kapsel inspect` prints).
///
/// # Errors
/// [`Error::NoGuests`] with the reason the guest cannot be loaded, naming the file;
/// [`Error::Runtime`] when the WebAssembly engine cannot start.
pub async fn inspect(guest: &Path) -> Result<serde_json::Value, Error> {
    let runtime = Runtime::new(Limits::default()).map_err(|e| Error::Runtime(Box::new(e)))?;
    let guest = runtime
        .load(guest)
        .await
        .map_err(|e| Error::NoGuests(vec![e.to_string()]))?;
    Ok(runtime::describe_json(guest.describe()))
}

/// What `kapsel rbac` is asked: the guests, the ServiceAccount that runs them, and how
/// the operator runs (`kapsel run`'s `-n` and peering flags), which decides where and
/// which permissions it needs.
#[derive(Debug, Clone)]
pub struct RbacRequest {
    guests: Vec<PathBuf>,
    service_account: String,
    namespace: String,
    namespaces: Vec<String>,
    /// The peering object (`default` unless `--peering` names another); `None` standalone.
    peering: Option<String>,
}

impl RbacRequest {
    /// For these guests (`.wasm` files or directories of them), run by the
    /// ServiceAccount `kapsel` in `default`, cluster-wide, peering as `kapsel run` does
    /// by default.
    pub fn new(guests: impl IntoIterator<Item = impl Into<PathBuf>>) -> RbacRequest {
        RbacRequest {
            guests: guests.into_iter().map(Into::into).collect(),
            service_account: "kapsel".to_owned(),
            namespace: "default".to_owned(),
            namespaces: Vec::new(),
            peering: Some("default".to_owned()),
        }
    }

    /// The ServiceAccount's name (also the roles' and the bindings') and namespace.
    #[must_use]
    pub fn service_account(
        mut self,
        name: impl Into<String>,
        namespace: impl Into<String>,
    ) -> RbacRequest {
        self.service_account = name.into();
        self.namespace = namespace.into();
        self
    }

    /// The operator serves only these namespaces (`kapsel run -n`: names, or Kopf's
    /// globs); none means cluster-wide.
    #[must_use]
    pub fn namespaces(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> RbacRequest {
        self.namespaces = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// The operator runs `--standalone`: no peering resources are granted.
    #[must_use]
    pub fn standalone(mut self) -> RbacRequest {
        self.peering = None;
        self
    }

    /// The operator peers through the peering object of this name (`--peering NAME`),
    /// not `default`.
    #[must_use]
    pub fn peering(mut self, name: impl Into<String>) -> RbacRequest {
        self.peering = Some(name.into());
        self
    }
}

/// The RBAC manifests that an operator of the request's guests needs on the cluster
/// `client` talks to, as YAML (what `kapsel rbac` prints): a ServiceAccount, a
/// ClusterRole and its binding, and a Role and its binding in each namespace named with
/// `-n`. The guests' selectors and permissions are resolved by that cluster's
/// discovery; those that resolve to nothing are named in a comment.
///
/// # Errors
/// [`Error::NoGuests`] when a guest cannot be loaded (naming the file), else what
/// failed (the runtime, discovery).
pub async fn rbac(request: &RbacRequest, client: kube::Client) -> Result<String, Error> {
    let runtime = Runtime::new(Limits::default()).map_err(|e| Error::Runtime(Box::new(e)))?;
    let (loaded, errors) = runtime.load_all(&request.guests).await;
    if !errors.is_empty() || loaded.is_empty() {
        return Err(Error::NoGuests(
            errors.iter().map(ToString::to_string).collect(),
        ));
    }
    let needs = crate::rbac::guest_needs(&client, &loaded)
        .await
        .map_err(|e| Error::Operator(Box::new(e)))?;
    Ok(crate::rbac::manifests(
        &needs,
        &crate::rbac::Subject {
            name: request.service_account.clone(),
            namespace: request.namespace.clone(),
        },
        &crate::rbac::Mode {
            scope: Scope::from_patterns(&request.namespaces),
            peering: request.peering.clone(),
        },
    ))
}
