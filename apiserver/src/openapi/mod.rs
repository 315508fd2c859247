//! OpenAPI documents (`/openapi/v2`, `/openapi/v3`) built from the served resource types.

use crate::registry::ResourceType;
use serde_json::{Value, json};

/// The whole Swagger 2.0 document served at `/openapi/v2`.
pub(crate) fn v2(_resources: &[ResourceType]) -> Value {
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": {}, "definitions": {}})
}

/// The `/openapi/v3` discovery index: one entry per group-version.
pub(crate) fn v3_index(_resources: &[ResourceType]) -> Value {
    json!({"paths": {}})
}

/// The OpenAPI v3 document of one group-version (`/openapi/v3/api/v1`,
/// `/openapi/v3/apis/<group>/<version>`); None when nothing is served there.
pub(crate) fn v3_group_version(
    _resources: &[ResourceType],
    _group: &str,
    _version: &str,
) -> Option<Value> {
    None
}
