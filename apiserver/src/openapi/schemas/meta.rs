//! The shared meta/v1 definitions (ObjectMeta, lists, Status, ...).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

pub(super) fn definitions(d: &mut BTreeMap<String, Value>) {
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
