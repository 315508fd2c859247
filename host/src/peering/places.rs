//! Where peering objects are ([`Place`]: the group of the resource, and the namespace or
//! the whole cluster), how they are reached, and the sum of why each one pauses the
//! operator ([`Blocks`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;
use tokio::sync::watch;

use super::resources;
use crate::cluster::Resource;

/// Where a peering object lives: `None` cluster-wide (ClusterKopfPeering),
/// else a namespace (KopfPeering).
pub(super) type Target = Option<String>;

/// One peering object: the API group of its resource, and where it lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Place {
    pub(super) group: String,
    pub(super) target: Target,
}

impl Place {
    /// Says where a pause comes from: the namespace, and the group when it is the
    /// legacy one (when both groups are served, the same peer blocks in each).
    pub(super) fn locate(&self, reason: &str) -> String {
        let legacy = (self.group != resources::GROUPS[0]).then_some(self.group.as_str());
        match (&self.target, legacy) {
            (None, None) => reason.to_owned(),
            (None, Some(group)) => format!("{reason} ({group})"),
            (Some(ns), None) => format!("{reason} (in '{ns}')"),
            (Some(ns), Some(group)) => format!("{reason} (in '{ns}', {group})"),
        }
    }
}

pub(super) fn peering_api(
    client: &Client,
    resource: &Resource,
    target: &Target,
) -> Api<DynamicObject> {
    let resource = resource.api_resource();
    match target {
        None => Api::all_with(client.clone(), &resource),
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
    }
}

/// As Kopf says where a peering object is: `cluster-wide` or `in 'ns'`.
pub(super) fn describe(target: &Target) -> String {
    match target {
        None => "cluster-wide".to_owned(),
        Some(ns) => format!("in '{ns}'"),
    }
}

/// Merge-patches a peering object; `Ok(false)` when it does not exist.
pub(super) async fn patch(
    api: &Api<DynamicObject>,
    name: &str,
    body: &Value,
) -> Result<bool, kube::Error> {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Why the operator must pause, per peering object (`None`: no peering resource is
/// served, with `--peering`); their sum is published.
#[derive(Clone)]
pub(super) struct Blocks {
    reasons: Arc<Mutex<BTreeMap<Option<Place>, String>>>,
    pub(super) signal: Arc<watch::Sender<Option<String>>>,
}

impl Blocks {
    pub(super) fn new() -> Blocks {
        Blocks {
            reasons: Arc::default(),
            signal: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Records (or clears, with `None`) what blocks us at one peering object.
    pub(super) fn set(&self, place: Option<&Place>, reason: Option<String>) {
        let sum = {
            let mut reasons = self.reasons.lock().unwrap_or_else(|p| p.into_inner());
            let key = place.cloned();
            match reason {
                Some(reason) => reasons.insert(key, reason),
                None => reasons.remove(&key),
            };
            let parts: Vec<String> = reasons
                .iter()
                .map(|(place, reason)| match place {
                    None => reason.clone(),
                    Some(place) => place.locate(reason),
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        };
        self.signal.send_if_modified(|current| {
            let changed = *current != sum;
            *current = sum;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(group: &str, target: Option<&str>) -> Place {
        Place {
            group: group.to_owned(),
            target: target.map(str::to_owned),
        }
    }

    #[test]
    fn the_pause_signal_sums_every_peering_object() {
        let blocks = Blocks::new();
        let signal = blocks.signal.subscribe();
        let (a, b) = (place("kopf.dev", Some("a")), place("kopf.dev", Some("b")));
        blocks.set(Some(&a), Some("in favour of dev".into()));
        blocks.set(Some(&b), Some("waiting".into()));
        assert_eq!(
            signal.borrow().as_deref(),
            Some("in favour of dev (in 'a'); waiting (in 'b')")
        );
        blocks.set(Some(&a), None);
        assert_eq!(signal.borrow().as_deref(), Some("waiting (in 'b')"));
        blocks.set(Some(&b), None);
        assert_eq!(*signal.borrow(), None);
        blocks.set(
            Some(&place("kopf.dev", None)),
            Some("in favour of x".into()),
        );
        assert_eq!(signal.borrow().as_deref(), Some("in favour of x"));
    }

    #[test]
    fn pauses_through_the_legacy_group_say_so() {
        let blocks = Blocks::new();
        let signal = blocks.signal.subscribe();
        blocks.set(
            Some(&place("zalando.org", Some("a"))),
            Some("in favour of dev".into()),
        );
        blocks.set(Some(&place("zalando.org", None)), Some("waiting".into()));
        blocks.set(None, Some("no peering resource is served".into()));
        assert_eq!(
            signal.borrow().as_deref(),
            Some(
                "no peering resource is served; waiting (zalando.org); in favour of dev (in 'a', zalando.org)"
            )
        );
    }
}
