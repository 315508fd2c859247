//! The operator: resolves the guests' selectors through discovery, keeps one
//! watch stream per served resource and namespace, and feeds every object's
//! events through its queue to the handlers.

mod calls;
mod changes;
mod changing;
mod convert;
mod daemons;
mod discovery;
mod filters;
mod guest_api;
mod indexes;
mod memory;
mod namespaces;
mod patching;
mod posting;
mod process;
mod queue;
mod registry;
mod selector;
mod stream;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) use calls::GuestServices;
pub(crate) use discovery::Resource;
pub(crate) use guest_api::{KnownResources, KubeAccess};
pub(crate) use indexes::Indexes;
pub(crate) use memory::Memories;
pub(crate) use namespaces::Scope;
pub(crate) use stream::StreamSettings;

use crate::journal::{Journal, Record};
use crate::peering::Peering;
use crate::runtime::Guest;
use discovery::Resource as Discovered;
use indexes::Readiness;
use process::{Processor, StreamContext};
use registry::{Kind, Registry};

/// How the operator runs, beyond its guests and its cluster.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) scope: Scope,
    pub(crate) streams: StreamSettings,
    /// At most this many guest calls run at once.
    pub(crate) max_concurrent_calls: usize,
    /// How long in-flight handlers may take to finish when stopping.
    pub(crate) exit_grace: Duration,
    /// Kopf's persistence settings (annotation prefix, finalizer, consistency timeout).
    pub(crate) changes: changes::ChangeSettings,
    /// Handler time (a manual clock under `kapsel test`).
    pub(crate) clock: Arc<dyn crate::clock::Clock>,
    /// How this operator pauses for its peers (KOPF.md §8).
    pub(crate) peering: crate::peering::Settings,
    /// Set once the operator has started its streams (the embedding API's ready signal).
    pub(crate) started: tokio::sync::watch::Sender<bool>,
    /// What the operator remembers about objects; shared so `kapsel test` can tell when
    /// the operator has settled.
    pub(crate) memories: Memories,
    /// What it watches now.
    pub(crate) watched: Watched,
    /// Where `--record` writes what the operator receives and does (off by default).
    pub(crate) recorder: crate::recording::Recorder,
    /// What discovery found last; shared with the activities' Kubernetes calls.
    pub(crate) known: KnownResources,
    /// The guests' indexes; shared with the activities (probes read them, as in Kopf).
    pub(crate) indexes: Indexes,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            scope: Scope::Cluster,
            streams: StreamSettings::default(),
            max_concurrent_calls: 16,
            // Kopf's `queueing.exit_timeout`.
            exit_grace: Duration::from_secs(2),
            changes: changes::ChangeSettings::default(),
            clock: Arc::new(crate::clock::SystemClock),
            peering: crate::peering::Settings::default(),
            started: tokio::sync::watch::Sender::new(false),
            memories: Memories::default(),
            watched: Watched::default(),
            recorder: crate::recording::Recorder::default(),
            known: KnownResources::default(),
            indexes: Indexes::default(),
        }
    }
}

