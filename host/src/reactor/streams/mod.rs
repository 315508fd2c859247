//! [`Streams`]: which watch streams run — one per served resource and namespace — and each
//! stream's loop: its watcher (`watching`), the per-object router that feeds the
//! handling, and the readiness bookkeeping of indexed streams.

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
use crate::reactor::objects::{EventType, Router};
use crate::recording::Recorder;
use watching::{StreamSignal, Watch};

pub(crate) use watching::StreamSettings;

/// A stream's identity: the resource's key and the namespace (None: cluster-wide).
type StreamKey = (String, Option<String>);

/// A running watch stream and what stops it.
struct Running {
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

/// What every stream runs with.
#[derive(Clone)]
pub(crate) struct StreamParts {
    pub(crate) client: Client,
    pub(crate) handling: Handling,
    pub(crate) settings: StreamSettings,
    /// How long in-flight handlers may take to finish when a stream stops.
    pub(crate) exit_grace: Duration,
    /// Where streams report restarts, queue depth and their death.
    pub(crate) metrics: Metrics,
    /// Where `--record` writes the events the streams receive.
    pub(crate) recorder: Recorder,
    /// Where streams note their relistings.
    pub(crate) journal: Journal,
    /// What the operator watches now, for `kapsel test`.
    pub(crate) watched: Watched,
}

/// The watch streams that run.
pub(crate) struct Streams {
    parts: StreamParts,
    running: HashMap<StreamKey, Running>,
}

impl Streams {
    pub(crate) fn new(parts: StreamParts) -> Streams {
        Streams {
            parts,
            running: HashMap::new(),
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
        let mut desired: HashMap<StreamKey, (Arc<Resource>, Arc<ResourceHandlers>)> =
            HashMap::new();
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
        self.running.retain(|key, stream| {
            let keep = desired.contains_key(key);
            if !keep {
                tracing::info!("Stopping the watch stream for {}.", describe(key));
                stream.cancel.cancel();
            }
            keep
        });
        for (key, (resource, handlers)) in desired {
            if self.running.contains_key(&key) {
                continue;
            }
            tracing::info!("Starting the watch stream for {}.", describe(&key));
            let cancel = CancellationToken::new();
            let context = Arc::new(StreamContext::new(
                describe(&key),
                resource,
                handlers.as_ref().clone(),
                cancel.clone(),
            ));
            if !context.handlers.index.is_empty() {
                self.parts.handling.readiness().expect_stream(&context.id);
            }
            let task = tokio::spawn(run_stream(
                self.parts.clone(),
                context,
                key.1.clone(),
                cancel.clone(),
            ));
            self.running.insert(key, Running { cancel, task });
        }
        self.parts.watched.replace(
            self.running
                .keys()
                .map(|(resource, _)| resource.clone())
                .collect(),
        );
    }

    /// Stops every watch stream and waits until their in-flight handlers are done.
    pub(crate) async fn stop_all(&mut self) {
        let tasks: Vec<JoinHandle<()>> = self
            .running
            .drain()
            .map(|(_, r)| {
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

/// One stream: the watcher, the per-object router, and the readiness bookkeeping.
async fn run_stream(
    parts: StreamParts,
    context: Arc<StreamContext>,
    namespace: Option<String>,
    cancel: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watch = tokio::spawn(watching::run(
        Watch {
            client: parts.client.clone(),
            resource: context.resource.clone(),
            namespace: namespace.clone(),
            settings: parts.settings.clone(),
            metrics: parts.metrics.clone(),
            recorder: parts.recorder.clone(),
        },
        tx,
        cancel.child_token(),
    ));
    let indexed = !context.handlers.index.is_empty();
    let readiness = parts.handling.readiness().clone();
    let memories = parts.handling.memories().clone();
    let (handling, ctx) = (parts.handling.clone(), context.clone());
    let mut router = Router::new(move |event| {
        let (handling, ctx) = (handling.clone(), ctx.clone());
        async move { handling.process(&ctx, event).await }
    })
    .counted(parts.metrics.queue(&context.resource.key()));
    loop {
        let signal = tokio::select! {
            () = cancel.cancelled() => break,
            signal = rx.recv() => signal,
        };
        match signal {
            None => break,
            Some(StreamSignal::Listed { relisted }) => {
                if indexed {
                    readiness.stream_listed(&context.id);
                }
                if relisted {
                    // Noted after the listed objects were routed: once the operator has
                    // settled after this record, the relisting has been handled.
                    tracing::info!(
                        "Relisted the watch stream for {}: its watch history had expired.",
                        context.id
                    );
                    parts.journal.push(Record::Relisted {
                        resource: context.resource.key(),
                        namespace: namespace.clone(),
                    });
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
    router.shutdown(parts.exit_grace).await;
    // The timers and daemons stopped with the stream (`stopping` is its token); a call in
    // flight gets the same grace as the handlers above.
    context.tasks.close();
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
    if indexed {
        readiness.stream_gone(&context.id);
    }
}
