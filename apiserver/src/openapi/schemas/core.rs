//! The definitions of the core (`v1`) kinds kubectl walks.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

pub(super) fn definitions(d: &mut BTreeMap<String, Value>) {
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
