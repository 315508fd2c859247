//! The definitions of the built-in kinds of the named groups (apps, batch, rbac, ...).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

pub(super) fn definitions(d: &mut BTreeMap<String, Value>) {
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