/// Errors that stop the operator.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("the initial API discovery failed")]
    Discovery(#[from] discovery::Error),
    #[error("listing the namespaces failed")]
    Namespaces(#[source] kube::Error),
}

/// Why the streams must be reconsidered.
enum Trigger {
    /// A CRD of this group was added, changed or removed.
    Group(String),
    NamespaceAdded(String),
    NamespaceRemoved(String),
}

/// A stream's identity: the resource's key and the namespace (None: cluster-wide).
type StreamKey = (String, Option<String>);

/// A running watch stream and what stops it.
struct Running {
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

/// Runs the operator until `shutdown` is cancelled.
pub(crate) async fn run(
    client: Client,
    guests: &[Guest],
    settings: Settings,
    journal: Journal,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let mut handlers = Vec::new();
    for guest in guests {
        for reg in &guest.describe().handlers {
            handlers.push(registry::Handler {
                guest: guest.clone(),
                spec: convert::handler_spec(reg),
            });
        }
    }
    // Every kind is served: resource kinds by the streams, activities beside them.
    let registry = Registry::new(handlers);
    let indexes = settings.indexes.clone();
    for guest in guests {
        for reg in guest
            .describe()
            .handlers
            .iter()
            .filter(|r| convert::kind(r.kind) == Kind::Index)
        {
            indexes.declare(guest.name(), &reg.id);
        }
    }
    let pauses = journal.clone();
    // Events go out until the streams have stopped, then get a short grace.
    let posting = CancellationToken::new();
    let (poster, poster_task) = posting::Poster::start(client.clone(), posting.clone());
    // An early return (a failed discovery) stops the poster too.
    let _stop_posting = posting.clone().drop_guard();
    let processor = Processor {
        client: client.clone(),
        indexes,
        readiness: Readiness::default(),
        journal,
        calls: Arc::new(Semaphore::new(settings.max_concurrent_calls.max(1))),
        memories: settings.memories.clone(),
        changes: Arc::new(settings.changes.clone()),
        clock: settings.clock.clone(),
        poster,
        known: settings.known.clone(),
        recorder: settings.recorder.clone(),
    };

    let mut discovered = discovery::scan(&client).await?;
    processor.known.replace(&discovered);
    let mut namespaces = initial_namespaces(&client, &settings.scope).await?;
    let (triggers_tx, mut triggers) = mpsc::unbounded_channel();
    let observers = CancellationToken::new();
    tokio::spawn(observe_crds(
        client.clone(),
        triggers_tx.clone(),
        observers.clone(),
    ));
    if matches!(settings.scope, Scope::Namespaces(_)) && settings.scope.plain_names().is_none() {
        tokio::spawn(observe_namespaces(
            client.clone(),
            settings.scope.clone(),
            triggers_tx,
            observers.clone(),
        ));
    }

    let mut peering = Peering::start(
        client.clone(),
        settings.peering.clone(),
        settings.scope == Scope::Cluster,
        &namespaces,
    );
    let mut pause = peering.pause();
    let mut paused = pause.borrow_and_update().clone();
    let mut streams = Streams {
        client: &client,
        registry: &registry,
        settings: &settings,
        processor: &processor,
        running: HashMap::new(),
    };
    match &paused {
        Some(reason) => {
            tracing::info!("Starting paused: {reason}.");
            pauses.push(Record::Paused {
                reason: reason.clone(),
            });
        }
        None => streams.reconcile(&discovered, &namespaces),
    }
    processor.readiness.check();
    tracing::info!(
        "The operator is running: {} stream(s).",
        streams.running.len()
    );
    settings.started.send_replace(true);

    let mut pause_open = true;
    loop {
        let trigger = tokio::select! {
            () = shutdown.cancelled() => break,
            changed = pause.changed(), if pause_open => {
                pause_open = changed.is_ok();
                let now = pause.borrow_and_update().clone();
                match (&paused, &now) {
                    (None, Some(reason)) => {
                        tracing::info!("Pausing operations: {reason}.");
                        stop_streams(&mut streams.running).await;
                        // Recorded once nothing is handled any more.
                        pauses.push(Record::Paused { reason: reason.clone() });
                    }
                    (Some(_), None) => {
                        tracing::info!("Resuming operations: relisting.");
                        pauses.push(Record::Resumed);
                        streams.reconcile(&discovered, &namespaces);
                    }
                    (Some(_), Some(reason)) => tracing::debug!("Still paused: {reason}."),
                    (None, None) => {}
                }
                paused = now;
                continue;
            }
            trigger = triggers.recv() => trigger,
        };
        let Some(trigger) = trigger else { break };
        match trigger {
            Trigger::Group(group) => {
                let fresh = discovery::scan_group(&client, &group).await;
                discovered.retain(|r| r.group != group);
                discovered.extend(fresh);
                processor.known.replace(&discovered);
            }
            Trigger::NamespaceAdded(ns) => {
                namespaces.insert(ns);
                peering.serve_namespaces(&namespaces);
            }
            Trigger::NamespaceRemoved(ns) => {
                namespaces.remove(&ns);
                peering.serve_namespaces(&namespaces);
            }
        }
        if paused.is_some() {
            // Resuming reconciles with whatever changed meanwhile.
            continue;
        }
        streams.reconcile(&discovered, &namespaces);
    }

    observers.cancel();
    tracing::info!("Stopping {} stream(s).", streams.running.len());
    stop_streams(&mut streams.running).await;
    posting.cancel();
    let _ = poster_task.await;
    peering.stop().await;
    Ok(())
}

/// Stops every watch stream and waits until their in-flight handlers are done.
async fn stop_streams(running: &mut HashMap<StreamKey, Running>) {
    let tasks: Vec<JoinHandle<()>> = running
        .drain()
        .map(|(_, r)| {
            r.cancel.cancel();
            r.task
        })
        .collect();
    futures::future::join_all(tasks).await;
}

/// The namespaces a scope serves now (none for cluster-wide).
pub(crate) async fn initial_namespaces(
    client: &Client,
    scope: &Scope,
) -> Result<BTreeSet<String>, Error> {
    match scope {
        Scope::Cluster => Ok(BTreeSet::new()),
        Scope::Namespaces(_) => {
            if let Some(names) = scope.plain_names() {
                return Ok(names.into_iter().collect());
            }
            let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let list = api
                .list(&Default::default())
                .await
                .map_err(Error::Namespaces)?;
            Ok(list
                .items
                .into_iter()
                .filter_map(|ns| ns.metadata.name)
                .filter(|name| scope.includes(name))
                .collect())
        }
    }
}

/// The watch streams that run, and what starting more of them needs.
struct Streams<'a> {
    client: &'a Client,
    registry: &'a Registry,
    settings: &'a Settings,
    processor: &'a Processor,
    running: HashMap<StreamKey, Running>,
}

impl Streams<'_> {
    /// Starts the streams that should run and stops those that should not.
    fn reconcile(&mut self, discovered: &[Discovered], namespaces: &BTreeSet<String>) {
        reconcile(
            self.client,
            self.registry,
            discovered,
            namespaces,
            self.settings,
            self.processor,
            &mut self.running,
        );
    }
}

