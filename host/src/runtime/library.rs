//! [`Library`]: the guests loaded from the operator's paths, and what their files looked
//! like, so that a rescan tells what changed (hot reload, KOPF.md has none: Kopf
//! restarts).
//!
//! Why a periodic rescan, not file-system notifications: a mounted ConfigMap changes by
//! the kubelet renaming the `..data` symlink to a new timestamped folder, which inotify
//! reports on the folder, not on the files seen through the links; overlay, NFS and
//! FUSE volumes report nothing at all; and a notifier needs a thread and a dependency
//! per platform. A rescan lists the folders and reads each file's *stamp* (the file the
//! links resolve to, its size and modification time) — a few system calls per guest,
//! every few seconds — and reads and hashes a file only when its stamp changed. The
//! kubelet needs up to a minute to propagate a ConfigMap anyway.
//!
//! A file is loaded only once two scans in a row saw the same stamp: a file someone is
//! still copying (not the kubelet's atomic swap) is not loaded half-written. A file that
//! changed but hashes as before (every key of a ConfigMap moves to the new timestamped
//! folder) is the same guest: nothing is reloaded. A new version is compiled and
//! `describe`d before anything changes ([`Rescan`]); whoever applies it may still refuse
//! it (its startup handlers failed) before [`Library::apply`] makes it current. A
//! refused version is remembered by its stamp, so that it is reported once, not at every
//! scan; the version before it keeps serving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::cache::Digest;
use super::engine::Runtime;
use super::guest::Guest;
use super::loader::{LoadError, expand, guest_name};

