//! Following the cluster while the operator runs: CRDs appearing, changing or going
//! (their group is rescanned, KOPF.md §2.4), and namespaces matching `-n` globs
//! appearing or going. Each change is a [`Trigger`] for the run loop.

use std::collections::BTreeSet;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cluster::Scope;

/// Why the streams must be reconsidered.
pub(super) enum Trigger {
    /// A CRD of this group was added, changed or removed.
    Group(String),
    NamespaceAdded(String),
    NamespaceRemoved(String),
}

/// Watches CRDs; any change after the initial listing rescans that CRD's group
/// (KOPF.md §2.4), so resources appear and vanish without a restart.
pub(super) async fn observe_crds(
    client: Client,
    triggers: mpsc::UnboundedSender<Trigger>,
    cancel: CancellationToken,
) {
    let ar = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut warned = false;
    // The groups of a (re)listing. A CRD created between the operator's discovery scan
    // and this watch's first listing shows up only in that listing: every listed group
    // is rescanned once the listing is complete (so is every group after a relist).
    let mut listed: BTreeSet<String> = BTreeSet::new();
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            next = events.next() => next,
        };
        let group_of = |crd: &DynamicObject| {
            crd.data
                .pointer("/spec/group")
                .and_then(|g| g.as_str())
                .map(str::to_owned)
        };
        match next {
            None => return,
            Some(Ok(Event::Apply(crd) | Event::Delete(crd))) => {
                if let Some(group) = group_of(&crd)
                    && triggers.send(Trigger::Group(group)).is_err()
                {
                    return;
                }
            }
            Some(Ok(Event::Init)) => listed.clear(),
            Some(Ok(Event::InitApply(crd))) => listed.extend(group_of(&crd)),
            Some(Ok(Event::InitDone)) => {
                for group in std::mem::take(&mut listed) {
                    if triggers.send(Trigger::Group(group)).is_err() {
                        return;
                    }
                }
            }
            Some(Err(err)) => {
                if !warned {
                    tracing::warn!(
                        "Cannot watch CRDs; new resources will not be noticed until they can: {err}"
                    );
                    warned = true;
                }
            }
        }
    }
}

/// Watches namespaces for `-n` patterns with globs: matching namespaces get
/// streams when they appear and lose them when they go.
pub(super) async fn observe_namespaces(
    client: Client,
    scope: Scope,
    triggers: mpsc::UnboundedSender<Trigger>,
    cancel: CancellationToken,
) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            next = events.next() => next,
        };
        let trigger = match next {
            None => return,
            Some(Ok(Event::Apply(ns) | Event::InitApply(ns))) => ns
                .metadata
                .name
                .filter(|n| scope.includes(n))
                .map(Trigger::NamespaceAdded),
            Some(Ok(Event::Delete(ns))) => ns
                .metadata
                .name
                .filter(|n| scope.includes(n))
                .map(Trigger::NamespaceRemoved),
            Some(Ok(_)) => None,
            Some(Err(err)) => {
                tracing::warn!("Watching namespaces failed, retrying: {err}");
                None
            }
        };
        if let Some(trigger) = trigger
            && triggers.send(trigger).is_err()
        {
            return;
        }
    }
}