/// Starts the streams that should run and stops those that should not.
#[allow(
    clippy::too_many_arguments,
    reason = "called by `Streams::reconcile` alone; the parts are distinct"
)]
fn reconcile(
    client: &Client,
    registry: &Registry,
    discovered: &[Discovered],
    namespaces: &BTreeSet<String>,
    settings: &Settings,
    processor: &Processor,
    running: &mut HashMap<StreamKey, Running>,
) {
    let mut desired: HashMap<StreamKey, (Arc<Resource>, Arc<registry::ResourceHandlers>)> =
        HashMap::new();
    for (resource, handlers) in registry.serve(discovered) {
        let resource = Arc::new(resource);
        let handlers = Arc::new(handlers);
        if !resource.namespaced || settings.scope == Scope::Cluster {
            desired.insert((resource.key(), None), (resource, handlers));
        } else {
            for ns in namespaces {
                desired.insert(
                    (resource.key(), Some(ns.clone())),
                    (resource.clone(), handlers.clone()),
                );
            }
        }
    }
    running.retain(|key, stream| {
        let keep = desired.contains_key(key);
        if !keep {
            tracing::info!("Stopping the watch stream for {}.", describe_stream(key));
            stream.cancel.cancel();
        }
        keep
    });
    for (key, (resource, handlers)) in desired {
        if running.contains_key(&key) {
            continue;
        }
        tracing::info!("Starting the watch stream for {}.", describe_stream(&key));
        let cancel = CancellationToken::new();
        let context = Arc::new(StreamContext::new(
            describe_stream(&key),
            resource,
            handlers.as_ref().clone(),
            cancel.clone(),
        ));
        if !context.handlers.index.is_empty() {
            processor.readiness.expect_stream(&context.id);
        }
        let task = tokio::spawn(run_stream(
            client.clone(),
            context,
            key.1.clone(),
            settings.clone(),
            processor.clone(),
            cancel.clone(),
        ));
        running.insert(key, Running { cancel, task });
    }
    settings.watched.replace(
        running
            .keys()
            .map(|(resource, _)| resource.clone())
            .collect(),
    );
}

/// The resources the operator watches now (keys as [`Resource::key`]); shared so that
/// `kapsel test` knows which of its writes the operator will see.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched(Arc<std::sync::Mutex<BTreeSet<String>>>);

impl Watched {
    fn replace(&self, keys: BTreeSet<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = keys;
    }

    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }
}

fn describe_stream((resource, namespace): &StreamKey) -> String {
    match namespace {
        Some(ns) => format!("{resource} in namespace {ns}"),
        None => resource.clone(),
    }
}

/// One stream: the watcher, the per-object router, and the readiness bookkeeping.
async fn run_stream(
    client: Client,
    context: Arc<StreamContext>,
    namespace: Option<String>,
    settings: Settings,
    processor: Processor,
    cancel: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watch = tokio::spawn(stream::run(
        client,
        context.resource.clone(),
        namespace,
        StreamSettings {
            recorder: settings.recorder.clone(),
            ..settings.streams.clone()
        },
        tx,
        cancel.child_token(),
    ));
    let indexed = !context.handlers.index.is_empty();
    let readiness = processor.readiness.clone();
    let memories = processor.memories.clone();
    let ctx = context.clone();
    let mut router = queue::Router::new(move |event| {
        let processor = processor.clone();
        let ctx = ctx.clone();
        async move { processor.process(&ctx, event).await }
    })
    .counted(settings.streams.metrics.queue(&context.resource.key()));
    loop {
        let signal = tokio::select! {
            () = cancel.cancelled() => break,
            signal = rx.recv() => signal,
        };
        match signal {
            None => break,
            Some(stream::StreamSignal::Listed) => {
                if indexed {
                    readiness.stream_listed(&context.id);
                }
            }
            Some(stream::StreamSignal::Object(event)) => {
                if indexed && event.event_type == stream::EventType::Listed {
                    readiness.listed_object(&context.id, &event.key);
                }
                // Before routing: a sleep of this object's worker may end for it.
                memories.arrived(&event.key);
                router.route(event);
            }
        }
    }
    watch.abort();
    router.shutdown(settings.exit_grace).await;
    // The timers and daemons stopped with the stream (`stopping` is its token); a call in flight
    // gets the same grace as the handlers above.
    context.daemons.close();
    if tokio::time::timeout(settings.exit_grace, context.daemons.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            "Timers or daemons of {} still run after {:?}; leaving them.",
            context.id,
            settings.exit_grace
        );
    }
    if indexed {
        readiness.stream_gone(&context.id);
    }
}

