//! [`Streams`]: which watch streams run — one per served resource and namespace — and each
//! stream's loop: its watcher (`watching`) and the objects it knows (`known`, compressed),
//! the per-object router that feeds the handling, and the readiness bookkeeping of
//! indexed streams.
//!
//! When guests are reloaded, a stream whose handlers changed keeps running: it takes the
//! new handlers for its next events, and replays the objects it knows as a listing (as a
//! restarted operator would see them), so that what depends on the handler set follows
//! at once: timers and daemons of removed or replaced handlers stop and new ones start,
//! new indexes fill, and finalizers no longer needed are released. A stream no handler
//! serves any more *retires*: it replays its objects with no handlers at all (releasing
//! the finalizer and stopping the daemons of each), then closes. Events already being
//! handled finish with the handlers they began with.

mod known;
mod watching;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::{Resource, Scope};
use crate::handlers::{Registry, ResourceHandlers};
use crate::journal::{Journal, Record};
use crate::metrics::Metrics;
use crate::reactor::handling::{Handling, StreamContext};
use crate::reactor::objects::{EventType, Router, Turns};
use crate::recording::Recorder;
use crate::runtime::StopReasons;
use watching::{StreamSignal, Watch};

pub(crate) use watching::StreamSettings;

/// A stream's identity: the resource's key and the namespace (None: cluster-wide).
type StreamKey = (String, Option<String>);

/// How long a retiring stream's objects may take to be handled without handlers (their
/// in-flight calls finishing first, bounded by their own deadlines), before it closes.
const RETIRE_GRACE: Duration = Duration::from_secs(60);

/// A running watch stream and what stops it.
struct Running {
    context: Arc<StreamContext>,
    cancel: CancellationToken,
    /// Cancelled to retire the stream (see the module's documentation).
    retire: CancellationToken,
    task: JoinHandle<()>,
}

/// What every stream runs with.
#[derive(Clone)]
pub(crate) struct StreamParts {
    pub(crate) client: Client,
    pub(crate) handling: Handling,
    pub(crate) settings: StreamSettings,
    /// The turns every stream's objects take too when `queueing.worker_limit` bounds
    /// them all together.
    pub(crate) operator_turns: Option<Arc<tokio::sync::Semaphore>>,
    /// How long in-flight handlers may take to finish when a stream stops.
    pub(crate) exit_grace: Duration,
    /// Where streams report restarts, queue depth and their death.
    pub(crate) metrics: Metrics,
    /// Where `--record` writes the events the streams receive.
    pub(crate) recorder: Recorder,
    /// What the operator watches now, for `kapsel test`.
    pub(crate) watched: Watched,
    /// Where streams note their starting, closing and relisting.
    pub(crate) journal: Journal,
    /// What tests break on purpose.
    #[cfg(feature = "faults")]
    pub(crate) faults: crate::faults::Faults,
}

/// The watch streams that run.
pub(crate) struct Streams {
    parts: StreamParts,
    running: HashMap<StreamKey, Running>,
    /// Streams stopping or retiring; a stream started for the same key waits for them.
    ending: HashMap<StreamKey, Running>,
}

impl Streams {
    pub(crate) fn new(parts: StreamParts) -> Streams {
        Streams {
            parts,
            running: HashMap::new(),
            ending: HashMap::new(),
        }
    }

    /// How many streams run.
    pub(crate) fn len(&self) -> usize {
        self.running.len()
    }

    /// Starts the streams that should run and stops those that should not.
    pub(crate) fn reconcile(
        &mut self,
        registry: &Registry,
        discovered: &[Resource],
        scope: &Scope,
        namespaces: &BTreeSet<String>,
    ) {
        let desired = desired_streams(registry, discovered, scope, namespaces);
        self.ending.retain(|_, stream| !stream.task.is_finished());
        self.stop_unwanted(&desired, discovered, namespaces);
        for (key, (resource, handlers)) in desired {
            match self.running.get(&key) {
                Some(stream) => {
                    if !stream.context.handlers().resource.same_as(&handlers) {
                        tracing::info!(
                            "The handlers of {} changed: replaying its objects.",
                            describe(&key)
                        );
                        stream.context.replace_handlers(handlers.as_ref().clone());
                    }
                }
                None => self.start(key, resource, &handlers),
            }
        }
        self.parts.watched.replace(
            self.running
                .keys()
                .map(|(resource, _)| resource.clone())
                .collect(),
        );
    }

