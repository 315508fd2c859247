//! SelfSubjectAccessReview (`POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`,
//! what `kubectl auth can-i` asks): whether the requesting user may do what the review
//! describes, decided by the same authorizer as every request.

use crate::auth::User;
use crate::rbac::{Attributes, Target};
use crate::state::Shared;
use crate::status::{ApiError, json_response};
use axum::response::Response;
use serde_json::{Value, json};

/// Answers a review for `user` (None: RBAC is off, and everything is allowed).
pub(super) fn self_subject_access_review(
    shared: &Shared,
    user: Option<&User>,
    review: &Value,
) -> Result<Response, ApiError> {
    let spec = review.get("spec").cloned().unwrap_or(json!({}));
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let attributes = match (
        spec.get("resourceAttributes").filter(|v| !v.is_null()),
        spec.get("nonResourceAttributes").filter(|v| !v.is_null()),
    ) {
        (Some(r), None) => Attributes {
            verb: text(r, "verb"),
            target: Target::Resource {
                group: text(r, "group"),
                resource: text(r, "resource"),
                subresource: text(r, "subresource"),
                namespace: text(r, "namespace"),
                name: text(r, "name"),
            },
        },
        (None, Some(n)) => Attributes {
            verb: text(n, "verb"),
            target: Target::Path(text(n, "path")),
        },
        _ => {
            return Err(ApiError::invalid(
                crate::status::Target {
                    group: "authorization.k8s.io",
                    plural: "SelfSubjectAccessReview",
                    name: "",
                },
                "SelfSubjectAccessReview.authorization.k8s.io",
                &[(
                    "spec.resourceAttributes".into(),
                    "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
                )],
            ));
        }
    };
    let verdict = match user {
        None => Ok(()),
        Some(user) => crate::rbac::authorize(&shared.lock(), user, &attributes),
    };
    let status = match verdict {
        Ok(()) => json!({"allowed": true}),
        Err(reason) if reason.is_empty() => json!({"allowed": false}),
        Err(reason) => json!({"allowed": false, "reason": reason}),
    };
    let out = json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    Ok(json_response(201, &out))
}
