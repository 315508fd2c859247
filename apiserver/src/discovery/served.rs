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

/// The subresources a built-in type has besides `status` and `scale` (which depend on the
/// type's definition): (group, plural, subresource, response group, version, kind, verbs).
/// Each is answered by the server's requests (checked by `requests`' tests).
pub(crate) const FIXED: &[(&str, &str, &str, &str, &str, &str, &[&str])] = &[(
    "certificates.k8s.io",
    "certificatesigningrequests",
    "approval",
    "certificates.k8s.io",
    "v1",
    "CertificateSigningRequest",
    GET_PATCH_UPDATE,
)];

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
                .filter(|f| f.0 == rt.group && f.1 == rt.plural)
                .map(|&(_, _, name, g, v, k, verbs)| Subresource {
                    name,
                    kind: gvk(g, v, k),
                    verbs,
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
