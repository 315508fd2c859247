//! Which handlers serve which resource: every registration of every loaded guest,
//! resolved against what discovery found (KOPF.md §2.3).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::spec::Handler;
use crate::cluster::{Resolution, Resource, SENSITIVE, Selector, guest_may, only_named, resolve};
use crate::runtime::{
    CallContext, Caller, Cause, Guest, HandlerKind, HostServices, Pool, ResourceInfo,
};

/// The reason of the `when` call that asks a guest whether a handler selects a resource
/// (the WIT's `selection.chosen`).
const RESOURCE_SELECTION: &str = "resource-selection";

/// What a guest may ask while it chooses: the candidate resource, in full.
struct Choosing(ResourceInfo);

impl HostServices for Choosing {
    fn resource_info(&self, _caller: &Caller) -> Option<ResourceInfo> {
        Some(self.0.clone())
    }
}

/// Whether `handler`'s guest chooses `resource` for it (Kopf's callable selector), asked
/// through its `when` export with the reason `resource-selection`. A failed call: not
/// chosen, said once.
async fn chooses(handler: &Handler, resource: &Resource) -> bool {
    let spec = &handler.spec;
    let cause = Cause {
        handler_id: spec.id.clone(),
        kind: spec.kind,
        resource: crate::runtime::Resource {
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
            kind: resource.kind.clone(),
            namespaced: resource.namespaced,
        },
        event_type: None,
        reason: Some(RESOURCE_SELECTION.to_owned()),
        body: "{}".to_owned(),
        old: None,
        new: None,
        diff: None,
        retry: 0,
        started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
        runtime_seconds: 0.0,
        param: spec.param.clone(),
        memo: None,
    };
    let services = Arc::new(Choosing(resource.info()));
    let ctx = CallContext::new(spec.id.clone(), None, services).in_pool(Pool::Activities);
    match handler.guest.when(cause, ctx).await {
        Ok(chosen) => chosen,
        Err(error) => {
            tracing::error!(
                "Handler '{}' of guest '{}' could not choose whether it serves {}: {error}; \
                 it does not.",
                spec.id,
                handler.guest.name(),
                resource.key()
            );
            false
        }
    }
}

/// The handlers of one served resource, by kind, in declaration order.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResourceHandlers {
    pub(crate) index: Vec<Arc<Handler>>,
    pub(crate) event: Vec<Arc<Handler>>,
    /// create, update, delete, resume and field handlers (KOPF.md §1.6).
    pub(crate) changing: Vec<Arc<Handler>>,
    /// Timers and daemons (KOPF.md §1.9, §1.10), one per id.
    pub(crate) spawning: Vec<Arc<Handler>>,
}

impl ResourceHandlers {
    pub(crate) fn is_empty(&self) -> bool {
        self.all().next().is_none()
    }

    /// Every handler of the resource, of every kind.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<Handler>> {
        [&self.index, &self.event, &self.changing, &self.spawning]
            .into_iter()
            .flatten()
    }

    /// Whether both are the same handlers of the same guest loads, in the same order.
    pub(crate) fn same_as(&self, other: &ResourceHandlers) -> bool {
        let same = |a: &[Arc<Handler>], b: &[Arc<Handler>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.same_as(b))
        };
        same(&self.index, &other.index)
            && same(&self.event, &other.event)
            && same(&self.changing, &other.changing)
            && same(&self.spawning, &other.spawning)
    }
}

/// The verbs a handler needs on the objects it is handed: every handler is handed them by
/// a list and a watch, and every kind but an index writes to them (results, progress,
/// finalizers).
fn verbs_needed(kind: HandlerKind) -> &'static [&'static str] {
    if kind == HandlerKind::Index {
        &["list", "watch"]
    } else {
        &["list", "watch", "patch"]
    }
}

/// The verbs a `kind` handler of `guest` lacks to be handed the objects of `resource`:
/// none for most resources (selecting them declares them), and for those that hold
/// credentials (Secrets) every verb the handler needs that the guest did not declare
/// with `kapsel::permit!`.
pub(crate) fn undeclared(
    guest: &Guest,
    kind: HandlerKind,
    resource: &Resource,
    known: &[Resource],
) -> Option<&'static [&'static str]> {
    let sensitive = SENSITIVE
        .iter()
        .any(|(group, plural)| resource.group == *group && resource.plural == *plural);
    let verbs = verbs_needed(kind);
    let permitted = guest_may(&guest.describe().permissions, verbs, resource, known);
    (sensitive && !permitted).then_some(verbs)
}

/// What a guest must declare to be handed the objects of `resource`.
pub(crate) fn declaration(resource: &Resource, verbs: &[&str]) -> String {
    let verbs: Vec<String> = verbs.iter().map(|v| format!("\"{v}\"")).collect();
    format!(
        "kapsel::permit!(\"{}\", \"{}\", verbs = [{}])",
        resource.api_version(),
        resource.plural,
        verbs.join(", ")
    )
}