/// What a file looked like at a scan: a change of any part is worth reading it again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    /// The file the path resolves to (a ConfigMap key's links lead into the current
    /// timestamped folder).
    target: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    /// The stamp of a file; `None` when there is none to read (gone, or a link left
    /// dangling while the kubelet swaps folders: both mean the guest is not there).
    fn of(file: &Path) -> Option<Stamp> {
        let metadata = std::fs::metadata(file).ok()?;
        Some(Stamp {
            target: std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned()),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

/// A guest the library serves, and the stamp of the file it came from.
struct Loaded {
    guest: Guest,
    stamp: Stamp,
    /// Which of the operator's paths listed it.
    origin: usize,
}

/// A file whose current version was refused.
struct Refused {
    stamp: Stamp,
    error: String,
}

/// The guests loaded from the operator's paths (`.wasm` files and folders of them).
pub(crate) struct Library {
    paths: Vec<PathBuf>,
    /// By file, as listed (`folder/name.wasm`, not where its links lead).
    loaded: BTreeMap<PathBuf, Loaded>,
    refused: BTreeMap<PathBuf, Refused>,
    /// Each file's stamp at the last scan: a file is loaded once it holds still.
    seen: BTreeMap<PathBuf, Stamp>,
    /// Why a path could not be listed at the last scan (reported once; its guests stay).
    unlisted: BTreeMap<PathBuf, String>,
    /// The last scan found no guest at all; the guests loaded before were kept (and that
    /// was reported once).
    emptied: bool,
}

/// A new version of a guest, compiled and described, not yet served.
pub(crate) struct Candidate {
    file: PathBuf,
    stamp: Stamp,
    origin: usize,
    /// The new version.
    pub(crate) guest: Guest,
    /// The version it replaces, if the guest is served already.
    pub(crate) replaces: Option<Guest>,
}

/// A file whose new version is not served, and why.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    /// The guest's name (the file's stem).
    pub(crate) guest: String,
    pub(crate) path: PathBuf,
    pub(crate) error: String,
}

/// What a rescan found: nothing is changed until [`Library::apply`].
pub(crate) struct Rescan {
    pub(crate) candidates: Vec<Candidate>,
    /// Guests whose files are gone.
    pub(crate) removed: Vec<Guest>,
    pub(crate) refused: Vec<Refusal>,
    /// Refusals and the stamps they were made at, remembered by `apply`.
    refused_stamps: Vec<(PathBuf, Stamp, String)>,
    /// Files that changed without changing the guest (same hash).
    restamped: Vec<(PathBuf, Stamp)>,
    /// What was seen of every listed file.
    seen: BTreeMap<PathBuf, Stamp>,
    unlisted: BTreeMap<PathBuf, String>,
    emptied: bool,
}

impl Rescan {
    /// Whether the guests served change, or something is to be reported.
    pub(crate) fn is_empty(&self) -> bool {
        self.candidates.is_empty() && self.removed.is_empty() && self.refused.is_empty()
    }

    /// Refuses a candidate after all (e.g. its startup handlers failed): the version
    /// before it keeps serving.
    pub(crate) fn refuse(&mut self, guest: &Guest, error: String) {
        let Some(at) = self
            .candidates
            .iter()
            .position(|c| c.guest.same_load(guest))
        else {
            return;
        };
        let candidate = self.candidates.remove(at);
        self.refused.push(Refusal {
            guest: candidate.guest.name().to_owned(),
            path: candidate.file.clone(),
            error: error.clone(),
        });
        self.refused_stamps
            .push((candidate.file, candidate.stamp, error));
    }
}

impl Library {
    /// Loads every guest of `paths`: `.wasm` files, or folders whose `.wasm` files are
    /// loaded (a mounted ConfigMap: dot entries are skipped). A bad guest does not stop
    /// the others; each one that did not load is an error.
    pub(crate) async fn load(runtime: &Runtime, paths: &[PathBuf]) -> (Library, Vec<LoadError>) {
        let mut errors = Vec::new();
        let mut library = Library {
            paths: paths.to_vec(),
            loaded: BTreeMap::new(),
            refused: BTreeMap::new(),
            seen: BTreeMap::new(),
            unlisted: BTreeMap::new(),
            emptied: false,
        };
        for (origin, path) in paths.iter().enumerate() {
            for file in expand(std::slice::from_ref(path), &mut errors) {
                let stamp = Stamp::of(&file);
                let loaded = match runtime.load(&file).await {
                    Ok(guest) => library.check_name(&file, guest),
                    Err(error) => Err(error),
                };
                match (loaded, stamp) {
                    (Ok(guest), Some(stamp)) => {
                        library.seen.insert(file.clone(), stamp.clone());
                        library.loaded.insert(
                            file,
                            Loaded {
                                guest,
                                stamp,
                                origin,
                            },
                        );
                    }
                    (Err(error), Some(stamp)) => {
                        library.seen.insert(file.clone(), stamp.clone());
                        let error_text = error.to_string();
                        library.refused.insert(
                            file,
                            Refused {
                                stamp,
                                error: error_text,
                            },
                        );
                        errors.push(error);
                    }
                    // Gone between listing and loading: as if never listed.
                    (Ok(_), None) => {}
                    (Err(error), None) => errors.push(error),
                }
            }
        }
        library.prune_cache(runtime).await;
        (library, errors)
    }

    /// Bounds the compiled-guest cache, if there is one (`runtime::cache`): the entries
    /// of the guests served stay, and the most recent others up to
    /// `Limits::max_cache_mib`. At start and after each reload; a failure is a warning.
    pub(crate) async fn prune_cache(&self, runtime: &Runtime) {
        let Some(cache) = runtime.inner.cache.clone() else {
            return;
        };
        let in_use: Vec<Digest> = self.loaded.values().map(|l| l.guest.digest()).collect();
        let keep_bytes = runtime.limits().max_cache_mib.saturating_mul(1 << 20);
        let pruned = tokio::task::spawn_blocking(move || cache.prune(&in_use, keep_bytes)).await;
        match pruned {
            Ok(Ok(removed)) if !removed.is_empty() => tracing::debug!(
                "Removed {} compiled guests no guest served uses from the cache (--max-cache-mib).",
                removed.len()
            ),
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!("Cannot bound the compiled-guest cache: {error}");
            }
            Err(error) => tracing::warn!("Cannot bound the compiled-guest cache: {error}"),
        }
    }

    /// A library of guests loaded already (`kapsel test` compiles a guest once for all its
    /// cases): it has no paths to rescan.
    pub(crate) fn of(guests: Vec<Guest>) -> Library {
        Library {
            paths: Vec::new(),
            loaded: guests
                .into_iter()
                .map(|guest| {
                    let file = guest.path().to_owned();
                    // Never compared: there is no rescan.
                    let stamp = Stamp {
                        target: file.clone(),
                        len: 0,
                        modified: None,
                    };
                    (
                        file,
                        Loaded {
                            guest,
                            stamp,
                            origin: 0,
                        },
                    )
                })
                .collect(),
            refused: BTreeMap::new(),
            seen: BTreeMap::new(),
            unlisted: BTreeMap::new(),
            emptied: false,
        }
    }

    /// Whether it has paths to rescan.
    pub(crate) fn has_paths(&self) -> bool {
        !self.paths.is_empty()
    }

    /// The files whose current version is refused, and why.
    pub(crate) fn refusals(&self) -> BTreeMap<PathBuf, String> {
        let mut refusals: BTreeMap<PathBuf, String> = self
            .refused
            .iter()
            .map(|(file, refused)| (file.clone(), refused.error.clone()))
            .collect();
        if self.emptied {
            for file in self.loaded.keys() {
                refusals.insert(file.clone(), gone_but_kept(file));
            }
        }
        refusals
    }

    /// The guests served, in file order.
    pub(crate) fn guests(&self) -> Vec<Guest> {
        self.loaded.values().map(|l| l.guest.clone()).collect()
    }

    /// The guest's name, unless another file already serves a guest of that name.
    fn check_name(&self, file: &Path, guest: Guest) -> Result<Guest, LoadError> {
        match self
            .loaded
            .iter()
            .find(|(other, l)| *other != file && l.guest.name() == guest.name())
        {
            Some((other, _)) => Err(LoadError::DuplicateName {
                path: file.to_owned(),
                name: guest.name().to_owned(),
                other: other.clone(),
            }),
            None => Ok(guest),
        }
    }

    /// Lists the paths again and loads what changed (see the module's documentation).
    pub(crate) async fn rescan(&self, runtime: &Runtime) -> Rescan {
        let paths = self.paths.clone();
        let listed = tokio::task::spawn_blocking(move || list(&paths))
            .await
            .unwrap_or_default();
        let mut rescan = Rescan {
            candidates: Vec::new(),
            removed: Vec::new(),
            refused: Vec::new(),
            refused_stamps: Vec::new(),
            restamped: Vec::new(),
            seen: BTreeMap::new(),
            unlisted: BTreeMap::new(),
            emptied: false,
        };
        let mut present: Vec<&PathBuf> = Vec::new();
        for (origin, listing) in listed.iter().enumerate() {
            let files = match listing {
                Ok(files) => files,
                Err(error) => {
                    // Compared as text: the same failure again is not warned about again.
                    let reason = error.to_string();
                    let path = &self.paths[origin];
                    if self.unlisted.get(path) != Some(&reason) {
                        tracing::warn!(
                            "Cannot list the guests of {}: {reason}; its guests stay as they are.",
                            path.display()
                        );
                    }
                    rescan.unlisted.insert(path.clone(), reason);
                    // Its guests are kept: a folder that cannot be read now is no removal.
                    present.extend(
                        self.loaded
                            .iter()
                            .filter(|(_, l)| l.origin == origin)
                            .map(|(file, _)| file),
                    );
                    continue;
                }
            };
            for (file, stamp) in files {
                present.push(file);
                rescan.seen.insert(file.clone(), stamp.clone());
                self.consider(runtime, file, stamp, origin, &mut rescan)
                    .await;
            }
        }
        let removed: Vec<&Loaded> = self
            .loaded
            .iter()
            .filter(|(file, _)| !present.contains(file))
            .map(|(_, l)| l)
            .collect();
        let added = rescan
            .candidates
            .iter()
            .filter(|c| c.replaces.is_none())
            .count();
        if !removed.is_empty() && removed.len() == self.loaded.len() && added == 0 {
            // An operator without guests serves nothing: most likely the folder was
            // emptied by mistake, so the guests loaded keep serving.
            rescan.emptied = true;
            if !self.emptied {
                for loaded in removed {
                    rescan.refused.push(Refusal {
                        guest: loaded.guest.name().to_owned(),
                        path: loaded.guest.path().to_owned(),
                        error: gone_but_kept(loaded.guest.path()),
                    });
                }
            }
        } else {
            rescan.removed = removed.into_iter().map(|l| l.guest.clone()).collect();
        }
        rescan
    }

    /// One listed file: unchanged, the same guest under a new stamp, not settled yet, a
    /// refused version again, or a new version to load.
    async fn consider(
        &self,
        runtime: &Runtime,
        file: &Path,
        stamp: &Stamp,
        origin: usize,
        rescan: &mut Rescan,
    ) {
        let loaded = self.loaded.get(file);
        if loaded.is_some_and(|l| &l.stamp == stamp)
            || self.refused.get(file).is_some_and(|r| &r.stamp == stamp)
            || self.seen.get(file) != Some(stamp)
        {
            return;
        }
        let bytes = match tokio::fs::read(file).await {
            Ok(bytes) => bytes,
            // Gone since it was listed: the next scan sees it gone.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => {
                let error = LoadError::Unreadable {
                    path: file.to_owned(),
                    reason: error.to_string(),
                };
                self.refuse(file, stamp, &error, rescan);
                return;
            }
        };
        if loaded.is_some_and(|l| l.guest.digest() == Digest::of(&bytes)) {
            rescan.restamped.push((file.to_owned(), stamp.clone()));
            return;
        }
        let guest = match runtime.load_bytes(file, bytes).await {
            Ok(guest) => guest,
            Err(error) => {
                self.refuse(file, stamp, &error, rescan);
                return;
            }
        };
        let clash = self
            .loaded
            .iter()
            .find(|(other, l)| other.as_path() != file && l.guest.name() == guest.name())
            .map(|(other, _)| other.clone())
            .or_else(|| {
                rescan
                    .candidates
                    .iter()
                    .find(|c| c.guest.name() == guest.name())
                    .map(|c| c.file.clone())
            });
        if let Some(other) = clash {
            let error = LoadError::DuplicateName {
                path: file.to_owned(),
                name: guest.name().to_owned(),
                other,
            };
            self.refuse(file, stamp, &error, rescan);
            return;
        }
        rescan.candidates.push(Candidate {
            file: file.to_owned(),
            stamp: stamp.clone(),
            origin,
            replaces: loaded.map(|l| l.guest.clone()),
            guest,
        });
    }

    fn refuse(&self, file: &Path, stamp: &Stamp, error: &LoadError, rescan: &mut Rescan) {
        rescan.refused.push(Refusal {
            guest: guest_name(file),
            path: file.to_owned(),
            error: error.to_string(),
        });
        rescan
            .refused_stamps
            .push((file.to_owned(), stamp.clone(), error.to_string()));
    }

    /// Makes a rescan's outcome current: its candidates served, its removed guests gone,
    /// its refusals remembered. Returns the guests whose file holds the version served
    /// again after a refused one (their refusal is over; nothing else changes).
    pub(crate) fn apply(&mut self, rescan: Rescan) -> Vec<Guest> {
        let Rescan {
            candidates,
            removed,
            refused_stamps,
            restamped,
            seen,
            unlisted,
            emptied,
            ..
        } = rescan;
        self.loaded
            .retain(|_, l| !removed.iter().any(|r| r.same_load(&l.guest)));
        for candidate in candidates {
            self.refused.remove(&candidate.file);
            self.loaded.insert(
                candidate.file,
                Loaded {
                    guest: candidate.guest,
                    stamp: candidate.stamp,
                    origin: candidate.origin,
                },
            );
        }
        let mut recovered = Vec::new();
        for (file, stamp) in restamped {
            let was_refused = self.refused.remove(&file).is_some();
            if let Some(loaded) = self.loaded.get_mut(&file) {
                loaded.stamp = stamp;
                if was_refused {
                    recovered.push(loaded.guest.clone());
                }
            }
        }
        for (file, stamp, error) in refused_stamps {
            self.refused.insert(file, Refused { stamp, error });
        }
        // Refusals of files that are gone are forgotten: a file put back is tried again.
        self.refused.retain(|file, _| seen.contains_key(file));
        self.seen = seen;
        self.unlisted = unlisted;
        self.emptied = emptied;
        recovered
    }
}