/// Watches CRDs; any change after the initial listing rescans that CRD's group
/// (KOPF.md §2.4), so resources appear and vanish without a restart.
async fn observe_crds(
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
async fn observe_namespaces(
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

#[cfg(any(test, feature = "testing"))]
/// The one resource a name means, as kubectl and case files write it: a plural, kind,
/// singular or short name, optionally followed by its group (`kopfexamples.kopf.dev`).
pub(crate) async fn find_resource(client: &Client, name: &str) -> Result<Resource, String> {
    let (name_part, group) = match name.split_once('.') {
        Some((n, g)) => (n, Some(g.to_owned())),
        None => (name, None),
    };
    let selector = selector::Selector {
        group,
        version: None,
        name: selector::Name::Any(name_part.to_owned()),
    };
    find(client, &selector, name).await
}

#[cfg(any(test, feature = "testing"))]
/// The resource of objects with this `apiVersion` and `kind`.
pub(crate) async fn find_kind(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Resource, String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let selector = selector::Selector {
        group: Some(group.to_owned()),
        version: Some(version.to_owned()),
        name: selector::Name::Kind(kind.to_owned()),
    };
    find(client, &selector, &format!("{kind} ({api_version})")).await
}

#[cfg(any(test, feature = "testing"))]
async fn find(
    client: &Client,
    selector: &selector::Selector,
    name: &str,
) -> Result<Resource, String> {
    let discovered = discovery::scan(client)
        .await
        .map_err(|e| format!("discovery failed: {e}"))?;
    match selector::resolve(selector, &discovered) {
        selector::Resolution::Resolved(found) if found.len() == 1 => {
            found.into_iter().next().ok_or_else(|| name.to_owned())
        }
        selector::Resolution::Resolved(found) | selector::Resolution::Ambiguous(found) => {
            let names: Vec<String> = found.iter().map(Resource::key).collect();
            Err(format!(
                "{name} is ambiguous: {} (add the group)",
                names.join(", ")
            ))
        }
        selector::Resolution::Unresolved => Err(format!("the cluster serves no resource {name}")),
    }
}

/// What the guests' selectors and permissions mean on a cluster (KOPF.md §2.3), for
/// `kapsel rbac`.
#[derive(Debug, Default)]
pub(crate) struct GuestNeeds {
    /// Resources the guests' handlers watch, and whether they patch them (results,
    /// progress records, finalizers: every kind but index handlers).
    pub(crate) watched: Vec<(Resource, bool)>,
    /// Resources the guests' Kubernetes calls may use, with the verbs declared.
    pub(crate) permitted: Vec<(Resource, Vec<String>)>,
    /// Selectors that resolve to nothing (or ambiguously), as written.
    pub(crate) unresolved: Vec<String>,
}

/// Resolves every handler selector and every permission of `guests` on the cluster.
///
/// # Errors
/// When discovery fails.
pub(crate) async fn guest_needs(client: &Client, guests: &[Guest]) -> Result<GuestNeeds, String> {
    let discovered = discovery::scan(client)
        .await
        .map_err(|e| format!("discovery failed: {e}"))?;
    let mut needs = GuestNeeds::default();
    let resolve = |wit: &crate::runtime::Selector, needs: &mut GuestNeeds| {
        let selector = convert::selector(wit);
        match selector::resolve(&selector, &discovered) {
            selector::Resolution::Resolved(found) => found,
            selector::Resolution::Ambiguous(_) | selector::Resolution::Unresolved => {
                needs.unresolved.push(selector.to_string());
                Vec::new()
            }
        }
    };
    for guest in guests {
        let described = guest.describe();
        for registration in &described.handlers {
            let patches = convert::kind(registration.kind) != Kind::Index;
            for wit in &registration.selectors {
                for resource in resolve(wit, &mut needs) {
                    needs.watched.push((resource, patches));
                }
            }
        }
        for permission in &described.permissions {
            for resource in resolve(&permission.target, &mut needs) {
                needs.permitted.push((resource, permission.verbs.clone()));
            }
        }
    }
    Ok(needs)
}
