//! Which handlers serve which resource: every registration of every loaded guest,
//! resolved against what discovery found (KOPF.md §2.3).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::spec::Handler;
use crate::cluster::{Resolution, Resource, Selector, resolve};
use crate::runtime::HandlerKind;

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
        self.index.is_empty()
            && self.event.is_empty()
            && self.changing.is_empty()
            && self.spawning.is_empty()
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

/// Every handler of every loaded guest.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    handlers: Vec<Arc<Handler>>,
}

impl Registry {
    pub(crate) fn new(handlers: Vec<Handler>) -> Registry {
        Registry {
            handlers: handlers.into_iter().map(Arc::new).collect(),
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
    /// Resources without `list` and `watch` cannot be served.
    pub(crate) fn serve(&self, discovered: &[Resource]) -> Vec<(Resource, ResourceHandlers)> {
        let mut resolved: HashMap<Selector, Vec<Resource>> = HashMap::new();
        for selector in self.selectors() {
            match resolve(&selector, discovered) {
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
        for resources in resolved.values() {
            for r in resources {
                if r.has_verb("list") && r.has_verb("watch") {
                    served.insert(r.clone());
                } else {
                    tracing::warn!("Non-watchable resources will not be served: {}", r.key());
                }
            }
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
                    if !applies {
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
