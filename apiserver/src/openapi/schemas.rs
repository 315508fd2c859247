//! Schemas (in OpenAPI v3 form) of the built-in kinds, the shared meta/v1
//! types, and the wrapping of CRD schemas as kube-apiserver publishes them.
//!
//! Built-in schemas are hand-written and deliberately permissive: every
//! object whose fields are not listed in full carries
//! `x-kubernetes-preserve-unknown-fields: true`. They are accurate where
//! kubectl reads them:
//!
//! - `x-kubernetes-group-version-kind` (an array on definitions, as kube does);
//! - the strategic-merge extensions (`x-kubernetes-patch-merge-key`,
//!   `x-kubernetes-patch-strategy`) on the lists that have them in Kubernetes
//!   (containers, env, ports, volumeMounts, volumes, ownerReferences,
//!   finalizers, service ports, ...), because client-side `kubectl apply`
//!   computes its three-way strategic merge patch by walking these schemas;
//! - property trees for the paths that such a walk enters (a map or list
//!   present in both the last-applied and the new manifest). Where a walk
//!   meets a field the schema does not list, kubectl prints a warning and
//!   falls back to its compiled-in Go types, which give the same patch.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::registry::ResourceType;

/// Prefix of a v3 reference to a component schema.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// Package of the meta/v1 types.
pub(super) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// The definition name of ObjectMeta.
pub(super) fn object_meta() -> String {
    format!("{META}.ObjectMeta")
}

// ---- A tiny schema DSL ------------------------------------------------------

fn string() -> Value {
    json!({"type": "string"})
}

fn int32() -> Value {
    json!({"type": "integer", "format": "int32"})
}

fn int64() -> Value {
    json!({"type": "integer", "format": "int64"})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn time() -> Value {
    reference(&format!("{META}.Time"))
}

fn micro_time() -> Value {
    reference(&format!("{META}.MicroTime"))
}

fn int_or_string() -> Value {
    reference("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
}

fn quantity() -> Value {
    reference("io.k8s.apimachinery.pkg.api.resource.Quantity")
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string", "default": ""}})
}

/// A list of strings merged as a set by strategic merge patch.
fn string_set() -> Value {
    json!({
        "type": "array",
        "items": {"type": "string", "default": ""},
        "x-kubernetes-list-type": "set",
        "x-kubernetes-patch-strategy": "merge",
    })
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}})
}

fn byte_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "format": "byte"}})
}

fn quantity_map() -> Value {
    json!({"type": "object", "additionalProperties": quantity()})
}

/// An object whose fields are not described: anything is accepted.
fn open() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// A reference to a named component schema, in kube's v3 style.
pub(super) fn reference(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("{REF_PREFIX}{name}")}], "default": {}})
}

fn object(props: Vec<(&str, Value)>) -> Value {
    let properties: Map<String, Value> =
        props.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({"type": "object", "properties": properties})
}

/// An object with some fields described and any others accepted.
fn partial(props: Vec<(&str, Value)>) -> Value {
    let mut o = object(props);
    o["x-kubernetes-preserve-unknown-fields"] = Value::Bool(true);
    o
}

fn atomic_list(item: Value) -> Value {
    json!({"type": "array", "items": item, "x-kubernetes-list-type": "atomic"})
}

fn list_of(name: &str) -> Value {
    json!({"type": "array", "items": reference(name)})
}

/// A list merged by key under strategic merge patch (and a list-map for
/// server-side apply).
fn merge_list(item: Value, key: &str) -> Value {
    merge_list_keys(item, key, &[key])
}

fn merge_list_keys(item: Value, key: &str, map_keys: &[&str]) -> Value {
    json!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": map_keys,
        "x-kubernetes-patch-merge-key": key,
        "x-kubernetes-patch-strategy": "merge",
    })
}

fn describe(mut v: Value, text: &str) -> Value {
    v["description"] = Value::String(text.to_owned());
    v
}

fn required(mut v: Value, fields: &[&str]) -> Value {
    v["required"] = json!(fields);
    v
}

// ---- Names --------------------------------------------------------------

/// The definition-name package of an API group, as kube names them:
/// `io.k8s.api.core`, `io.k8s.api.apps`, ..., and the reversed group for
/// anything else (`kopf.dev` -> `dev.kopf`).
fn package(group: &str) -> String {
    match group {
        "" => "io.k8s.api.core".to_owned(),
        "apiextensions.k8s.io" => {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_owned()
        }
        "apiregistration.k8s.io" => "io.k8s.kube-aggregator.pkg.apis.apiregistration".to_owned(),
        g if !g.contains('.') || g.ends_with(".k8s.io") => {
            let first = g.split('.').next().unwrap_or(g);
            format!("io.k8s.api.{first}")
        }
        g => g.split('.').rev().collect::<Vec<_>>().join("."),
    }
}