    /// Stops the running streams that are not `desired`: retired (their objects' work
    /// done first) when their resource is still served, else stopped.
    fn stop_unwanted(
        &mut self,
        desired: &Desired,
        discovered: &[Resource],
        namespaces: &BTreeSet<String>,
    ) {
        let unwanted: Vec<StreamKey> = self
            .running
            .keys()
            .filter(|key| !desired.contains_key(*key))
            .cloned()
            .collect();
        for key in unwanted {
            let Some(stream) = self.running.remove(&key) else {
                continue;
            };
            let (resource, namespace) = &key;
            let served = discovered.iter().any(|r| &r.key() == resource)
                && namespace.as_ref().is_none_or(|ns| namespaces.contains(ns));
            if served {
                // Its resource is still there: its handlers were reloaded away.
                tracing::info!(
                    "Retiring the watch stream for {}: no handler serves it any more.",
                    describe(&key)
                );
                stream.retire.cancel();
            } else {
                tracing::info!("Stopping the watch stream for {}.", describe(&key));
                stream.cancel.cancel();
            }
            self.ending.insert(key, stream);
        }
    }

    /// Starts the stream of `key`, once a stream of the same key still ending has ended.
    fn start(&mut self, key: StreamKey, resource: Arc<Resource>, handlers: &ResourceHandlers) {
        tracing::info!("Starting the watch stream for {}.", describe(&key));
        let cancel = CancellationToken::new();
        let context = Arc::new(StreamContext::new(
            describe(&key),
            resource,
            handlers.clone(),
            cancel.clone(),
            Turns::new(
                self.parts.settings.objects_in_flight,
                self.parts.operator_turns.clone(),
            ),
        ));
        if !handlers.index.is_empty() {
            self.parts.handling.readiness().expect_stream(&context.id);
        }
        // A stream of this key still ending is stopped for good, and the new one
        // starts once it has ended: one object is never handled by two streams.
        let previous = self.ending.remove(&key).map(|ending| {
            ending.cancel.cancel();
            ending.task
        });
        let retire = CancellationToken::new();
        self.parts.journal.push(Record::StreamStarted {
            resource: key.0.clone(),
            namespace: key.1.clone(),
        });
        let task = tokio::spawn(run_stream(
            self.parts.clone(),
            context.clone(),
            (key.clone(), cancel.clone(), retire.clone()),
            previous,
        ));
        self.running.insert(
            key,
            Running {
                context,
                cancel,
                retire,
                task,
            },
        );
    }

    /// Stops every watch stream and waits until their in-flight handlers are done; their
    /// timers and daemons are told `reason`.
    pub(crate) async fn stop_all(&mut self, reason: StopReasons) {
        let tasks: Vec<JoinHandle<()>> = self
            .running
            .drain()
            .chain(self.ending.drain())
            .map(|(_, r)| {
                r.context.stops_because(reason);
                r.cancel.cancel();
                r.task
            })
            .collect();
        futures::future::join_all(tasks).await;
    }
}

/// The resources the operator watches now (keys as [`Resource::key`]); shared so that
/// `kapsel test` knows which of its writes the operator will see.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched(Arc<std::sync::Mutex<BTreeSet<String>>>);

impl Watched {
    fn replace(&self, keys: BTreeSet<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = keys;
    }

    #[cfg(feature = "testing")]
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }
}

fn describe((resource, namespace): &StreamKey) -> String {
    match namespace {
        Some(ns) => format!("{resource} in namespace {ns}"),
        None => resource.clone(),
    }
}

/// The streams that should run, with what they watch and their handlers.
type Desired = HashMap<StreamKey, (Arc<Resource>, Arc<ResourceHandlers>)>;

