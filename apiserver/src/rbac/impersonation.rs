//! Impersonation (`Impersonate-User` and `Impersonate-Group` headers, `kubectl --as`,
//! `--as-group`), as kube's impersonation filter does it: the requester needs `impersonate`
//! on each user (or ServiceAccount) and group it acts as, and the request then is the
//! impersonated user's.

use super::{Attributes, Target, authorize, forbidden};
use crate::auth::{AUTHENTICATED, UNAUTHENTICATED, User};
use crate::status::ApiError;
use crate::store::Store;
use http::HeaderMap;

fn attributes(resource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        target: Target::Resource {
            group: String::new(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
        },
    }
}

/// The user a request acts as: `user` itself without impersonation headers.
pub(crate) fn acting_user(
    store: &Store,
    user: User,
    headers: &HeaderMap,
) -> Result<User, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect()
    };
    let name = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let Some(name) = name else {
        if groups.is_empty() {
            return Ok(user);
        }
        return Err(ApiError::bad_request(format!(
            "requested {groups:?} without impersonating a user"
        )));
    };
    let mut checks = Vec::new();
    let sa = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    match sa {
        Some((ns, sa_name)) => checks.push(attributes("serviceaccounts", ns, sa_name)),
        None => checks.push(attributes("users", "", &name)),
    }
    checks.extend(groups.iter().map(|g| attributes("groups", "", g)));
    for a in &checks {
        authorize(store, &user, a).map_err(|reason| forbidden(&user, a, &reason))?;
    }
    let mut acting = match sa {
        Some((ns, sa_name)) if groups.is_empty() => {
            let mut u = User::service_account(ns, sa_name);
            u.groups.retain(|g| g != AUTHENTICATED);
            u
        }
        _ => User {
            name: name.clone(),
            groups,
        },
    };
    if acting.name == "system:anonymous" {
        if !acting.groups.iter().any(|g| g == UNAUTHENTICATED) {
            acting.groups.push(UNAUTHENTICATED.into());
        }
    } else if !acting
        .groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        acting.groups.push(AUTHENTICATED.into());
    }
    Ok(acting)
}
