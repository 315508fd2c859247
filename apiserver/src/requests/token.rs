//! The TokenRequest subresource (`POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`,
//! what `kubectl create token` calls): a signed token of the account, with kube's
//! defaults (an hour; the API server's audience) and checks.

use crate::auth::ISSUER;
use crate::state::Shared;
use crate::status::{ApiError, Target, json_response};
use axum::response::Response;
use serde_json::{Value, json};

const GROUP: &str = "authentication.k8s.io";

fn invalid(field: &str, message: String) -> ApiError {
    let target = Target {
        group: GROUP,
        plural: "TokenRequest",
        name: "",
    };
    let mut e = ApiError::invalid(
        target,
        &format!("TokenRequest.{GROUP}"),
        &[(field.to_string(), message)],
    );
    if let Some(d) = e.details.as_mut() {
        d["kind"] = json!("TokenRequest");
        d["group"] = json!(GROUP);
    }
    e
}

/// Issues a token for `ns/name` from a TokenRequest body.
pub(super) fn create(
    shared: &Shared,
    ns: &str,
    name: &str,
    request: &Value,
) -> Result<Response, ApiError> {
    let spec = request.get("spec").cloned().unwrap_or(json!({}));
    let seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => 3600,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?,
    };
    if seconds < 600 {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > i64::from(u32::MAX) {
        return Err(invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    if spec.get("boundObjectRef").is_some_and(|r| !r.is_null()) {
        return Err(ApiError::bad_request(
            "tokens bound to a Pod or Secret (spec.boundObjectRef) are not supported by this server",
        ));
    }
    let audiences = audiences_of(&spec);
    let body_ns = crate::meta::meta_str(request, "namespace");
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let store = shared.lock();
    let res = (String::new(), "serviceaccounts".to_string());
    let sa = store
        .get(&res, &(ns.to_string(), name.to_string()))
        .ok_or_else(|| {
            ApiError::not_found(Target {
                group: "",
                plural: "serviceaccounts",
                name,
            })
        })?;
    let (token, exp) = shared
        .auth
        .issue(sa, &audiences, seconds)
        .map_err(ApiError::internal)?;
    drop(store);
    let expires = chrono::DateTime::from_timestamp(exp, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    let out = json!({
        "kind": "TokenRequest",
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": crate::meta::now()},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": null},
        "status": {"token": token, "expirationTimestamp": expires},
    });
    Ok(json_response(201, &out))
}

/// The audiences a TokenRequest's or TokenReview's `spec` names, else the API server's
/// own (kube's default for both).
pub(super) fn audiences_of(spec: &Value) -> Vec<String> {
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    if audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        audiences
    }
}
