//! `componentstatuses` (core `v1`, deprecated since Kubernetes 1.19, what `kubectl get
//! cs` reads): kube-apiserver's health of the control plane's parts, not stored. This
//! server is its own etcd, scheduler and controller manager, so every part is healthy
//! while it answers.

use super::Call;
use crate::field_validation::with_warnings;
use crate::status::{ApiError, Target, json_response};
use crate::table::{Columns, View};
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};

/// kube's parts, as kube-apiserver names them.
const PARTS: [&str; 3] = ["scheduler", "controller-manager", "etcd-0"];

/// The warning kube sends with every answer of a deprecated API.
const DEPRECATED: &str = "v1 ComponentStatus is deprecated in v1.19+";

fn status(name: &str) -> Value {
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": null},
        "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
    })
}

/// GET of the list or of one part; other methods (and watches) are not served, as kube
/// serves only get and list.
pub(super) fn serve(
    call: &Call<'_>,
    method: &Method,
    name: Option<&str>,
    watch: bool,
) -> Result<Response, ApiError> {
    if *method != Method::GET || watch {
        return Err(ApiError::method_not_allowed(&format!(
            "{method} on this resource"
        )));
    }
    let items: Vec<Value> = match name {
        Some(name) if PARTS.contains(&name) => vec![status(name)],
        Some(name) => {
            return Err(ApiError::not_found(Target {
                group: "",
                plural: "componentstatus",
                name,
            }));
        }
        None => PARTS.iter().map(|p| status(p)).collect(),
    };
    let out = match (call.view, name) {
        (View::Table, _) => {
            let columns = Columns::new(
                &call.shared.lock(),
                &call.scope,
                call.query.get("includeObject").map(String::as_str),
            );
            columns.table(&call.scope, &items, json!({}))
        }
        (_, Some(_)) => items.into_iter().next().unwrap_or_default(),
        (_, None) => json!({
            "kind": "ComponentStatusList",
            "apiVersion": "v1",
            "metadata": {},
            "items": items,
        }),
    };
    Ok(with_warnings(
        json_response(200, &out),
        &[DEPRECATED.into()],
    ))
}
