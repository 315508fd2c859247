//! Tests of the OpenAPI documents: v2 and v3 shapes, built-in and CRD schemas, fields.

use super::*;

fn rt(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> ResourceType {
    ResourceType {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
        singular: kind.to_lowercase(),
        short_names: vec![],
        categories: vec![],
        namespaced,
        verbs: [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
        .map(String::from)
        .to_vec(),
        has_status: false,
        preferred: true,
        schema: None,
        custom: false,
        kind_schema: Default::default(),
    }
}

fn kopf_example(schema: Value) -> ResourceType {
    ResourceType {
        has_status: true,
        schema: Some(schema),
        custom: true,
        short_names: vec!["kex".to_owned()],
        ..rt("kopf.dev", "v1", "KopfExample", "kopfexamples", true)
    }
}

fn kopf_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    })
}

fn table() -> Vec<ResourceType> {
    vec![
        rt("", "v1", "Pod", "pods", true),
        rt("", "v1", "ConfigMap", "configmaps", true),
        rt("", "v1", "Namespace", "namespaces", false),
        rt("", "v1", "Service", "services", true),
        rt("", "v1", "Secret", "secrets", true),
        rt("", "v1", "ServiceAccount", "serviceaccounts", true),
        rt("", "v1", "Event", "events", true),
        rt("", "v1", "Endpoints", "endpoints", true),
        rt("events.k8s.io", "v1", "Event", "events", true),
        rt("coordination.k8s.io", "v1", "Lease", "leases", true),
        rt("apps", "v1", "Deployment", "deployments", true),
        rt("apps", "v1", "ReplicaSet", "replicasets", true),
        rt(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        ),
        kopf_example(kopf_schema()),
    ]
}

/// The component schema carrying the GVK (an array, as kube has it).
fn schema_of_kind<'a>(doc: &'a Value, group: &str, version: &str, kind: &str) -> Option<&'a Value> {
    doc["components"]["schemas"]
        .as_object()?
        .values()
        .find(|s| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|a| {
                    a.iter()
                        .any(|g| g == &json!({"group": group, "kind": kind, "version": version}))
                })
        })
}

/// The PATCH operation for a GVK (the GVK is a single object on operations).
fn patch_op<'a>(doc: &'a Value, group: &str, version: &str, kind: &str) -> Option<&'a Value> {
    doc["paths"].as_object()?.iter().find_map(|(path, item)| {
        let op = item.get("patch")?;
        (!path.ends_with("/status")
            && op["x-kubernetes-group-version-kind"]
                == json!({"group": group, "version": version, "kind": kind}))
        .then_some(op)
    })
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let r = schema["allOf"][0]["$ref"]
        .as_str()
        .or(schema["$ref"].as_str());
    match r.and_then(|r| r.strip_prefix(REF_PREFIX)) {
        Some(name) => &doc["components"]["schemas"][name],
        None => schema,
    }
}

#[test]
fn every_kind_has_its_schema_and_a_patch_with_field_validation() {
    let table = table();
    for r in &table {
        let doc = v3_group_version(&table, &r.group, &r.version).expect("served group-version");
        let schema = schema_of_kind(&doc, &r.group, &r.version, &r.kind)
            .unwrap_or_else(|| panic!("no schema for {}", r.kind));
        for field in ["apiVersion", "kind", "metadata"] {
            assert!(
                schema["properties"].get(field).is_some(),
                "{}: {field}",
                r.kind
            );
        }
        let meta = resolve(&doc, &schema["properties"]["metadata"]);
        assert!(
            meta["properties"]["labels"].is_object(),
            "{}: ObjectMeta resolved",
            r.kind
        );
        assert!(
            schema_of_kind(&doc, &r.group, &r.version, &format!("{}List", r.kind)).is_some(),
            "{}List",
            r.kind
        );
        let op = patch_op(&doc, &r.group, &r.version, &r.kind)
            .unwrap_or_else(|| panic!("no PATCH for {}", r.kind));
        let params = op["parameters"].as_array().expect("parameters");
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        let smp = op["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_some();
        assert_eq!(
            smp, !r.custom,
            "{}: strategic merge patch only for built-ins",
            r.kind
        );
    }
}

#[test]
fn every_reference_resolves() {
    let table = table();
    for (g, v) in group_versions(&table) {
        let doc = v3_group_version(&table, &g, &v).expect("doc");
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        for name in refs {
            assert!(
                doc["components"]["schemas"].get(&name).is_some(),
                "{g}/{v}: dangling {name}"
            );
        }
    }
    let swagger = v2(&table);
    let text = swagger.to_string();
    assert!(
        !text.contains("#/components/"),
        "v2 must use #/definitions/"
    );
    for (_, item) in swagger["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            if method != "parameters" {
                assert!(op["parameters"].is_array(), "{method}");
            }
        }
    }
}

