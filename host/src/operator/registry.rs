//! The handlers every loaded guest declared, and which of them serve a resource.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::discovery::Resource;
use super::filters::{Filters, Matcher};
use super::selector::{Resolution, Selector};
use crate::runtime::Guest;

/// Handler kinds, as the contract names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Event,
    Index,
    Create,
    Update,
    Delete,
    Resume,
    Field,
    Timer,
    Daemon,
    Probe,
    Startup,
    Cleanup,
}

/// What an arbitrary failure means for a handler (KOPF.md §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorsMode {
    Temporary,
    Permanent,
    Ignored,
}

/// One registration, as the host uses it.
#[derive(Debug, Clone)]
pub(crate) struct HandlerSpec {
    pub(crate) id: String,
    pub(crate) kind: Kind,
    pub(crate) selectors: Vec<Selector>,
    pub(crate) filters: Filters,
    pub(crate) has_when: bool,
    pub(crate) errors: Option<ErrorsMode>,
    /// Seconds to wait after an arbitrary failure before retrying.
    pub(crate) backoff_seconds: Option<f64>,
    /// Changing handlers: give up this long after the first attempt.
    pub(crate) timeout_seconds: Option<f64>,
    /// Changing handlers: at most this many attempts.
    pub(crate) retries: Option<u32>,
    /// on.delete: no finalizer is needed for this handler.
    pub(crate) optional: bool,
    /// on.resume: also resume objects that are being deleted.
    pub(crate) deleted: bool,
    /// on.update/on.field: the field's old value must match.
    pub(crate) old: Option<Matcher>,
    /// on.update/on.field: the field's new value must match.
    pub(crate) new: Option<Matcher>,
    /// JSON, passed back to the handler.
    pub(crate) param: Option<String>,
    /// Timers: when they run (KOPF.md §1.10).
    pub(crate) schedule: Schedule,
}

/// When a timer runs, in seconds (absent or not positive: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Schedule {
    pub(crate) interval: Option<f64>,
    pub(crate) initial_delay: Option<f64>,
    pub(crate) idle: Option<f64>,
    /// Ticks aligned to the first one (`interval - elapsed mod interval`).
    pub(crate) sharp: bool,
}

impl HandlerSpec {
    /// The retry delay after an arbitrary failure (Kopf's `execution.default_backoff`: 60 s).
    pub(crate) fn backoff(&self) -> std::time::Duration {
        self.backoff_seconds
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(
                std::time::Duration::from_secs(60),
                std::time::Duration::from_secs_f64,
            )
    }

    /// The effective errors mode: the declared one, else Kopf's default for the kind.
    pub(crate) fn errors_mode(&self) -> ErrorsMode {
        self.errors.unwrap_or(match self.kind {
            Kind::Event | Kind::Index => ErrorsMode::Ignored,
            _ => ErrorsMode::Temporary,
        })
    }
}

/// A registration of a loaded guest.
#[derive(Debug)]
pub(crate) struct Handler {
    pub(crate) guest: Guest,
    pub(crate) spec: HandlerSpec,
}

impl Handler {
    /// Handlers are deduplicated per call by guest and id (KOPF.md §1.4).
    pub(crate) fn identity(&self) -> (String, String) {
        (self.guest.name().to_owned(), self.spec.id.clone())
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
        self.index.is_empty()
            && self.event.is_empty()
            && self.changing.is_empty()
            && self.spawning.is_empty()
    }
}

impl Kind {
    /// The kinds that take part in change detection.
    pub(crate) fn is_changing(self) -> bool {
        matches!(
            self,
            Kind::Create | Kind::Update | Kind::Delete | Kind::Resume | Kind::Field
        )
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
            match super::selector::resolve(&selector, discovered) {
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
                        Kind::Index => handlers.index.push(h.clone()),
                        Kind::Event => handlers.event.push(h.clone()),
                        kind if kind.is_changing() => handlers.changing.push(h.clone()),
                        // Stacked attributes share one timer: it runs once per object.
                        Kind::Timer | Kind::Daemon
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
