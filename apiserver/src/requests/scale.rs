//! The scale subresource (`<resource>/scale`, what `kubectl scale` and autoscalers use):
//! GET, PUT and PATCH of an object seen and changed as an `autoscaling/v1` Scale.

use axum::response::Response;
use http::Method;

use super::{Call, parse_object};
use crate::objects::{Fields, present};
use crate::patch::PatchType;
use crate::status::{ApiError, json_response};

/// GET, PUT or PATCH of the object `name` as a Scale; a change admitted by the webhooks
/// of `<resource>/scale` (the objects sent as `autoscaling/v1` Scales, as kube does).
pub(super) async fn scale(call: &Call<'_>, name: Option<&str>) -> Result<Response, ApiError> {
    let scope = &call.scope;
    let paths =
        crate::scale::paths(&call.shared.lock(), &scope.rt).ok_or_else(|| call.not_served())?;
    let name = name.ok_or_else(|| call.not_served())?;
    let (ct, body) = (call.content_type, call.body);
    let current = call
        .shared
        .lock()
        .get(&scope.res(), &scope.key(name))
        .map(|o| present(&scope.rt, o))
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    let scale = crate::scale::to_scale(&current, &paths);
    let mut wanted = match *call.method {
        Method::GET => return Ok(json_response(200, &scale)),
        Method::PUT => parse_object(ct, body)?,
        Method::PATCH => {
            let ty = PatchType::from_content_type(ct)?;
            crate::patch::apply(ty, scale.clone(), body)?
        }
        _ => {
            return Err(ApiError::method_not_allowed(&format!(
                "{} on a scale subresource",
                call.method
            )));
        }
    };
    let mut warnings = Vec::new();
    super::admitted::scale(call, name, &mut wanted, &scale, &mut warnings).await?;
    let new = crate::scale::apply_scale(scope, name, &current, &wanted, &paths)?;
    let updated = crate::objects::commit_update(
        &mut call.shared.lock(),
        scope,
        name,
        new,
        false,
        call.dry,
        Fields::Update(&call.who),
    )?;
    let answer = json_response(200, &crate::scale::to_scale(&updated, &paths));
    Ok(crate::field_validation::with_warnings(answer, &warnings))
}
