//! The scale subresource (`<resource>/scale`, what `kubectl scale` and autoscalers use):
//! GET, PUT and PATCH of an object seen and changed as an `autoscaling/v1` Scale.

use axum::response::Response;
use http::Method;

use super::{Call, parse_object};
use crate::objects::{Fields, present};
use crate::patch::PatchType;
use crate::status::{ApiError, json_response};

/// GET, PUT or PATCH of the object `name` as a Scale.
pub(super) fn scale(call: &Call<'_>, name: Option<&str>) -> Result<Response, ApiError> {
    let scope = &call.scope;
    let paths =
        crate::scale::paths(&call.shared.lock(), &scope.rt).ok_or_else(|| call.not_served())?;
    let name = name.ok_or_else(|| call.not_served())?;
    let (ct, body) = (call.content_type, call.body);
    let mut store = call.shared.lock();
    let current = store
        .get(&scope.res(), &scope.key(name))
        .map(|o| present(&scope.rt, o))
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    let scale = crate::scale::to_scale(&current, &paths);
    let wanted = match *call.method {
        Method::GET => return Ok(json_response(200, &scale)),
        Method::PUT => parse_object(ct, body)?,
        Method::PATCH => {
            let ty = PatchType::from_content_type(ct)?;
            crate::patch::apply(ty, scale, body)?
        }
        _ => {
            return Err(ApiError::method_not_allowed(&format!(
                "{} on a scale subresource",
                call.method
            )));
        }
    };
    let new = crate::scale::apply_scale(scope, name, &current, &wanted, &paths)?;
    let updated = crate::objects::commit_update(
        &mut store,
        scope,
        name,
        new,
        false,
        call.dry,
        Fields::Update(&call.who),
    )?;
    Ok(json_response(
        200,
        &crate::scale::to_scale(&updated, &paths),
    ))
}