/// One stream per served resource: cluster-wide, or one per served namespace.
fn desired_streams(
    registry: &Registry,
    discovered: &[Resource],
    scope: &Scope,
    namespaces: &BTreeSet<String>,
) -> Desired {
    let mut desired = Desired::new();
    for (resource, handlers) in registry.serve(discovered) {
        let resource = Arc::new(resource);
        let handlers = Arc::new(handlers);
        if !resource.namespaced || *scope == Scope::Cluster {
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
    desired
}

/// One stream: the watcher, the per-object router, the readiness bookkeeping, and the
/// replays its handler changes ask for. `previous` is a stream of the same key still
/// ending: this one starts once it has ended.
async fn run_stream(
    parts: StreamParts,
    context: Arc<StreamContext>,
    (key, cancel, retire): (StreamKey, CancellationToken, CancellationToken),
    previous: Option<JoinHandle<()>>,
) {
    if let Some(previous) = previous {
        let _ = previous.await;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (replay, replays) = mpsc::unbounded_channel();
    let watch = spawn_watch(&parts, &context, &key, (tx, replays), &cancel);
    let readiness = parts.handling.readiness().clone();
    let memories = parts.handling.memories().clone();
    let (handling, ctx) = (parts.handling.clone(), context.clone());
    let idle_timeout = parts.settings.idle_timeout;
    let mut router = Router::new(context.turns.clone(), idle_timeout, move |event, turn| {
        let (handling, ctx) = (handling.clone(), ctx.clone());
        async move { handling.process(&ctx, event, turn).await }
    })
    .counted(parts.metrics.queue(&context.resource.key()));
    let mut changes = context.handler_changes();
    // The last replay asked for, and whether the stream closes once it is handled.
    let (mut requested, mut retiring) = (0_u64, false);
    loop {
        let signal = tokio::select! {
            () = cancel.cancelled() => break,
            () = retire.cancelled(), if !retiring => {
                retiring = true;
                context.replace_handlers(ResourceHandlers::default());
                continue;
            }
            changed = changes.changed() => {
                if changed.is_ok() {
                    requested += 1;
                    let _ = replay.send(requested);
                }
                continue;
            }
            signal = rx.recv() => signal,
        };
        let indexed = !context.handlers().resource.index.is_empty();
        match signal {
            None => break,
            Some(StreamSignal::Listed { relisted }) => {
                if indexed {
                    readiness.stream_listed(&context.id);
                }
                if relisted {
                    note_relisted(&parts, &context, &key);
                }
            }
            Some(StreamSignal::Replayed(seq)) => {
                if retiring && seq == requested {
                    break;
                }
            }
            Some(StreamSignal::Object(event)) => {
                if indexed && event.event_type == EventType::Listed {
                    readiness.listed_object(&context.id, &event.key);
                }
                // Before routing: a sleep of this object's worker may end for it.
                memories.arrived(&event.key);
                router.route(event);
            }
        }
    }
    watch.abort();
    // A retiring stream lets its objects be handled (without handlers) to the end.
    let grace = if retiring {
        RETIRE_GRACE
    } else {
        parts.exit_grace
    };
    router.shutdown(grace).await;
    stop_tasks(&parts, &context).await;
    readiness.stream_gone(&context.id);
    parts.journal.push(Record::StreamStopped {
        resource: key.0,
        namespace: key.1,
    });
}

/// Starts the watch of a stream: its signals go to `tx`, the replays it is asked for come
/// from `replays`.
fn spawn_watch(
    parts: &StreamParts,
    context: &StreamContext,
    key: &StreamKey,
    (tx, replays): (
        mpsc::UnboundedSender<StreamSignal>,
        mpsc::UnboundedReceiver<u64>,
    ),
    cancel: &CancellationToken,
) -> JoinHandle<()> {
    let watching = watching::run(
        Watch {
            client: parts.client.clone(),
            resource: context.resource.clone(),
            namespace: key.1.clone(),
            settings: parts.settings.clone(),
            metrics: parts.metrics.clone(),
            recorder: parts.recorder.clone(),
        },
        tx,
        replays,
        cancel.child_token(),
    );
    #[cfg(feature = "faults")]
    let watching = parts
        .faults
        .clone()
        .killable(context.resource.key(), watching);
    tokio::spawn(watching)
}

/// A relisting's objects were routed: noted, so that once the operator has settled after
/// this record, the relisting has been handled.
fn note_relisted(parts: &StreamParts, context: &StreamContext, key: &StreamKey) {
    tracing::info!(
        "Relisted the watch stream for {}: its watch history had expired.",
        context.id
    );
    parts.journal.push(Record::Relisted {
        resource: context.resource.key(),
        namespace: key.1.clone(),
    });
}

/// Stops the timers and daemons of a stream that stopped (`stopping` is its token); a
/// call in flight gets the same grace as the handlers.
async fn stop_tasks(parts: &StreamParts, context: &StreamContext) {
    context.tasks.close();
    context.stopping.cancel();
    if tokio::time::timeout(parts.exit_grace, context.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            "Timers or daemons of {} still run after {:?}; leaving them.",
            context.id,
            parts.exit_grace
        );
    }
}
