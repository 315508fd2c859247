//! [`Guest`]: a guest loaded and checked, ready to be called (see `loader` and `invoke`);
//! [`ServedGuests`]: the guests an operator serves now.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use super::bindings::{AdmissionDeclaration, DescribeOutput, GuestWorldPre, SpawningOptions};
use super::cache::Digest;
use super::engine::Runtime;
use super::state::HostState;

/// A guest loaded and checked: compiled once, linked, and described. Each call instantiates
/// it afresh, so a guest that trapped, timed out or ran out of memory is as good as new for
/// the next call, and no state leaks between objects.
///
/// Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub(crate) struct Guest {
    pub(super) inner: Arc<GuestInner>,
}

pub(super) struct GuestInner {
    /// The file stem, used in logs and as the guest's identity.
    pub(super) name: Arc<str>,
    pub(super) path: PathBuf,
    /// The hash of the file's bytes: which version of the guest this is.
    pub(super) digest: Digest,
    /// Unique per load in this process: a reload makes another, even of the same file.
    pub(super) load: u64,
    /// How its machine code was made, for the line that announces it.
    pub(super) compilation: Compilation,
    /// Compiled and linked; instantiating it is the only per-call work.
    pub(super) pre: GuestWorldPre<HostState>,
    /// What `describe()` answered at load (already checked).
    pub(super) describe: DescribeOutput,
    /// The further options of its timers and daemons it declared then (checked too).
    pub(super) spawning: Vec<SpawningOptions>,
    /// The ids of its login handlers (startup registrations it named in `login.declare`).
    pub(super) logins: Vec<String>,
    /// The ids of its handlers that select every resource (named in
    /// `selection.everything`).
    pub(super) everything: Vec<String>,
    /// The ids of its handlers whose resources it chooses (named in `selection.chosen`).
    pub(super) chosen: Vec<String>,
    /// Its admission handlers (event registrations it named in `admission.declare`).
    pub(super) admissions: Vec<AdmissionDeclaration>,
    /// Keeps the engine's epoch ticker alive while the guest may be called.
    pub(super) runtime: Runtime,
}

/// How a guest's machine code was made: compiled now (in this process or in a helper
/// process), or read from the compiled-guest cache; and how long that took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compilation {
    Compiled(Duration),
    CompiledApart(Duration),
    Cached(Duration),
}

impl Compilation {
    /// Whether it came from the cache, and how long it took.
    pub(crate) fn parts(self) -> (bool, Duration) {
        match self {
            Compilation::Compiled(took) | Compilation::CompiledApart(took) => (false, took),
            Compilation::Cached(took) => (true, took),
        }
    }
}

impl fmt::Display for Compilation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compilation::Compiled(took) => write!(f, "compiled in {} ms", took.as_millis()),
            Compilation::CompiledApart(took) => {
                write!(f, "compiled by a helper process in {} ms", took.as_millis())
            }
            Compilation::Cached(took) => write!(f, "from the cache in {} ms", took.as_millis()),
        }
    }
}

impl fmt::Debug for Guest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.inner.name)
            .field("path", &self.inner.path)
            .field("digest", &self.inner.digest)
            .field("handlers", &self.inner.describe.handlers.len())
            .finish_non_exhaustive()
    }
}

impl Guest {
    /// The guest's name: its file stem.
    pub(crate) fn name(&self) -> &str {
        &self.inner.name
    }

    /// The file the guest was loaded from.
    pub(crate) fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The hash of the file it was loaded from: which version of the guest this is.
    pub(crate) fn digest(&self) -> Digest {
        self.inner.digest
    }

    /// How its machine code was made.
    pub(crate) fn compilation(&self) -> Compilation {
        self.inner.compilation
    }

    /// Which load of a guest this is (unique in the process; a reload makes another, even
    /// of the same file): handlers, timers and daemons of a replaced guest are told apart
    /// by it.
    pub(crate) fn load(&self) -> u64 {
        self.inner.load
    }

    /// Whether both are the same load of a guest.
    pub(crate) fn same_load(&self, other: &Guest) -> bool {
        self.load() == other.load()
    }

    /// What the guest declared at load.
    pub(crate) fn describe(&self) -> &DescribeOutput {
        &self.inner.describe
    }

    /// The further options of its timers and daemons it declared at load.
    pub(crate) fn spawning(&self) -> &[SpawningOptions] {
        &self.inner.spawning
    }