#[test]
fn strategic_merge_extensions_on_pod_lists() {
    let table = table();
    let doc = v3_group_version(&table, "", "v1").expect("core");
    let s = &doc["components"]["schemas"];
    let container = &s["io.k8s.api.core.v1.Container"]["properties"];
    for (list, key) in [
        ("env", "name"),
        ("ports", "containerPort"),
        ("volumeMounts", "mountPath"),
    ] {
        assert_eq!(
            container[list]["x-kubernetes-patch-merge-key"], key,
            "{list}"
        );
        assert_eq!(
            container[list]["x-kubernetes-patch-strategy"], "merge",
            "{list}"
        );
    }
    let pod_spec = &s["io.k8s.api.core.v1.PodSpec"]["properties"];
    assert_eq!(
        pod_spec["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert_eq!(
        pod_spec["volumes"]["x-kubernetes-patch-strategy"],
        "merge,retainKeys"
    );
    let svc = schema_of_kind(&doc, "", "v1", "Service").expect("Service");
    assert_eq!(
        svc["properties"]["spec"]["properties"]["ports"]["x-kubernetes-patch-merge-key"],
        "port"
    );
    let meta = &s[format!("{META}.ObjectMeta")]["properties"];
    assert_eq!(
        meta["ownerReferences"]["x-kubernetes-patch-merge-key"],
        "uid"
    );

    let apps = v3_group_version(&table, "apps", "v1").expect("apps");
    let depl = schema_of_kind(&apps, "apps", "v1", "Deployment").expect("Deployment");
    let template = resolve(&apps, &depl["properties"]["spec"]["properties"]["template"]);
    let spec = resolve(&apps, &template["properties"]["spec"]);
    assert_eq!(
        spec["properties"]["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
}

#[test]
fn crd_schema_is_embedded_with_type_meta() {
    let table = table();
    let doc = v3_group_version(&table, "kopf.dev", "v1").expect("kopf.dev");
    let schema = schema_of_kind(&doc, "kopf.dev", "v1", "KopfExample").expect("KopfExample");
    assert_eq!(
        schema["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    assert_eq!(schema["properties"]["apiVersion"]["type"], "string");
    assert_eq!(
        schema["properties"]["metadata"]["allOf"][0]["$ref"],
        format!("{REF_PREFIX}{META}.ObjectMeta")
    );
    assert!(
        doc["paths"]
            .get("/apis/kopf.dev/v1/namespaces/{namespace}/kopfexamples/{name}/status")
            .is_some()
    );
    assert!(doc["paths"].get("/apis/kopf.dev/v1/kopfexamples").is_some());
    assert!(
        doc["components"]["schemas"]
            .get("dev.kopf.v1.KopfExample")
            .is_some()
    );
    // Only this group-version's kinds are in it.
    assert!(schema_of_kind(&doc, "", "v1", "Pod").is_none());
    assert_eq!(v3_group_version(&table, "kopf.dev", "v2"), None);
    assert_eq!(v3_group_version(&table, "nope", "v1"), None);
}

#[test]
fn index_lists_group_versions_and_hash_tracks_content() {
    let table = table();
    let index = v3_index(&table);
    let paths = index["paths"].as_object().expect("paths");
    for key in [
        "api/v1",
        "apis/apps/v1",
        "apis/kopf.dev/v1",
        "apis/events.k8s.io/v1",
    ] {
        let url = paths[key]["serverRelativeURL"].as_str().expect("url");
        assert!(
            url.starts_with(&format!("/openapi/v3/{key}?hash=")),
            "{url}"
        );
    }
    // Stable: same content, any order, same hashes.
    let mut reversed = table.clone();
    reversed.reverse();
    assert_eq!(v3_index(&reversed), index);
    assert_eq!(v3_index(&table), index);

    // A changed CRD schema changes its group-version's hash only.
    let mut changed = table.clone();
    let last = changed.len() - 1;
    changed[last] =
        kopf_example(json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
    let changed_index = v3_index(&changed);
    assert_ne!(
        changed_index["paths"]["apis/kopf.dev/v1"],
        index["paths"]["apis/kopf.dev/v1"]
    );
    assert_eq!(changed_index["paths"]["api/v1"], index["paths"]["api/v1"]);

    // Dropping a CRD drops its entry.
    changed.pop();
    assert!(
        v3_index(&changed)["paths"]
            .get("apis/kopf.dev/v1")
            .is_none()
    );
}

#[test]
fn v2_has_gvk_definitions_and_patch_parameters() {
    let table = table();
    let doc = v2(&table);
    assert_eq!(doc["swagger"], "2.0");
    let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
    assert_eq!(
        pod["properties"]["metadata"]["$ref"],
        format!("#/definitions/{META}.ObjectMeta")
    );
    let op = &doc["paths"]["/apis/kopf.dev/v1/namespaces/{namespace}/kopfexamples/{name}"]["patch"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "KopfExample");
    let params = op["parameters"].as_array().expect("params");
    assert!(
        params
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["type"] == "string")
    );
    assert!(params.iter().any(|p| p["in"] == "body"));
    assert!(doc["definitions"]["dev.kopf.v1.KopfExample"].is_object());
}

#[test]
fn names_follow_kube_conventions() {
    use schemas::definition_name as n;
    assert_eq!(n("", "v1", "Pod"), "io.k8s.api.core.v1.Pod");
    assert_eq!(
        n("apps", "v1", "Deployment"),
        "io.k8s.api.apps.v1.Deployment"
    );
    assert_eq!(
        n("events.k8s.io", "v1", "Event"),
        "io.k8s.api.events.v1.Event"
    );
    assert_eq!(
        n("rbac.authorization.k8s.io", "v1", "Role"),
        "io.k8s.api.rbac.v1.Role"
    );
    assert_eq!(
        n("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
    );
    assert_eq!(
        n("kopf.dev", "v1", "KopfExample"),
        "dev.kopf.v1.KopfExample"
    );
}

#[test]
fn crd_without_schema_and_builtin_without_handwritten_schema_are_open() {
    let mut custom = kopf_example(json!(null));
    custom.schema = None;
    let endpoints = rt("", "v1", "Endpoints", "endpoints", true);
    for r in [custom, endpoints] {
        let table = vec![r.clone()];
        let doc = v3_group_version(&table, &r.group, &r.version).expect("doc");
        let s = schema_of_kind(&doc, &r.group, &r.version, &r.kind).expect("schema");
        assert_eq!(s["x-kubernetes-preserve-unknown-fields"], true);
        assert!(s["properties"]["metadata"].is_object());
    }
}
