//! The `paths` of an OpenAPI v3 group-version document, shaped like
//! kube-apiserver's: one path item per collection, item and subresource, with
//! `x-kubernetes-action` and `x-kubernetes-group-version-kind` on every
//! operation.
//!
//! The `fieldValidation` query parameter on the PATCH operation is the signal
//! kubectl looks for (`supportsQueryParamV3`): when present, kubectl leaves
//! schema validation to the server and sends `?fieldValidation=Strict`.

use serde_json::{Map, Value, json};

use super::schemas::{META, REF_PREFIX};
use crate::registry::ResourceType;

/// The patch content types of every resource, and strategic merge patch for
/// the built-ins (kube does not offer it for custom resources; kubectl then
/// computes a JSON merge patch instead).
fn patch_types(custom: bool) -> Vec<&'static str> {
    let mut types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if !custom {
        types.push("application/strategic-merge-patch+json");
    }
    types.push("application/apply-patch+yaml");
    types
}

fn query(name: &str, ty: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": ty, "uniqueItems": true},
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn dry_run() -> Value {
    query(
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid values: All.",
    )
}

fn field_manager() -> Value {
    query(
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    )
}

fn field_validation() -> Value {
    query(
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request containing \
         unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
    )
}

fn write_params() -> Vec<Value> {
    vec![dry_run(), field_manager(), field_validation()]
}

fn list_params() -> Vec<Value> {
    vec![
        query(
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
        ),
        query(
            "continue",
            "string",
            "The continue option should be set when retrieving more results from the server.",
        ),
        query(
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields.",
        ),
        query(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels.",
        ),
        query(
            "limit",
            "integer",
            "limit is a maximum number of responses to return for a list call.",
        ),
        query(
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        ),
        query(
            "sendInitialEvents",
            "boolean",
            "sendInitialEvents=true may be set together with watch=true.",
        ),
        // kube-apiserver lists ListOptions' fields whatever its feature gates say.
        query(
            "shardSelector",
            "string",
            "shardSelector restricts the list of returned objects using a CEL-based shard selector expression: shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'), ranges joined by ||.",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call.",
        ),
        query(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
        ),
    ]
}

fn delete_params() -> Vec<Value> {
    vec![
        dry_run(),
        query(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        query(
            "orphanDependents",
            "boolean",
            "Deprecated: please use the PropagationPolicy.",
        ),
        query(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection will be performed: Orphan, Background, Foreground.",
        ),
    ]
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}

fn json_content(schema: &Value) -> Value {
    json!({
        "application/json": {"schema": schema},
        "application/yaml": {"schema": schema},
    })
}

fn responses(codes: &[(&str, &str)], schema: &Value) -> Value {
    let mut out = Map::new();
    for (code, description) in codes {
        out.insert(
            (*code).to_owned(),
            json!({"description": description, "content": json_content(schema)}),
        );
    }
    out.insert("401".to_owned(), json!({"description": "Unauthorized"}));
    Value::Object(out)
}

/// CamelCase of a group for operation ids: `kopf.dev` -> `KopfDev`, `` -> `Core`.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_owned();
    }
    group
        .split(['.', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            cs.next()
                .map(|f| f.to_uppercase().chain(cs).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

struct Op<'a> {
    rt: &'a ResourceType,
    tag: String,
    id_stem: String,
}

impl Op<'_> {
    fn op(
        &self,
        action: &str,
        verb_id: &str,
        description: String,
        params: Vec<Value>,
        body: Option<Value>,
        response: Value,
    ) -> Value {
        let mut op = json!({
            "tags": [self.tag],
            "description": description,
            "operationId": format!("{verb_id}{}", self.id_stem),
            "parameters": params,
            "responses": response,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {
                "group": self.rt.group,
                "version": self.rt.version,
                "kind": self.rt.kind,
            },
        });
        if let Some(body) = body {
            op["requestBody"] = body;
        }
        op
    }
}

fn has(rt: &ResourceType, verb: &str) -> bool {
    rt.verbs.iter().any(|v| v == verb)
}

/// The path items of one resource type, keyed by path.
pub(super) fn paths(rt: &ResourceType, kind_def: &str, list_def: &str) -> Vec<(String, Value)> {
    let prefix = if rt.group.is_empty() {
        format!("/api/{}", rt.version)
    } else {
        format!("/apis/{}/{}", rt.group, rt.version)
    };
    let kind_schema = schema_ref(kind_def);
    let list_schema = schema_ref(list_def);
    let status_schema = schema_ref(&format!("{META}.Status"));
    let scope = if rt.namespaced { "Namespaced" } else { "" };
    let stem = format!(
        "{}{}{scope}{}",
        group_camel(&rt.group),
        group_camel(&rt.version),
        rt.kind
    );
    let o = Op {
        rt,
        tag: format!("{}_{}", group_camel(&rt.group), rt.version),
        id_stem: stem,
    };
    let kind = &rt.kind;
    let body = |schema: &Value| json!({"content": {"*/*": {"schema": schema}}, "required": true});
    let patch_body = {
        let mut content = Map::new();
        for t in patch_types(rt.custom) {
            content.insert(
                t.to_owned(),
                json!({"schema": schema_ref(&format!("{META}.Patch"))}),
            );
        }
        json!({"content": content, "required": true})
    };
    let pretty = query(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    );
    let ns_param = path_param(
        "namespace",
        "object name and auth scope, such as for teams and projects",
    );
    let name_param = path_param("name", &format!("name of the {kind}"));

    let (collection, mut common) = if rt.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural),
            vec![ns_param],
        )
    } else {
        (format!("{prefix}/{}", rt.plural), vec![])
    };
    common.push(pretty.clone());
    let mut out = Vec::new();

    // The collection: list, create, deletecollection.
    let mut item = Map::new();
    item.insert("parameters".into(), json!(common));
    if has(rt, "list") || has(rt, "watch") || rt.verbs.is_empty() {
        item.insert(
            "get".into(),
            o.op(
                "list",
                "list",
                format!("list or watch objects of kind {kind}"),
                list_params(),
                None,
                responses(&[("200", "OK")], &list_schema),
            ),
        );
    }
    if has(rt, "create") || rt.verbs.is_empty() {
        item.insert(
            "post".into(),
            o.op(
                "post",
                "create",
                format!("create a {kind}"),
                write_params(),
                Some(body(&kind_schema)),
                responses(
                    &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                    &kind_schema,
                ),
            ),
        );
    }
    if has(rt, "deletecollection") {
        let mut params = delete_params();
        params.extend(list_params());
        item.insert(
            "delete".into(),
            o.op(
                "deletecollection",
                "deleteCollection",
                format!("delete collection of {kind}"),
                params,
                Some(body(&schema_ref(&format!("{META}.DeleteOptions")))),
                responses(&[("200", "OK")], &status_schema),
            ),
        );
    }
    out.push((collection.clone(), Value::Object(item)));

    // One object: read, replace, patch, delete. PATCH is always published:
    // kubectl's validation looks for it to learn whether the server
    // validates fields, and fails when the kind has no PATCH path at all.
    let mut item_common = vec![name_param];
    item_common.extend(common.iter().cloned());
    let mut item = Map::new();
    item.insert("parameters".into(), json!(item_common));
    item.insert(
        "get".into(),
        o.op(
            "get",
            "read",
            format!("read the specified {kind}"),
            vec![],
            None,
            responses(&[("200", "OK")], &kind_schema),
        ),
    );
    if has(rt, "update") || rt.verbs.is_empty() {
        item.insert(
            "put".into(),
            o.op(
                "put",
                "replace",
                format!("replace the specified {kind}"),
                write_params(),
                Some(body(&kind_schema)),
                responses(&[("200", "OK"), ("201", "Created")], &kind_schema),
            ),
        );
    }
    let mut patch_params = write_params();
    patch_params.push(query(
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests.",
    ));
    item.insert(
        "patch".into(),
        o.op(
            "patch",
            "patch",
            format!("partially update the specified {kind}"),
            patch_params.clone(),
            Some(patch_body.clone()),
            responses(&[("200", "OK"), ("201", "Created")], &kind_schema),
        ),
    );
    if has(rt, "delete") || rt.verbs.is_empty() {
        item.insert(
            "delete".into(),
            o.op(
                "delete",
                "delete",
                format!("delete a {kind}"),
                delete_params(),
                Some(body(&schema_ref(&format!("{META}.DeleteOptions")))),
                responses(&[("200", "OK"), ("202", "Accepted")], &status_schema),
            ),
        );
    }
    out.push((format!("{collection}/{{name}}"), Value::Object(item)));

    // The status subresource.
    if rt.has_status {
        let so = Op {
            rt,
            tag: o.tag.clone(),
            id_stem: format!("{}Status", o.id_stem),
        };
        let mut item = Map::new();
        item.insert("parameters".into(), json!(item_common));
        item.insert(
            "get".into(),
            so.op(
                "get",
                "read",
                format!("read status of the specified {kind}"),
                vec![],
                None,
                responses(&[("200", "OK")], &kind_schema),
            ),
        );
        item.insert(
            "put".into(),
            so.op(
                "put",
                "replace",
                format!("replace status of the specified {kind}"),
                write_params(),
                Some(body(&kind_schema)),
                responses(&[("200", "OK"), ("201", "Created")], &kind_schema),
            ),
        );
        item.insert(
            "patch".into(),
            so.op(
                "patch",
                "patch",
                format!("partially update status of the specified {kind}"),
                patch_params,
                Some(patch_body),
                responses(&[("200", "OK"), ("201", "Created")], &kind_schema),
            ),
        );
        out.push((format!("{collection}/{{name}}/status"), Value::Object(item)));
    }

    // Listing across all namespaces.
    if rt.namespaced && (has(rt, "list") || rt.verbs.is_empty()) {
        let ao = Op {
            rt,
            tag: o.tag.clone(),
            id_stem: format!(
                "{}{}{}ForAllNamespaces",
                group_camel(&rt.group),
                group_camel(&rt.version),
                rt.kind
            ),
        };
        let mut item = Map::new();
        item.insert("parameters".into(), json!([pretty]));
        item.insert(
            "get".into(),
            ao.op(
                "list",
                "list",
                format!("list or watch objects of kind {kind}"),
                list_params(),
                None,
                responses(&[("200", "OK")], &list_schema),
            ),
        );
        out.push((format!("{prefix}/{}", rt.plural), Value::Object(item)));
    }
    out
}
