//! The log output of the operators that `Runner`s run, each captured on its own.
//!
//! A runner's operator runs on one thread of its own (a current-thread runtime), so its
//! log lines are those emitted on that thread. They are routed there by a process-wide
//! subscriber that writes each event to the buffer registered for the emitting thread,
//! and drops the events of every other thread. (A thread-local `set_default` subscriber
//! is not enough: tracing caches per call site whether anyone listens, and with many
//! operators starting and stopping on threads of their own that cache loses lines; for
//! the same reason the routing filter never lets a call site be cached as always/never.)
//! If the process already has a global subscriber, a thread-local one is the fallback.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;

use tracing::subscriber::Interest;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

/// Captured lines, shared with the operator's thread.
#[derive(Debug, Clone, Default)]
pub(crate) struct Output(Arc<Mutex<Vec<u8>>>);

impl Output {
    fn bytes(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Everything captured so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Output {
    type Writer = Output;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn routes() -> MutexGuard<'static, HashMap<ThreadId, Output>> {
    static ROUTES: OnceLock<Mutex<HashMap<ThreadId, Output>>> = OnceLock::new();
    ROUTES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn route() -> Option<Output> {
    routes().get(&std::thread::current().id()).cloned()
}

/// Writes to the emitting thread's buffer, or nowhere.
#[derive(Clone, Copy)]
struct Routed;

impl<'a> MakeWriter<'a> for Routed {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match route() {
            Some(output) => Box::new(output),
            None => Box::new(std::io::sink()),
        }
    }
}

/// Passes the events of threads with a route (debug and above). Whether a call site
/// is enabled depends on the thread, so it is never cached as always or never.
struct RoutedOnly;

impl<S> tracing_subscriber::layer::Filter<S> for RoutedOnly {
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        *meta.level() <= LevelFilter::DEBUG && route().is_some()
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> Interest {
        if *meta.level() <= LevelFilter::DEBUG {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::DEBUG)
    }
}

/// The lines' format: the level and the message with its fields, no time.
fn layer<S, W>(writer: W) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'l> tracing_subscriber::registry::LookupSpan<'l>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .without_time()
        .with_target(false)
}

/// Captures the log lines of the current thread until dropped.
pub(crate) struct Capture {
    thread: ThreadId,
    _fallback: Option<tracing::subscriber::DefaultGuard>,
}

/// Starts capturing the current thread's log lines (debug and above) into `output`.
pub(crate) fn this_thread(output: Output) -> Capture {
    static GLOBAL: OnceLock<bool> = OnceLock::new();
    let global = *GLOBAL.get_or_init(|| {
        let routed = layer(Routed).with_filter(RoutedOnly);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(routed)).is_ok()
    });
    let thread = std::thread::current().id();
    routes().insert(thread, output.clone());
    let fallback = (!global).then(|| {
        let subscriber =
            tracing_subscriber::registry().with(layer(output).with_filter(LevelFilter::DEBUG));
        tracing::subscriber::set_default(subscriber)
    });
    Capture {
        thread,
        _fallback: fallback,
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        routes().remove(&self.thread);
    }
}