/// The component-schema name of a kind in a group-version.
pub(super) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    format!("{}.{version}.{kind}", package(group))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

// ---- Kinds ----------------------------------------------------------------

fn type_meta_props(kind_desc: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "apiVersion",
            describe(
                string(),
                "APIVersion defines the versioned schema of this representation of an object. \
                 Servers should convert recognized schemas to the latest internal value, and may \
                 reject unrecognized values.",
            ),
        ),
        (
            "kind",
            describe(
                string(),
                "Kind is a string value representing the REST resource this object represents. \
                 Servers may infer this from the endpoint the client submits requests to. \
                 Cannot be updated. In CamelCase.",
            ),
        ),
        (
            "metadata",
            describe(
                reference(&object_meta()),
                if kind_desc.is_empty() {
                    "Standard object's metadata."
                } else {
                    kind_desc
                },
            ),
        ),
    ]
}

/// A top-level kind: apiVersion, kind, metadata, the given fields, and its GVK.
fn kind(
    group: &str,
    version: &str,
    kind_name: &str,
    description: &str,
    fields: Vec<(&'static str, Value)>,
) -> (String, Value) {
    let mut props = type_meta_props("");
    props.extend(fields);
    let mut schema = describe(object(props), description);
    schema["x-kubernetes-group-version-kind"] = gvk(group, version, kind_name);
    (definition_name(group, version, kind_name), schema)
}

/// `<Kind>List` for a kind whose item definition is `item`.
pub(super) fn list_schema(
    group: &str,
    version: &str,
    kind_name: &str,
    item: &str,
) -> (String, Value) {
    let list_kind = format!("{kind_name}List");
    let mut props = type_meta_props("");
    props.pop();
    props.push((
        "items",
        describe(list_of(item), &format!("List of {kind_name} objects.")),
    ));
    props.push((
        "metadata",
        describe(
            reference(&format!("{META}.ListMeta")),
            "Standard list metadata.",
        ),
    ));
    let mut schema = required(
        describe(
            object(props),
            &format!("{list_kind} is a list of {kind_name}."),
        ),
        &["items"],
    );
    schema["x-kubernetes-group-version-kind"] = gvk(group, version, &list_kind);
    (definition_name(group, version, &list_kind), schema)
}

/// A top-level kind from a CRD's (or any other given) `openAPIV3Schema`, with
/// `apiVersion`, `kind` and `metadata` added and the GVK attached, as
/// kube-apiserver publishes custom resources.
pub(super) fn from_given_schema(rt: &ResourceType, given: Option<&Value>) -> Value {
    let mut schema = match given {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        _ => open(),
    };
    if schema.get("type").is_none() {
        schema["type"] = Value::String("object".to_owned());
    }
    let mut properties: Map<String, Value> = type_meta_props("")
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    if let Some(Value::Object(given_props)) = schema.get("properties") {
        for (k, v) in given_props {
            // kube replaces the user's metadata schema with ObjectMeta.
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                properties.insert(k.clone(), v.clone());
            }
        }
    }
    schema["properties"] = Value::Object(properties);
    schema["x-kubernetes-group-version-kind"] = gvk(&rt.group, &rt.version, &rt.kind);
    schema
}

// ---- The shared and built-in definitions ----------------------------------

/// Every hand-written definition, by name.
pub(super) fn definitions() -> &'static BTreeMap<String, Value> {
    static DEFS: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut d = BTreeMap::new();
        meta_definitions(&mut d);
        core_definitions(&mut d);
        other_definitions(&mut d);
        d
    })
}

/// The hand-written definition of a built-in kind, if there is one.
pub(super) fn builtin_kind(
    group: &str,
    version: &str,
    kind_name: &str,
) -> Option<(String, &'static Value)> {
    let name = definition_name(group, version, kind_name);
    let def = definitions().get(&name)?;
    let has_gvk = def
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|g| g["kind"] == kind_name && g["group"] == group && g["version"] == version)
        });
    has_gvk.then_some((name, def))
}

fn add(d: &mut BTreeMap<String, Value>, name: String, schema: Value) {
    d.insert(name, schema);
}

