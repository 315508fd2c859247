//! What one group-version serves, resource by resource with its subresources: the one
//! model both discovery forms (the legacy `APIResourceList` and the aggregated
//! `APIGroupDiscoveryList`) are rendered from, so that they never disagree.

use crate::registry::{Registry, ResourceType};

/// A group, version and kind, as discovery names what a (sub)resource answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gvk {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
}

/// A subresource of a served resource.
#[derive(Debug)]
pub(crate) struct Subresource {
    /// The path segment after the object's name, e.g. `status`.
    pub(crate) name: &'static str,
    pub(crate) kind: Gvk,
    pub(crate) verbs: &'static [&'static str],
}

/// A served resource and its subresources, sorted by name.
pub(crate) struct Served<'a> {
    pub(crate) rt: &'a ResourceType,
    pub(crate) subresources: Vec<Subresource>,
}

const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];
const CONNECT: &[&str] = &["create", "get"];

/// A subresource a built-in type has besides `status` and `scale` (which depend on the
/// type's definition). Each is answered by the server's requests (the API tests request
/// every subresource discovery names).
struct Fixed {
    group: &'static str,
    plural: &'static str,
    name: &'static str,
    /// What it answers with: group, version, kind.
    kind: (&'static str, &'static str, &'static str),
    verbs: &'static [&'static str],
}

const fn fixed(
    (group, plural, name): (&'static str, &'static str, &'static str),
    kind: (&'static str, &'static str, &'static str),
    verbs: &'static [&'static str],
) -> Fixed {
    Fixed {
        group,
        plural,
        name,
        kind,
        verbs,
    }
}

const CSR: &str = "certificates.k8s.io";

const FIXED: &[Fixed] = &[
    fixed(
        (CSR, "certificatesigningrequests", "approval"),
        (CSR, "v1", "CertificateSigningRequest"),
        GET_PATCH_UPDATE,
    ),
    fixed(
        ("", "pods", "attach"),
        ("", "v1", "PodAttachOptions"),
        CONNECT,
    ),
    fixed(("", "pods", "binding"), ("", "v1", "Binding"), &["create"]),
    fixed(
        ("", "pods", "ephemeralcontainers"),
        ("", "v1", "Pod"),
        GET_PATCH_UPDATE,
    ),
    fixed(
        ("", "pods", "eviction"),
        ("policy", "v1", "Eviction"),
        &["create"],
    ),
    fixed(("", "pods", "exec"), ("", "v1", "PodExecOptions"), CONNECT),
    fixed(("", "pods", "log"), ("", "v1", "Pod"), &["get"]),
    fixed(
        ("", "pods", "portforward"),
        ("", "v1", "PodPortForwardOptions"),
        CONNECT,
    ),
    fixed(
        ("", "serviceaccounts", "token"),
        ("authentication.k8s.io", "v1", "TokenRequest"),
        &["create"],
    ),
];

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// What `group/version` serves, sorted by resource name; empty when it is not served.
/// `has_scale` says whether a type has the scale subresource (a CRD declares it).
pub(crate) fn served<'a>(
    reg: &'a Registry,
    group: &str,
    version: &str,
    has_scale: &dyn Fn(&ResourceType) -> bool,
) -> Vec<Served<'a>> {
    let mut out: Vec<Served<'a>> = reg
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .map(|rt| {
            let mut subresources: Vec<Subresource> = FIXED
                .iter()
                .filter(|f| f.group == rt.group && f.plural == rt.plural)
                .map(|f| Subresource {
                    name: f.name,
                    kind: gvk(f.kind.0, f.kind.1, f.kind.2),
                    verbs: f.verbs,
                })
                .collect();
            if has_scale(rt) {
                subresources.push(Subresource {
                    name: "scale",
                    kind: gvk("autoscaling", "v1", "Scale"),
                    verbs: GET_PATCH_UPDATE,
                });
            }
            if rt.has_status {
                subresources.push(Subresource {
                    name: "status",
                    kind: gvk(&rt.group, &rt.version, &rt.kind),
                    verbs: GET_PATCH_UPDATE,
                });
            }
            subresources.sort_by_key(|s| s.name);
            Served { rt, subresources }
        })
        .collect();
    out.sort_by(|a, b| a.rt.plural.cmp(&b.rt.plural));
    out
}