/// Why a removed guest still serves.
fn gone_but_kept(file: &Path) -> String {
    format!(
        "{} is gone, but no other guest is left: it keeps serving until there is one",
        file.display()
    )
}

/// Each path's files and their stamps, or why it cannot be listed. A folder without
/// guests is an empty listing (its guests were removed); files whose stamp cannot be
/// read are left out (gone, or a link left dangling mid-swap).
fn list(paths: &[PathBuf]) -> Vec<Result<Vec<(PathBuf, Stamp)>, LoadError>> {
    paths
        .iter()
        .map(|path| {
            let mut errors = Vec::new();
            let files = expand(std::slice::from_ref(path), &mut errors);
            match errors.into_iter().next() {
                Some(LoadError::NoGuests { .. }) | None => Ok(files
                    .into_iter()
                    .filter_map(|file| Stamp::of(&file).map(|stamp| (file, stamp)))
                    .collect()),
                Some(error) => Err(error),
            }
        })
        .collect()
}

impl Runtime {
    /// The guests of `paths`, loaded once (see [`Library::load`]), for the tools that
    /// need them only once (`kapsel rbac`).
    pub(crate) async fn load_all(&self, paths: &[PathBuf]) -> (Vec<Guest>, Vec<LoadError>) {
        let (library, errors) = Library::load(self, paths).await;
        (library.guests(), errors)
    }
}
