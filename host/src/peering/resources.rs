//! Which peering resources a cluster serves (KOPF.md §2.4, §8.1): Kopf's
//! ClusterKopfPeering and KopfPeering, in `kopf.dev/v1` and in the legacy
//! `zalando.org/v1`. As Kopf does, an operator peers through every one of the
//! two groups that is served (both while a cluster moves from one to the
//! other), found by discovery, so that an absent group costs no request.

use crate::cluster::{self, Resource};

/// Kopf's peering group, then its legacy one.
pub(crate) const GROUPS: [&str; 2] = ["kopf.dev", "zalando.org"];

/// The version both groups serve.
const VERSION: &str = "v1";

/// The peering resource of an operator's mode: ClusterKopfPeering for a
/// cluster-wide one, KopfPeering for a namespaced one.
pub(crate) fn plural(clusterwide: bool) -> &'static str {
    if clusterwide {
        "clusterkopfpeerings"
    } else {
        "kopfpeerings"
    }
}

/// The peering resources of this mode among the discovered ones, Kopf's group first.
pub(crate) fn served(discovered: &[Resource], clusterwide: bool) -> Vec<Resource> {
    let plural = plural(clusterwide);
    GROUPS
        .iter()
        .filter_map(|group| {
            discovered
                .iter()
                .find(|r| r.group == *group && r.version == VERSION && r.plural == plural)
                .cloned()
        })
        .collect()
}

/// The peering resources of this mode the cluster serves, found by the discovery of
/// their two groups only (for `freeze` and `resume`, which need nothing else).
pub(crate) async fn discover(client: &kube::Client, clusterwide: bool) -> Vec<Resource> {
    let mut discovered = Vec::new();
    for group in GROUPS {
        discovered.extend(cluster::scan_group(client, group).await);
    }
    served(&discovered, clusterwide)
}

/// How messages name the resource (`clusterkopfpeerings.kopf.dev`).
pub(crate) fn name(group: &str, clusterwide: bool) -> String {
    format!("{}.{group}", plural(clusterwide))
}

/// What to deploy when no peering resource is served.
pub(crate) fn missing(clusterwide: bool) -> String {
    let names: Vec<String> = GROUPS.iter().map(|g| name(g, clusterwide)).collect();
    format!(
        "no peering resource is served (neither {})",
        names.join(" nor ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, plural: &str) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: String::new(),
            singular: String::new(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced: plural == "kopfpeerings",
            verbs: Vec::new(),
            subresources: Vec::new(),
            preferred: true,
        }
    }

    #[test]
    fn either_group_or_both_are_found_for_the_mode() {
        let legacy = [
            resource("zalando.org", "v1", "clusterkopfpeerings"),
            resource("zalando.org", "v1", "kopfpeerings"),
            resource("", "v1", "pods"),
        ];
        let found = served(&legacy, true);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].group, "zalando.org");
        assert_eq!(found[0].plural, "clusterkopfpeerings");

        let both = [
            resource("zalando.org", "v1", "kopfpeerings"),
            resource("kopf.dev", "v1", "kopfpeerings"),
            resource("kopf.dev", "v2", "kopfpeerings"),
        ];
        let groups: Vec<_> = served(&both, false).into_iter().map(|r| r.group).collect();
        assert_eq!(groups, ["kopf.dev", "zalando.org"]);
        assert!(served(&both, true).is_empty());
        assert_eq!(
            missing(false),
            "no peering resource is served (neither kopfpeerings.kopf.dev nor kopfpeerings.zalando.org)"
        );
    }
}