/// Whether `handler` may be handed the objects of `resource` (see [`undeclared`]); says
/// why not when it may not.
fn may_be_handed(handler: &Handler, resource: &Resource, known: &[Resource]) -> bool {
    let Some(verbs) = undeclared(&handler.guest, handler.spec.kind, resource, known) else {
        return true;
    };
    tracing::warn!(
        "Handler '{}' of guest '{}' selects {}, which hold credentials, but its guest did \
         not declare them: it is not handed any (declare {}).",
        handler.spec.id,
        handler.guest.name(),
        resource.plural,
        declaration(resource, verbs)
    );
    false
}

/// Every handler of every loaded guest.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    handlers: Vec<Arc<Handler>>,
    /// The selectors found ambiguous or unresolved when last resolved: warned about once
    /// while they stay so (resolving again as namespaces or CRDs come and go).
    warned: std::sync::Mutex<Vec<Selector>>,
}

impl Registry {
    pub(crate) fn new(handlers: Vec<Handler>) -> Registry {
        Registry {
            handlers: handlers.into_iter().map(Arc::new).collect(),
            warned: std::sync::Mutex::default(),
        }
    }

    /// Asks the guests whose handlers choose their resources (Kopf's callable selector)
    /// about each of `discovered` they were not asked about yet, but Events: once per
    /// handler of a load of a guest and resource, so that resolving is then a lookup.
    /// A handler's questions go out at once (its call slots bound how many run), so
    /// that a cluster of many resources does not wait for them one by one.
    pub(crate) async fn choose(&self, discovered: &[Resource]) {
        for handler in &self.handlers {
            let Some(choices) = handler.spec.choices() else {
                continue;
            };
            let asked: Vec<&Resource> = discovered
                .iter()
                .filter(|r| !only_named(r) && !choices.answered(r))
                .collect();
            let answers =
                futures::future::join_all(asked.iter().map(|r| chooses(handler, r))).await;
            for (resource, chosen) in asked.into_iter().zip(answers) {
                choices.answer(resource, chosen);
            }
        }
    }

    /// The distinct selectors of resource handlers.
    pub(crate) fn selectors(&self) -> Vec<Selector> {
        let mut seen = Vec::new();
        for s in self.handlers.iter().flat_map(|h| &h.spec.selectors) {
            if !seen.contains(s) {
                seen.push(s.clone());
            }
        }
        seen
    }

    /// Resolves every selector against the discovered resources (KOPF.md
    /// §2.3), warning about ambiguous and unresolved ones, and returns the
    /// resources to watch with their handlers.
    ///
    /// Resources without `list` and `watch` cannot be served: said in one line.
    pub(crate) fn serve(&self, discovered: &[Resource]) -> Vec<(Resource, ResourceHandlers)> {
        let mut resolved: HashMap<Selector, Vec<Resource>> = HashMap::new();
        let mut warned = self
            .warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = std::mem::take(&mut *warned);
        for selector in self.selectors() {
            let resolution = resolve(&selector, discovered);
            if !matches!(resolution, Resolution::Resolved(_)) {
                warned.push(selector.clone());
                if before.contains(&selector) {
                    continue;
                }
            }
            match resolution {
                Resolution::Resolved(resources) => {
                    resolved.insert(selector, resources);
                }
                Resolution::Ambiguous(resources) => {
                    let names: Vec<String> = resources.iter().map(Resource::key).collect();
                    tracing::warn!(
                        "Ambiguous resources will not be served (try specifying API groups): {selector} matches {}",
                        names.join(", ")
                    );
                }
                Resolution::Unresolved => {
                    tracing::warn!(
                        "Unresolved resources cannot be served (try creating their CRDs): {selector}"
                    );
                }
            }
        }
        let mut served: BTreeSet<Resource> = BTreeSet::new();
        let mut unwatchable: BTreeSet<String> = BTreeSet::new();
        for resources in resolved.values() {
            for r in resources {
                if r.has_verb("list") && r.has_verb("watch") {
                    served.insert(r.clone());
                } else {
                    unwatchable.insert(r.key());
                }
            }
        }
        // One line, as Kopf says it: a category or everything may reach many.
        if !unwatchable.is_empty() {
            let unwatchable: Vec<String> = unwatchable.into_iter().collect();
            tracing::warn!(
                "Non-watchable resources will not be served: {}",
                unwatchable.join(", ")
            );
        }
        served
            .into_iter()
            .map(|resource| {
                let mut handlers = ResourceHandlers::default();
                for h in &self.handlers {
                    let applies = h
                        .spec
                        .selectors
                        .iter()
                        .any(|s| resolved.get(s).is_some_and(|rs| rs.contains(&resource)));
                    if !applies || !may_be_handed(h, &resource, discovered) {
                        continue;
                    }
                    match h.spec.kind {
                        HandlerKind::Index => handlers.index.push(h.clone()),
                        HandlerKind::Event => handlers.event.push(h.clone()),
                        _ if h.spec.is_changing() => handlers.changing.push(h.clone()),
                        // Stacked attributes share one timer: it runs once per object.
                        HandlerKind::Timer | HandlerKind::Daemon
                            if !handlers
                                .spawning
                                .iter()
                                .any(|t| t.identity() == h.identity()) =>
                        {
                            handlers.spawning.push(h.clone());
                        }
                        _ => {}
                    }
                }
                (resource, handlers)
            })
            .filter(|(_, handlers)| !handlers.is_empty())
            .collect()
    }
}
