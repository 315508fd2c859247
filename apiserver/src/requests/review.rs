//! The reviews a user asks about itself, not stored: SelfSubjectAccessReview (`POST
//! /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, what `kubectl auth can-i`
//! asks): whether the requesting user may do what the review describes, decided by the
//! same authorizer as every request; SelfSubjectReview (`POST
//! /apis/authentication.k8s.io/v1/selfsubjectreviews`, what `kubectl auth whoami` asks):
//! the user as the server's authentication knows it, its name and groups; TokenReview
//! (`POST /apis/authentication.k8s.io/v1/tokenreviews`, what webhook authenticators and
//! kube-rbac-proxy ask): whose a token is, by the server's own authentication.

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

/// Answers a SelfSubjectReview for `user`, as kube's `selfsubjectreview` storage does:
/// the body must be a SelfSubjectReview (its content is otherwise ignored), and the
/// answer carries the user's name and groups (this server's users have no uid and no
/// extra fields, which kube leaves out when empty).
pub(super) fn self_subject_review(user: &User, review: &Value) -> Result<Response, ApiError> {
    let kind = review.get("kind").and_then(Value::as_str);
    let api_version = review.get("apiVersion").and_then(Value::as_str);
    if !matches!(kind, Some("SelfSubjectReview") | None)
        || !matches!(api_version, Some("authentication.k8s.io/v1") | None)
    {
        return Err(ApiError::bad_request(format!(
            "not a SelfSubjectReview: {}",
            kind.unwrap_or("")
        )));
    }
    let out = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": crate::meta::now()},
        "status": {"userInfo": {"username": user.name, "groups": user.groups}},
    });
    Ok(json_response(201, &out))
}

/// Answers a TokenReview as kube's `tokenreview` storage does: the token is
/// authenticated by the server's own authenticators for the review's audiences (the API
/// server's when it names none); a token that is not good is `authenticated` false with
/// the authenticator's error, not an error of the request.
pub(super) fn token_review(shared: &Shared, review: &Value) -> Result<Response, ApiError> {
    let kind = review.get("kind").and_then(Value::as_str);
    if !matches!(kind, Some("TokenReview") | None) {
        return Err(ApiError::bad_request(format!(
            "not a TokenReview: {}",
            kind.unwrap_or("")
        )));
    }
    let spec = review.get("spec").cloned().unwrap_or(json!({}));
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences = super::token::audiences_of(&spec);
    let reviewed = shared.auth.review(&shared.lock(), token, &audiences);
    let status = match reviewed {
        Ok(r) => {
            let mut user = json!({"username": r.user.name, "groups": r.user.groups});
            if !r.uid.is_empty() {
                user["uid"] = json!(r.uid);
            }
            if let Some(id) = r.credential_id {
                user["extra"] = json!({"authentication.kubernetes.io/credential-id": [id]});
            }
            json!({"authenticated": true, "user": user, "audiences": r.audiences})
        }
        Err(error) => json!({"user": {}, "error": error}),
    };
    let out = json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    Ok(json_response(201, &out))
}