fn meta_definitions(d: &mut BTreeMap<String, Value>) {
    let m = |n: &str| format!("{META}.{n}");
    add(
        d,
        m("Time"),
        json!({"type": "string", "format": "date-time", "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON (RFC 3339)."}),
    );
    add(
        d,
        m("MicroTime"),
        json!({"type": "string", "format": "date-time", "description": "MicroTime is version of Time with microsecond level precision."}),
    );
    add(
        d,
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString".into(),
        json!({"type": "string", "format": "int-or-string", "description": "IntOrString is a type that can hold an int32 or a string."}),
    );
    add(
        d,
        "io.k8s.apimachinery.pkg.api.resource.Quantity".into(),
        json!({"type": "string", "description": "Quantity is a fixed-point representation of a number (e.g. 100m, 1Gi)."}),
    );
    add(
        d,
        m("FieldsV1"),
        json!({"type": "object", "description": "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format."}),
    );
    add(
        d,
        m("Patch"),
        json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
    );
    add(
        d,
        m("OwnerReference"),
        required(
            describe(
                object(vec![
                    (
                        "apiVersion",
                        describe(string(), "API version of the referent."),
                    ),
                    ("blockOwnerDeletion", boolean()),
                    (
                        "controller",
                        describe(
                            boolean(),
                            "If true, this reference points to the managing controller.",
                        ),
                    ),
                    ("kind", describe(string(), "Kind of the referent.")),
                    ("name", describe(string(), "Name of the referent.")),
                    ("uid", describe(string(), "UID of the referent.")),
                ]),
                "OwnerReference contains enough information to let you identify an owning object.",
            ),
            &["apiVersion", "kind", "name", "uid"],
        ),
    );
    add(
        d,
        m("ManagedFieldsEntry"),
        object(vec![
            ("apiVersion", string()),
            ("fieldsType", string()),
            ("fieldsV1", reference(&m("FieldsV1"))),
            ("manager", string()),
            ("operation", string()),
            ("subresource", string()),
            ("time", time()),
        ]),
    );
    add(
        d,
        m("ObjectMeta"),
        describe(
            object(vec![
                (
                    "annotations",
                    describe(
                        string_map(),
                        "Annotations is an unstructured key value map stored with a resource.",
                    ),
                ),
                ("creationTimestamp", time()),
                ("deletionGracePeriodSeconds", int64()),
                ("deletionTimestamp", time()),
                (
                    "finalizers",
                    describe(
                        string_set(),
                        "Must be empty before the object is deleted from the registry.",
                    ),
                ),
                (
                    "generateName",
                    describe(
                        string(),
                        "An optional prefix, used by the server, to generate a unique name.",
                    ),
                ),
                ("generation", int64()),
                (
                    "labels",
                    describe(
                        string_map(),
                        "Map of string keys and values that can be used to organize and categorize objects.",
                    ),
                ),
                (
                    "managedFields",
                    atomic_list(reference(&m("ManagedFieldsEntry"))),
                ),
                (
                    "name",
                    describe(string(), "Name must be unique within a namespace."),
                ),
                (
                    "namespace",
                    describe(
                        string(),
                        "Namespace defines the space within which each name must be unique.",
                    ),
                ),
                (
                    "ownerReferences",
                    describe(
                        merge_list(reference(&m("OwnerReference")), "uid"),
                        "List of objects depended by this object.",
                    ),
                ),
                ("resourceVersion", string()),
                ("selfLink", string()),
                ("uid", string()),
            ]),
            "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        ),
    );
    add(
        d,
        m("ListMeta"),
        object(vec![
            ("continue", string()),
            ("remainingItemCount", int64()),
            ("resourceVersion", string()),
            ("selfLink", string()),
        ]),
    );
    add(
        d,
        m("LabelSelectorRequirement"),
        required(
            object(vec![
                ("key", string()),
                ("operator", string()),
                (
                    "values",
                    atomic_list(json!({"type": "string", "default": ""})),
                ),
            ]),
            &["key", "operator"],
        ),
    );
    add(d, m("LabelSelector"), {
        let mut selector = describe(
            object(vec![
                (
                    "matchExpressions",
                    atomic_list(reference(&m("LabelSelectorRequirement"))),
                ),
                ("matchLabels", string_map()),
            ]),
            "A label selector is a label query over a set of resources.",
        );
        // As kube publishes it: server-side apply owns a selector as a whole.
        selector["x-kubernetes-map-type"] = json!("atomic");
        selector
    });
    add(
        d,
        m("Status"),
        describe(
            object(vec![
                ("apiVersion", string()),
                ("code", int32()),
                ("details", open()),
                ("kind", string()),
                ("message", string()),
                ("metadata", reference(&m("ListMeta"))),
                ("reason", string()),
                ("status", string()),
            ]),
            "Status is a return value for calls that don't return other objects.",
        ),
    );
    add(
        d,
        m("DeleteOptions"),
        describe(
            object(vec![
                ("apiVersion", string()),
                (
                    "dryRun",
                    atomic_list(json!({"type": "string", "default": ""})),
                ),
                ("gracePeriodSeconds", int64()),
                ("kind", string()),
                ("orphanDependents", boolean()),
                (
                    "preconditions",
                    object(vec![("resourceVersion", string()), ("uid", string())]),
                ),
                ("propagationPolicy", string()),
            ]),
            "DeleteOptions may be provided when deleting an API object.",
        ),
    );
}

fn core_definitions(d: &mut BTreeMap<String, Value>) {
    let c = |n: &str| format!("io.k8s.api.core.v1.{n}");
    let mut k = |(name, schema): (String, Value)| {
        d.insert(name, schema);
    };
    // Small shared types.
    k((c("LocalObjectReference"), object(vec![("name", string())])));
    k((
        c("ObjectReference"),
        object(vec![
            ("apiVersion", string()),
            ("fieldPath", string()),
            ("kind", string()),
            ("name", string()),
            ("namespace", string()),
            ("resourceVersion", string()),
            ("uid", string()),
        ]),
    ));
    k((
        c("KeyToPath"),
        required(
            object(vec![
                ("key", string()),
                ("mode", int32()),
                ("path", string()),
            ]),
            &["key", "path"],
        ),
    ));
    let key_ref = || {
        object(vec![
            ("key", string()),
            ("name", string()),
            ("optional", boolean()),
        ])
    };
    k((
        c("EnvVar"),
        required(
            object(vec![
                (
                    "name",
                    describe(string(), "Name of the environment variable."),
                ),
                ("value", string()),
                (
                    "valueFrom",
                    partial(vec![
                        ("configMapKeyRef", key_ref()),
                        (
                            "fieldRef",
                            object(vec![("apiVersion", string()), ("fieldPath", string())]),
                        ),
                        (
                            "resourceFieldRef",
                            object(vec![
                                ("containerName", string()),
                                ("divisor", quantity()),
                                ("resource", string()),
                            ]),
                        ),
                        ("secretKeyRef", key_ref()),
                    ]),
                ),
            ]),
            &["name"],
        ),
    ));
    let name_ref = || object(vec![("name", string()), ("optional", boolean())]);
    k((
        c("EnvFromSource"),
        object(vec![
            ("configMapRef", name_ref()),
            ("prefix", string()),
            ("secretRef", name_ref()),
        ]),
    ));
    k((
        c("ContainerPort"),
        required(
            object(vec![
                ("containerPort", int32()),
                ("hostIP", string()),
                ("hostPort", int32()),
                ("name", string()),
                (
                    "protocol",
                    // kube publishes the default: server-side apply keys ports by it.
                    json!({"type": "string", "default": "TCP", "description": "Protocol for port. Must be UDP, TCP, or SCTP. Defaults to \"TCP\"."}),
                ),
            ]),
            &["containerPort"],
        ),
    ));
    k((
        c("VolumeMount"),
        required(
            object(vec![
                ("mountPath", string()),
                ("mountPropagation", string()),
                ("name", string()),
                ("readOnly", boolean()),
                ("recursiveReadOnly", string()),
                ("subPath", string()),
                ("subPathExpr", string()),
            ]),
            &["mountPath", "name"],
        ),
    ));
    k((
        c("ResourceRequirements"),
        object(vec![
            ("claims", atomic_list(open())),
            ("limits", quantity_map()),
            ("requests", quantity_map()),
        ]),
    ));
    k((
        c("Probe"),
        partial(vec![
            ("exec", object(vec![("command", strings())])),
            ("failureThreshold", int32()),
            (
                "grpc",
                object(vec![("port", int32()), ("service", string())]),
            ),
            (
                "httpGet",
                object(vec![
                    ("host", string()),
                    (
                        "httpHeaders",
                        atomic_list(object(vec![("name", string()), ("value", string())])),
                    ),
                    ("path", string()),
                    ("port", int_or_string()),
                    ("scheme", string()),
                ]),
            ),
            ("initialDelaySeconds", int32()),
            ("periodSeconds", int32()),
            ("successThreshold", int32()),
            (
                "tcpSocket",
                object(vec![("host", string()), ("port", int_or_string())]),
            ),
            ("terminationGracePeriodSeconds", int64()),
            ("timeoutSeconds", int32()),
        ]),
    ));
    k((
        c("Container"),
        required(
            describe(
                partial(vec![
                    ("args", strings()),
                    ("command", strings()),
                    (
                        "env",
                        describe(
                            merge_list(reference(&c("EnvVar")), "name"),
                            "List of environment variables to set in the container.",
                        ),
                    ),
                    ("envFrom", atomic_list(reference(&c("EnvFromSource")))),
                    ("image", describe(string(), "Container image name.")),
                    ("imagePullPolicy", string()),
                    ("lifecycle", open()),
                    ("livenessProbe", reference(&c("Probe"))),
                    (
                        "name",
                        describe(string(), "Name of the container specified as a DNS_LABEL."),
                    ),
                    (
                        "ports",
                        describe(
                            merge_list_keys(
                                reference(&c("ContainerPort")),
                                "containerPort",
                                &["containerPort", "protocol"],
                            ),
                            "List of ports to expose from the container.",
                        ),
                    ),
                    ("readinessProbe", reference(&c("Probe"))),
                    ("resizePolicy", atomic_list(open())),
                    ("resources", reference(&c("ResourceRequirements"))),
                    ("restartPolicy", string()),
                    ("securityContext", open()),
                    ("startupProbe", reference(&c("Probe"))),
                    ("stdin", boolean()),
                    ("stdinOnce", boolean()),
                    ("terminationMessagePath", string()),
                    ("terminationMessagePolicy", string()),
                    ("tty", boolean()),
                    (
                        "volumeDevices",
                        merge_list(
                            object(vec![("devicePath", string()), ("name", string())]),
                            "devicePath",
                        ),
                    ),
                    (
                        "volumeMounts",
                        merge_list(reference(&c("VolumeMount")), "mountPath"),
                    ),
                    ("workingDir", string()),
                ]),
                "A single application container that you want to run within a pod.",
            ),
            &["name"],
        ),
    ));
    let items = || atomic_list(reference(&c("KeyToPath")));
    k((
        c("Volume"),
        required(
            partial(vec![
                ("name", string()),
                (
                    "configMap",
                    object(vec![
                        ("defaultMode", int32()),
                        ("items", items()),
                        ("name", string()),
                        ("optional", boolean()),
                    ]),
                ),
                (
                    "csi",
                    partial(vec![
                        ("driver", string()),
                        ("readOnly", boolean()),
                        ("volumeAttributes", string_map()),
                    ]),
                ),
                (
                    "downwardAPI",
                    object(vec![
                        ("defaultMode", int32()),
                        ("items", atomic_list(open())),
                    ]),
                ),
                (
                    "emptyDir",
                    object(vec![("medium", string()), ("sizeLimit", quantity())]),
                ),
                ("ephemeral", open()),
                (
                    "hostPath",
                    object(vec![("path", string()), ("type", string())]),
                ),
                (
                    "nfs",
                    object(vec![
                        ("path", string()),
                        ("readOnly", boolean()),
                        ("server", string()),
                    ]),
                ),
                (
                    "persistentVolumeClaim",
                    object(vec![("claimName", string()), ("readOnly", boolean())]),
                ),
                (
                    "projected",
                    object(vec![
                        ("defaultMode", int32()),
                        ("sources", atomic_list(open())),
                    ]),
                ),
                (
                    "secret",
                    object(vec![
                        ("defaultMode", int32()),
                        ("items", items()),
                        ("optional", boolean()),
                        ("secretName", string()),
                    ]),
                ),
            ]),
            &["name"],
        ),
    ));
    k((
        c("Toleration"),
        object(vec![
            ("effect", string()),
            ("key", string()),
            ("operator", string()),
            ("tolerationSeconds", int64()),
            ("value", string()),
        ]),
    ));
    let mut volumes = merge_list(reference(&c("Volume")), "name");
    volumes["x-kubernetes-patch-strategy"] = json!("merge,retainKeys");
    k((
        c("PodSpec"),
        required(
            describe(
                partial(vec![
                    ("activeDeadlineSeconds", int64()),
                    ("affinity", open()),
                    ("automountServiceAccountToken", boolean()),
                    (
                        "containers",
                        describe(
                            merge_list(reference(&c("Container")), "name"),
                            "List of containers belonging to the pod.",
                        ),
                    ),
                    ("dnsConfig", open()),
                    ("dnsPolicy", string()),
                    ("enableServiceLinks", boolean()),
                    (
                        "ephemeralContainers",
                        merge_list(reference(&c("Container")), "name"),
                    ),
                    (
                        "hostAliases",
                        merge_list(
                            object(vec![("hostnames", strings()), ("ip", string())]),
                            "ip",
                        ),
                    ),
                    ("hostIPC", boolean()),
                    ("hostNetwork", boolean()),
                    ("hostPID", boolean()),
                    ("hostUsers", boolean()),
                    ("hostname", string()),
                    (
                        "imagePullSecrets",
                        merge_list(reference(&c("LocalObjectReference")), "name"),
                    ),
                    (
                        "initContainers",
                        merge_list(reference(&c("Container")), "name"),
                    ),
                    ("nodeName", string()),
                    ("nodeSelector", string_map()),
                    ("os", object(vec![("name", string())])),
                    ("overhead", quantity_map()),
                    ("preemptionPolicy", string()),
                    ("priority", int32()),
                    ("priorityClassName", string()),
                    (
                        "readinessGates",
                        atomic_list(object(vec![("conditionType", string())])),
                    ),
                    ("resourceClaims", merge_list(open(), "name")),
                    ("resources", reference(&c("ResourceRequirements"))),
                    ("restartPolicy", string()),
                    ("runtimeClassName", string()),
                    ("schedulerName", string()),
                    (
                        "schedulingGates",
                        merge_list(object(vec![("name", string())]), "name"),
                    ),
                    ("securityContext", open()),
                    ("serviceAccount", string()),
                    ("serviceAccountName", string()),
                    ("setHostnameAsFQDN", boolean()),
                    ("shareProcessNamespace", boolean()),
                    ("subdomain", string()),
                    ("terminationGracePeriodSeconds", int64()),
                    ("tolerations", atomic_list(reference(&c("Toleration")))),
                    (
                        "topologySpreadConstraints",
                        merge_list_keys(
                            open(),
                            "topologyKey",
                            &["topologyKey", "whenUnsatisfiable"],
                        ),
                    ),
                    ("volumes", volumes),
                ]),
                "PodSpec is a description of a pod.",
            ),
            &["containers"],
        ),
    ));
    k((
        c("PodTemplateSpec"),
        object(vec![
            ("metadata", reference(&object_meta())),
            ("spec", reference(&c("PodSpec"))),
        ]),
    ));
    let conditions = || merge_list(open(), "type");
    k(kind(
        "",
        "v1",
        "Pod",
        "Pod is a collection of containers that can run on a host.",
        vec![
            ("spec", reference(&c("PodSpec"))),
            (
                "status",
                partial(vec![
                    ("conditions", conditions()),
                    ("containerStatuses", atomic_list(open())),
                    ("hostIP", string()),
                    ("message", string()),
                    ("phase", string()),
                    ("podIP", string()),
                    ("qosClass", string()),
                    ("reason", string()),
                    ("startTime", time()),
                ]),
            ),
        ],
    ));
    k(kind(
        "",
        "v1",
        "Namespace",
        "Namespace provides a scope for Names.",
        vec![
            (
                "spec",
                object(vec![(
                    "finalizers",
                    atomic_list(json!({"type": "string", "default": ""})),
                )]),
            ),
            (
                "status",
                partial(vec![("conditions", conditions()), ("phase", string())]),
            ),
        ],
    ));
    k(kind(
        "",
        "v1",
        "ConfigMap",
        "ConfigMap holds configuration data for pods to consume.",
        vec![
            ("binaryData", byte_map()),
            ("data", string_map()),
            ("immutable", boolean()),
        ],
    ));
    k(kind(
        "",
        "v1",
        "Secret",
        "Secret holds secret data of a certain type.",
        vec![
            ("data", byte_map()),
            ("immutable", boolean()),
            ("stringData", string_map()),
            ("type", string()),
        ],
    ));
    k(kind(
        "",
        "v1",
        "ServiceAccount",
        "ServiceAccount binds together a name, a principal, and a set of secrets.",
        vec![
            ("automountServiceAccountToken", boolean()),
            (
                "imagePullSecrets",
                atomic_list(reference(&c("LocalObjectReference"))),
            ),
            (
                "secrets",
                merge_list(reference(&c("ObjectReference")), "name"),
            ),
        ],
    ));
    k((
        c("ServicePort"),
        required(
            object(vec![
                ("appProtocol", string()),
                ("name", string()),
                ("nodePort", int32()),
                ("port", int32()),
                ("protocol", json!({"type": "string", "default": "TCP"})),
                ("targetPort", int_or_string()),
            ]),
            &["port"],
        ),
    ));
    k(kind(
        "",
        "v1",
        "Service",
        "Service is a named abstraction of software service.",
        vec![
            (
                "spec",
                partial(vec![
                    ("allocateLoadBalancerNodePorts", boolean()),
                    ("clusterIP", string()),
                    (
                        "clusterIPs",
                        atomic_list(json!({"type": "string", "default": ""})),
                    ),
                    (
                        "externalIPs",
                        atomic_list(json!({"type": "string", "default": ""})),
                    ),
                    ("externalName", string()),
                    ("externalTrafficPolicy", string()),
                    ("healthCheckNodePort", int32()),
                    ("internalTrafficPolicy", string()),
                    (
                        "ipFamilies",
                        atomic_list(json!({"type": "string", "default": ""})),
                    ),
                    ("ipFamilyPolicy", string()),
                    ("loadBalancerClass", string()),
                    ("loadBalancerIP", string()),
                    (
                        "loadBalancerSourceRanges",
                        atomic_list(json!({"type": "string", "default": ""})),
                    ),
                    (
                        "ports",
                        merge_list_keys(
                            reference(&c("ServicePort")),
                            "port",
                            &["port", "protocol"],
                        ),
                    ),
                    ("publishNotReadyAddresses", boolean()),
                    ("selector", string_map()),
                    ("sessionAffinity", string()),
                    ("sessionAffinityConfig", open()),
                    ("trafficDistribution", string()),
                    ("type", string()),
                ]),
            ),
            ("status", open()),
        ],
    ));
    k(kind(
        "",
        "v1",
        "Event",
        "Event is a report of an event somewhere in the cluster.",
        vec![
            ("action", string()),
            ("count", int32()),
            ("eventTime", micro_time()),
            ("firstTimestamp", time()),
            ("involvedObject", reference(&c("ObjectReference"))),
            ("lastTimestamp", time()),
            ("message", string()),
            ("reason", string()),
            ("related", reference(&c("ObjectReference"))),
            ("reportingComponent", string()),
            ("reportingInstance", string()),
            (
                "series",
                object(vec![("count", int32()), ("lastObservedTime", micro_time())]),
            ),
            (
                "source",
                object(vec![("component", string()), ("host", string())]),
            ),
            ("type", string()),
        ],
    ));
}

fn other_definitions(d: &mut BTreeMap<String, Value>) {
    let pod_template = || reference("io.k8s.api.core.v1.PodTemplateSpec");
    let selector = || reference(&format!("{META}.LabelSelector"));
    let conditions = || merge_list(open(), "type");
    let object_ref = || reference("io.k8s.api.core.v1.ObjectReference");
    let mut k = |(name, schema): (String, Value)| {
        d.insert(name, schema);
    };
    k(kind(
        "events.k8s.io",
        "v1",
        "Event",
        "Event is a report of an event somewhere in the cluster.",
        vec![
            ("action", string()),
            ("deprecatedCount", int32()),
            ("deprecatedFirstTimestamp", time()),
            ("deprecatedLastTimestamp", time()),
            (
                "deprecatedSource",
                object(vec![("component", string()), ("host", string())]),
            ),
            ("eventTime", micro_time()),
            ("note", string()),
            ("reason", string()),
            ("regarding", object_ref()),
            ("related", object_ref()),
            ("reportingController", string()),
            ("reportingInstance", string()),
            (
                "series",
                object(vec![("count", int32()), ("lastObservedTime", micro_time())]),
            ),
            ("type", string()),
        ],
    ));
    k(kind(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "Lease defines a lease concept.",
        vec![(
            "spec",
            object(vec![
                ("acquireTime", micro_time()),
                ("holderIdentity", string()),
                ("leaseDurationSeconds", int32()),
                ("leaseTransitions", int32()),
                ("preferredHolder", string()),
                ("renewTime", micro_time()),
                ("strategy", string()),
            ]),
        )],
    ));
    let workload_status = || {
        partial(vec![
            ("availableReplicas", int32()),
            ("collisionCount", int32()),
            ("conditions", conditions()),
            ("observedGeneration", int64()),
            ("readyReplicas", int32()),
            ("replicas", int32()),
            ("unavailableReplicas", int32()),
            ("updatedReplicas", int32()),
        ])
    };
    let mut strategy = object(vec![
        (
            "rollingUpdate",
            object(vec![
                ("maxSurge", int_or_string()),
                ("maxUnavailable", int_or_string()),
            ]),
        ),
        ("type", string()),
    ]);
    strategy["x-kubernetes-patch-strategy"] = json!("retainKeys");
    k(kind(
        "apps",
        "v1",
        "Deployment",
        "Deployment enables declarative updates for Pods and ReplicaSets.",
        vec![
            (
                "spec",
                required(
                    object(vec![
                        ("minReadySeconds", int32()),
                        ("paused", boolean()),
                        ("progressDeadlineSeconds", int32()),
                        ("replicas", int32()),
                        ("revisionHistoryLimit", int32()),
                        ("selector", selector()),
                        ("strategy", strategy),
                        ("template", pod_template()),
                    ]),
                    &["selector", "template"],
                ),
            ),
            ("status", workload_status()),
        ],
    ));
    k(kind(
        "apps",
        "v1",
        "ReplicaSet",
        "ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
        vec![
            (
                "spec",
                object(vec![
                    ("minReadySeconds", int32()),
                    ("replicas", int32()),
                    ("selector", selector()),
                    ("template", pod_template()),
                ]),
            ),
            ("status", workload_status()),
        ],
    ));
    k(kind(
        "apps",
        "v1",
        "StatefulSet",
        "StatefulSet represents a set of pods with consistent identities.",
        vec![
            (
                "spec",
                partial(vec![
                    ("minReadySeconds", int32()),
                    ("ordinals", open()),
                    ("persistentVolumeClaimRetentionPolicy", open()),
                    ("podManagementPolicy", string()),
                    ("replicas", int32()),
                    ("revisionHistoryLimit", int32()),
                    ("selector", selector()),
                    ("serviceName", string()),
                    ("template", pod_template()),
                    ("updateStrategy", open()),
                    ("volumeClaimTemplates", atomic_list(open())),
                ]),
            ),
            ("status", workload_status()),
        ],
    ));
    k(kind(
        "apps",
        "v1",
        "DaemonSet",
        "DaemonSet represents the configuration of a daemon set.",
        vec![
            (
                "spec",
                partial(vec![
                    ("minReadySeconds", int32()),
                    ("revisionHistoryLimit", int32()),
                    ("selector", selector()),
                    ("template", pod_template()),
                    ("updateStrategy", open()),
                ]),
            ),
            ("status", open()),
        ],
    ));
    let job_spec = || {
        partial(vec![
            ("activeDeadlineSeconds", int64()),
            ("backoffLimit", int32()),
            ("completionMode", string()),
            ("completions", int32()),
            ("manualSelector", boolean()),
            ("parallelism", int32()),
            ("podFailurePolicy", open()),
            ("selector", selector()),
            ("suspend", boolean()),
            ("template", pod_template()),
            ("ttlSecondsAfterFinished", int32()),
        ])
    };
    k(kind(
        "batch",
        "v1",
        "Job",
        "Job represents the configuration of a single job.",
        vec![("spec", job_spec()), ("status", open())],
    ));
    k(kind(
        "batch",
        "v1",
        "CronJob",
        "CronJob represents the configuration of a single cron job.",
        vec![
            (
                "spec",
                partial(vec![
                    ("concurrencyPolicy", string()),
                    ("failedJobsHistoryLimit", int32()),
                    (
                        "jobTemplate",
                        object(vec![
                            ("metadata", reference(&object_meta())),
                            ("spec", job_spec()),
                        ]),
                    ),
                    ("schedule", string()),
                    ("startingDeadlineSeconds", int64()),
                    ("successfulJobsHistoryLimit", int32()),
                    ("suspend", boolean()),
                    ("timeZone", string()),
                ]),
            ),
            ("status", open()),
        ],
    ));
    let rbac = "rbac.authorization.k8s.io";
    let rules = || {
        atomic_list(object(vec![
            ("apiGroups", strings()),
            ("nonResourceURLs", strings()),
            ("resourceNames", strings()),
            ("resources", strings()),
            ("verbs", strings()),
        ]))
    };
    let role_ref = || {
        object(vec![
            ("apiGroup", string()),
            ("kind", string()),
            ("name", string()),
        ])
    };
    let subjects = || {
        atomic_list(object(vec![
            ("apiGroup", string()),
            ("kind", string()),
            ("name", string()),
            ("namespace", string()),
        ]))
    };
    k(kind(
        rbac,
        "v1",
        "Role",
        "Role is a namespaced set of PolicyRules.",
        vec![("rules", rules())],
    ));
    k(kind(
        rbac,
        "v1",
        "ClusterRole",
        "ClusterRole is a cluster-level set of PolicyRules.",
        vec![("aggregationRule", open()), ("rules", rules())],
    ));
    k(kind(
        rbac,
        "v1",
        "RoleBinding",
        "RoleBinding references a role and binds it to subjects.",
        vec![("roleRef", role_ref()), ("subjects", subjects())],
    ));
    k(kind(
        rbac,
        "v1",
        "ClusterRoleBinding",
        "ClusterRoleBinding references a ClusterRole and binds it to subjects.",
        vec![("roleRef", role_ref()), ("subjects", subjects())],
    ));
    let ext = "apiextensions.k8s.io";
    k(kind(
        ext,
        "v1",
        "CustomResourceDefinition",
        "CustomResourceDefinition represents a resource that should be exposed on the API server.",
        vec![
            (
                "spec",
                required(
                    object(vec![
                        ("conversion", open()),
                        (
                            "group",
                            describe(string(), "The API group of the defined custom resource."),
                        ),
                        (
                            "names",
                            required(
                                object(vec![
                                    (
                                        "categories",
                                        atomic_list(json!({"type": "string", "default": ""})),
                                    ),
                                    ("kind", string()),
                                    ("listKind", string()),
                                    ("plural", string()),
                                    (
                                        "shortNames",
                                        atomic_list(json!({"type": "string", "default": ""})),
                                    ),
                                    ("singular", string()),
                                ]),
                                &["plural", "kind"],
                            ),
                        ),
                        ("preserveUnknownFields", boolean()),
                        ("scope", describe(string(), "Cluster or Namespaced.")),
                        (
                            "versions",
                            atomic_list(required(
                                object(vec![
                                    ("additionalPrinterColumns", atomic_list(open())),
                                    ("deprecated", boolean()),
                                    ("deprecationWarning", string()),
                                    ("name", string()),
                                    ("schema", object(vec![("openAPIV3Schema", open())])),
                                    ("selectableFields", atomic_list(open())),
                                    ("served", boolean()),
                                    ("storage", boolean()),
                                    ("subresources", open()),
                                ]),
                                &["name", "served", "storage"],
                            )),
                        ),
                    ]),
                    &["group", "names", "scope", "versions"],
                ),
            ),
            ("status", open()),
        ],
    ));
}
