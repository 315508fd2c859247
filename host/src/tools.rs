//! What the `kapsel` command's developer tools ask of the library: the handlers a guest
//! declares (`kapsel inspect`) and the RBAC an operator of guests needs (`kapsel rbac`).

use std::path::{Path, PathBuf};

use crate::Error;
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

/// The RBAC manifests (a ServiceAccount, a ClusterRole, its binding) that an operator of
/// these guests needs on the cluster `client` talks to, as YAML (what `kapsel rbac`
/// prints). The guests' selectors and permissions are resolved by that cluster's
/// discovery; those that resolve to nothing are named in a comment.
///
/// # Errors
/// [`Error::NoGuests`] when a guest cannot be loaded (naming the file), else what
/// failed (the runtime, discovery).
pub async fn rbac(
    guests: &[PathBuf],
    client: kube::Client,
    service_account: &str,
    namespace: &str,
) -> Result<String, Error> {
    let runtime = Runtime::new(Limits::default()).map_err(|e| Error::Runtime(Box::new(e)))?;
    let (loaded, errors) = runtime.load_all(guests).await;
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
            name: service_account.to_owned(),
            namespace: namespace.to_owned(),
        },
    ))
}
