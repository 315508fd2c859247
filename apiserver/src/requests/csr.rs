//! The `approval` subresource of CertificateSigningRequests (`certificates.k8s.io/v1`,
//! what `kubectl certificate approve|deny` updates): a PUT or PATCH changes only
//! `status.conditions`, checked as kube's approval validation checks them.

use super::{Call, answer_written, parse_object, reads};
use crate::meta::now;
use crate::objects::csr::{check_approval, conditions, with_timestamps};
use crate::objects::{Fields, commit_update};
use crate::patch::PatchType;
use crate::status::ApiError;
use axum::response::Response;
use http::Method;
use serde_json::json;

/// GET or PUT of `certificatesigningrequests/NAME/approval`.
pub(super) fn approval(call: &Call<'_>, method: &Method, name: &str) -> Result<Response, ApiError> {
    match *method {
        Method::GET => reads::get(call, name),
        Method::PUT | Method::PATCH => update_approval(call, method, name),
        _ => Err(ApiError::method_not_allowed(&format!(
            "{method} on this resource"
        ))),
    }
}

/// PUT or PATCH (JSON, merge or strategic merge; not server-side apply) of the approval:
/// the stored request with the new version's conditions.
fn update_approval(call: &Call<'_>, method: &Method, name: &str) -> Result<Response, ApiError> {
    let scope = &call.scope;
    let mut store = call.shared.lock();
    let old = crate::objects::get(&store, scope, name)?;
    let body = if *method == Method::PATCH {
        match PatchType::from_content_type(call.content_type)? {
            PatchType::Apply => return Err(ApiError::unsupported_media_type(call.content_type)),
            ty => crate::patch::apply(ty, old.clone(), call.body)?,
        }
    } else {
        parse_object(call.content_type, call.body)?
    };
    let old_conditions = conditions(&old);
    let mut new_conditions = conditions(&body);
    with_timestamps(&mut new_conditions, &old_conditions, &now());
    let causes = check_approval(&new_conditions, &old_conditions);
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            scope.target(name),
            "CertificateSigningRequest.certificates.k8s.io",
            &causes,
        ));
    }
    let mut new = old;
    new["status"]["conditions"] = json!(new_conditions);
    let rv = crate::meta::meta_str(&body, "resourceVersion");
    if !rv.is_empty() {
        new["metadata"]["resourceVersion"] = json!(rv);
    }
    let written = commit_update(
        &mut store,
        scope,
        name,
        new,
        true,
        call.dry,
        Fields::Update(&call.who),
    )?;
    Ok(answer_written(call, 200, &written, &[]))
}