    /// The further options of the timer or daemon `id`, if it declared any.
    pub(crate) fn spawning_options(&self, id: &str) -> Option<&SpawningOptions> {
        self.inner.spawning.iter().find(|options| options.id == id)
    }

    /// The ids of its login handlers.
    pub(crate) fn logins(&self) -> &[String] {
        &self.inner.logins
    }

    /// Whether the registration `id` is a login handler (Kopf's `on.login`): declared as
    /// a startup registration and named in `login.declare`.
    pub(crate) fn is_login(&self, id: &str) -> bool {
        self.inner.logins.iter().any(|login| login == id)
    }

    /// Its admission handlers (Kopf's `on.validate` and `on.mutate`).
    pub(crate) fn admissions(&self) -> &[AdmissionDeclaration] {
        &self.inner.admissions
    }

    /// Whether the registration `id` is an admission handler: declared as an event
    /// registration and named in `admission.declare`. The reactor never calls it.
    pub(crate) fn is_admission(&self, id: &str) -> bool {
        self.inner
            .admissions
            .iter()
            .any(|declared| declared.id == id)
    }

    /// Whether the registrations `id` select every resource (Kopf's `kopf.EVERYTHING`):
    /// named in `selection.everything`.
    pub(crate) fn selects_everything(&self, id: &str) -> bool {
        self.inner
            .everything
            .iter()
            .any(|everything| everything == id)
    }

    /// The ids of its handlers that select every resource.
    pub(crate) fn everything(&self) -> &[String] {
        &self.inner.everything
    }

    /// Whether the registrations `id` select the resources the guest chooses (Kopf's
    /// callable selector): named in `selection.chosen`.
    pub(crate) fn chooses_resources(&self, id: &str) -> bool {
        self.inner.chosen.iter().any(|chosen| chosen == id)
    }

    /// The ids of its handlers whose resources it chooses.
    pub(crate) fn chosen(&self) -> &[String] {
        &self.inner.chosen
    }

    /// The runtime the guest was loaded into (every guest of an operator shares one).
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    pub(super) fn shared_name(&self) -> &Arc<str> {
        &self.inner.name
    }

    pub(super) fn pre(&self) -> &GuestWorldPre<HostState> {
        &self.inner.pre
    }
}

/// The guests an operator serves now, and the files whose new version it refused (with
/// why), shared with what reports on them: the liveness endpoint (the probes, the
/// refusals), the admission webhooks and the cleanup handlers at exit. Reloads replace
/// both. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct ServedGuests {
    served: Arc<RwLock<Served>>,
    /// Counts the reloads, for those who act on one (the managed webhook configurations).
    reloads: Arc<tokio::sync::watch::Sender<u64>>,
}

#[derive(Debug, Default)]
struct Served {
    guests: Vec<Guest>,
    refused: BTreeMap<PathBuf, String>,
}

impl Default for ServedGuests {
    fn default() -> Self {
        ServedGuests::new(Vec::new())
    }
}

impl ServedGuests {
    pub(crate) fn new(guests: Vec<Guest>) -> ServedGuests {
        ServedGuests {
            served: Arc::new(RwLock::new(Served {
                guests,
                refused: BTreeMap::new(),
            })),
            reloads: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Served> {
        self.served.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The guests served now.
    pub(crate) fn guests(&self) -> Vec<Guest> {
        self.read().guests.clone()
    }

    /// The files whose current version is refused, and why.
    pub(crate) fn refused(&self) -> BTreeMap<PathBuf, String> {
        self.read().refused.clone()
    }

    /// Told of every reload that changes the guests served, from now on.
    pub(crate) fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// What a reload made current.
    pub(crate) fn replace(&self, guests: Vec<Guest>, refused: BTreeMap<PathBuf, String>) {
        let mut served = self.served.write().unwrap_or_else(PoisonError::into_inner);
        let same = served.guests.len() == guests.len()
            && served
                .guests
                .iter()
                .zip(&guests)
                .all(|(a, b)| a.same_load(b));
        *served = Served { guests, refused };
        drop(served);
        // A rescan that found nothing new replaces the guests with themselves: no reload.
        if !same {
            self.reloads
                .send_modify(|count| *count = count.wrapping_add(1));
        }
    }
}
