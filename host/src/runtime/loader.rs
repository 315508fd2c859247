//! Loading guests: read a `.wasm` (or every `.wasm` of a directory), compile it once, link
//! it, call `describe()` and check what it declares. Every failure names the file and the
//! reason in plain words.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::component::Component;

use super::admission::validate_admissions;
use super::bindings::{GuestWorldPre, PACKAGE, REQUIRED_EXPORTS};
use super::cache::{Digest, Lookup};
use super::compiler::Compiled;
use super::describe::{DeclarationError, validate, validate_spawning};
use super::engine::Runtime;
use super::guest::{Compilation, Guest, GuestInner};
use super::invoke::{Budget, CallError, Declared, Export, Returned, call_export};
use super::services::{CallContext, NoServices};
use super::slots::Pool;
use super::state::HostState;

/// The magic number every WebAssembly binary starts with.
const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// The version field of a core module (a component has layer 1 in the upper half).
const CORE_MODULE_VERSION: [u8; 4] = [1, 0, 0, 0];
/// The WIT package version this host implements.
const PACKAGE_VERSION: &str = "0.1.0";
/// The most a ConfigMap holds: 1 MiB of `data` and `binaryData` together, as
/// kube-apiserver validates it. `binaryData` travels base64-encoded (a third larger) but
/// is counted decoded, so this is also the largest guest a ConfigMap can carry.
const CONFIGMAP_LIMIT: usize = 1024 * 1024;

/// Counts the guests loaded in this process (see [`Guest::load`]).
static LOADS: AtomicU64 = AtomicU64::new(0);

/// Why a guest was not loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    /// The path does not exist, is not a regular file, or cannot be read.
    #[error("cannot read {}: {reason}", path.display())]
    Unreadable {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        reason: String,
    },
    /// A directory given as a guest holds no `.wasm` file.
    #[error("{} holds no .wasm files", path.display())]
    NoGuests {
        /// The directory.
        path: PathBuf,
    },
    /// The file is empty.
    #[error("{} is empty, not a WebAssembly component", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file does not start with the WebAssembly magic number.
    #[error("{} is not WebAssembly (it does not start with the \\0asm magic number)", path.display())]
    NotWasm {
        /// The file.
        path: PathBuf,
    },
    /// A core module where a component is needed.
    #[error(
        "{} is a core WebAssembly module, not a component: build the guest with \
         `cargo build --target wasm32-wasip2` (wasm32-wasip1 and wasm32-unknown-unknown \
         produce core modules)",
        path.display()
    )]
    CoreModule {
        /// The file.
        path: PathBuf,
    },
    /// The component does not validate or compile.
    #[error("{} is not a valid WebAssembly component: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What wasmtime said.
        reason: String,
    },
    /// A component, but not of the `kapsel:operator/guest` world this host runs.
    #[error(
        "{} is not a Kapsel guest (world {PACKAGE}/guest@{PACKAGE_VERSION}): {reason}",
        path.display()
    )]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// The missing export or unknown import.
        reason: String,
    },
    /// Calling `describe()` failed.
    #[error("{}: describe() failed: {source}", path.display())]
    Describe {
        /// The file.
        path: PathBuf,
        /// How the call failed.
        #[source]
        source: CallError,
    },
    /// `describe()` answered registrations the host cannot run.
    #[error("{}: describe() declared an invalid handler: {reason}", path.display())]
    InvalidRegistration {
        /// The file.
        path: PathBuf,
        /// Which handler, and what is wrong with it.
        #[source]
        reason: DeclarationError,
    },
    /// Two guests of the same name (file stem) were given.
    #[error("{}: a guest named {name:?} is already loaded from {}", path.display(), other.display())]
    DuplicateName {
        /// The file not loaded.
        path: PathBuf,
        /// The guest name.
        name: String,
        /// The file loaded under that name.
        other: PathBuf,
    },
    /// The host failed while loading (not the file's fault).
    #[error("{}: the host failed to load it: {reason}", path.display())]
    Host {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl LoadError {
    /// The file (or directory) the error is about.
    pub(crate) fn path(&self) -> &Path {
        match self {
            LoadError::Unreadable { path, .. }
            | LoadError::NoGuests { path }
            | LoadError::Empty { path }
            | LoadError::NotWasm { path }
            | LoadError::CoreModule { path }
            | LoadError::Invalid { path, .. }
            | LoadError::Incompatible { path, .. }
            | LoadError::Describe { path, .. }
            | LoadError::InvalidRegistration { path, .. }
            | LoadError::DuplicateName { path, .. }
            | LoadError::Host { path, .. } => path,
        }
    }
}

impl Runtime {
    /// Loads one guest from a `.wasm` file (symlinks are followed).
    ///
    /// # Errors
    /// A [`LoadError`] naming the file: unreadable, not WebAssembly, a core module, a
    /// component of another world, or a `describe()` that failed or declared nonsense.
    pub(crate) async fn load(&self, path: &Path) -> Result<Guest, LoadError> {
        let bytes = read_file(path).await?;
        self.load_bytes(path, bytes).await
    }

    /// Loads one guest from the bytes read from `path`.
    ///
    /// # Errors
    /// As [`Runtime::load`].
    pub(crate) async fn load_bytes(&self, path: &Path, bytes: Vec<u8>) -> Result<Guest, LoadError> {
        let started = std::time::Instant::now();
        check_header(path, &bytes)?;
        warn_if_too_large_for_a_configmap(path, bytes.len());
        let digest = Digest::of(&bytes);
        let runtime = self.clone();
        let file = path.to_owned();
        // Compiling takes tens to hundreds of milliseconds of CPU, reading the cache some
        // file I/O: keep both off the executor.
        let (component, compilation) =
            tokio::task::spawn_blocking(move || runtime.compile(&file, &bytes, &digest))
                .await
                .map_err(|error| host_error(path, &error))??;
        let pre = self.link(path, &component)?;
        let name: Arc<str> = guest_name(path).into();
        let budget = Budget {
            deadline: self.limits().call_deadline,
            memory_mib: self.limits().call_memory_mib,
        };
        let ctx =
            CallContext::new("describe", None, Arc::new(NoServices)).in_pool(Pool::Activities);
        let (
            describe,
            Declared {
                spawning,
                logins,
                everything,
                chosen,
                admissions,
            },
        ) = match call_export(self, &name, &pre, budget, ctx, Export::Describe).await {
            Ok(Returned::Describe(output, declared)) => (output, declared),
            Ok(_) => return Err(host_error(path, &"describe answered another export's type")),
            Err(source) => {
                return Err(LoadError::Describe {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        validate(&describe, &logins, (&everything, &chosen), self.limits())
            .and_then(|()| validate_spawning(&describe, &spawning))
            .and_then(|()| validate_admissions(&describe, &admissions))
            .map_err(|reason| LoadError::InvalidRegistration {
                path: path.to_owned(),
                reason,
            })?;
        // The operator announces loaded guests; this is for timing.
        tracing::debug!(
            guest = %name,
            path = %path.display(),
            handlers = describe.handlers.len(),
            elapsed_ms = started.elapsed().as_millis(),
            "loaded guest",
        );
        Ok(Guest {
            inner: Arc::new(GuestInner {
                name,
                path: path.to_owned(),
                digest,
                load: LOADS.fetch_add(1, Ordering::Relaxed),
                compilation,
                pre,
                describe,
                spawning,
                logins,
                everything,
                chosen,
                admissions,
                runtime: self.clone(),
            }),
        })
    }

    /// The component of these bytes: from the compiled-guest cache when it holds a sound
    /// entry, else compiled (and then stored there). Blocks.
    fn compile(
        &self,
        path: &Path,
        bytes: &[u8],
        digest: &Digest,
    ) -> Result<(Component, Compilation), LoadError> {
        let started = std::time::Instant::now();
        let engine = &self.inner.engine;
        let cache = self.inner.cache.as_ref();
        match cache.map(|cache| cache.fetch(engine, digest)) {
            Some(Lookup::Hit(component)) => {
                return Ok((component, Compilation::Cached(started.elapsed())));
            }
            Some(Lookup::Unusable { file, reason }) => tracing::warn!(
                "The cached compilation of {} ({}) cannot be used, {reason}; compiling it again.",
                path.display(),
                file.display()
            ),
            Some(Lookup::Miss) | None => {}
        }
        let (component, artifact) = match self.compile_apart(path, bytes)? {
            Some((component, artifact)) => (component, Some(artifact)),
            None => (
                Component::from_binary(engine, bytes)
                    .map_err(|error| invalid(path, format!("{error:#}")))?,
                None,
            ),
        };
        let compiled = if artifact.is_some() {
            Compilation::CompiledApart(started.elapsed())
        } else {
            Compilation::Compiled(started.elapsed())
        };
        if let Some(cache) = cache {
            let stored = match &artifact {
                Some(artifact) => cache.store_artifact(artifact, digest),
                None => cache.store(&component, digest),
            };
            match stored {
                Ok(file) => tracing::debug!(
                    "Cached the compilation of {} in {}.",
                    path.display(),
                    file.display()
                ),
                Err(error) => tracing::warn!(
                    "Cannot cache the compilation of {}: {error}",
                    path.display()
                ),
            }
        }
        Ok((component, compiled))
    }

    /// The component (and its artifact, for the cache) compiled by the operator's helper
    /// process, if it has one that could do it. Blocks.
    fn compile_apart(
        &self,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Option<(Component, Vec<u8>)>, LoadError> {
        let Some(compiler) = &self.inner.compiler else {
            return Ok(None);
        };
        match compiler.compile(&self.inner.engine, bytes) {
            Compiled::Loaded(component, artifact) => Ok(Some((component, artifact))),
            Compiled::Invalid(reason) => Err(invalid(path, reason)),
            Compiled::Failed(reason) => {
                tracing::warn!(
                    "Cannot compile {} in a separate process ({reason}); compiling it in this one.",
                    path.display()
                );
                Ok(None)
            }
        }
    }

    /// Links the component against WASI and the `host` interface, and checks that it has
    /// the guest world's exports.
    fn link(
        &self,
        path: &Path,
        component: &Component,
    ) -> Result<GuestWorldPre<HostState>, LoadError> {
        let incompatible = |reason: String| LoadError::Incompatible {
            path: path.to_owned(),
            reason,
        };
        let engine = &self.inner.engine;
        let ty = component.component_type();
        // Imports first: a guest built against another contract version lacks nothing, it
        // names other interfaces, and that is the clearer message.
        for (import, _) in ty.imports(engine) {
            if let Some(reason) = unknown_import(import) {
                return Err(incompatible(reason));
            }
        }
        let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
        let missing: Vec<String> = REQUIRED_EXPORTS
            .iter()
            .filter(|required| !exports.contains(required))
            .map(|name| format!("`{name}`"))
            .collect();
        if !missing.is_empty() {
            return Err(incompatible(format!(
                "it does not export {}",
                missing.join(", ")
            )));
        }
        let pre = self
            .inner
            .linker
            .instantiate_pre(component)
            .map_err(|error| incompatible(format!("{error:#}")))?;
        GuestWorldPre::new(pre).map_err(|error| incompatible(format!("{error:#}")))
    }
}

/// Why the host cannot provide `import`, if it cannot. WASI imports are left to the linker,
/// which names the function it lacks.
fn unknown_import(import: &str) -> Option<String> {
    if import.starts_with("wasi:") {
        return None;
    }
    let Some(rest) = import
        .strip_prefix(PACKAGE)
        .and_then(|rest| rest.strip_prefix('/'))
    else {
        return Some(format!(
            "it imports `{import}`, which this host does not provide"
        ));
    };
    match rest.split_once('@') {
        Some((_, version)) if version != PACKAGE_VERSION => Some(format!(
            "it was built against {PACKAGE}@{version}, this host provides {PACKAGE}@{PACKAGE_VERSION}"
        )),
        _ => None,
    }
}

async fn read_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    let unreadable = |reason: String| LoadError::Unreadable {
        path: path.to_owned(),
        reason,
    };
    let metadata = tokio::fs::metadata(path)
        .await
        .map_err(|e| unreadable(e.to_string()))?;
    if !metadata.is_file() {
        return Err(unreadable("not a regular file".to_owned()));
    }
    tokio::fs::read(path)
        .await
        .map_err(|e| unreadable(e.to_string()))
}

fn check_header(path: &Path, bytes: &[u8]) -> Result<(), LoadError> {
    let path = path.to_owned();
    if bytes.is_empty() {
        return Err(LoadError::Empty { path });
    }
    if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
        return Err(LoadError::NotWasm { path });
    }
    if bytes[4..8] == CORE_MODULE_VERSION {
        return Err(LoadError::CoreModule { path });
    }
    Ok(())
}

/// Guests are deployed in a ConfigMap (`deploy/`): say early when one cannot be, and what
/// to do instead. The guest still loads.
fn warn_if_too_large_for_a_configmap(path: &Path, size: usize) {
    if size > CONFIGMAP_LIMIT {
        tracing::warn!(
            "{} is {} KiB: too large for a ConfigMap (1 MiB of data in all), so it cannot be \
             deployed in one. Mount it from an image volume or a PersistentVolumeClaim instead, \
             or make it smaller (a release profile with opt-level = \"s\", lto = true, strip = true).",
            path.display(),
            size.div_ceil(1024),
        );
    }
}

/// The file holds no valid component: why.
fn invalid(path: &Path, reason: String) -> LoadError {
    LoadError::Invalid {
        path: path.to_owned(),
        reason,
    }
}

fn host_error(path: &Path, error: &dyn fmt::Display) -> LoadError {
    LoadError::Host {
        path: path.to_owned(),
        reason: error.to_string(),
    }
}

/// The guest's name: the file stem (`seed.wasm` → `seed`).
pub(super) fn guest_name(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// The guest files `paths` name, in the order to load them: files as given, directories
/// as their `.wasm` files in name order ([`wasm_files_in`]). Unreadable paths and
/// directories without guests become errors. This is the one scan of guest paths: the
/// first load and the rescans of hot reload both list them with this.
pub(super) fn expand(paths: &[PathBuf], errors: &mut Vec<LoadError>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        let unreadable = |e: std::io::Error| LoadError::Unreadable {
            path: path.clone(),
            reason: e.to_string(),
        };
        match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => match wasm_files_in(path) {
                Ok(found) if found.is_empty() => {
                    errors.push(LoadError::NoGuests { path: path.clone() })
                }
                Ok(found) => files.extend(found),
                Err(error) => errors.push(unreadable(error)),
            },
            // Files (and anything else) are loaded as given; `load` says what is wrong.
            Ok(_) => files.push(path.clone()),
            Err(error) => errors.push(unreadable(error)),
        }
    }
    files
}

/// The `.wasm` files of a directory, as the paths of its entries (a ConfigMap key's
/// link, not the file it points to, so that the path stays the same when the kubelet
/// swaps the data behind it). Symlinks are followed to tell files from directories.
///
/// Dot entries are skipped: the kubelet lays out a mounted ConfigMap (or projected
/// volume) as one link per key, `name.wasm -> ..data/name.wasm`, where `..data` links to
/// a hidden timestamped directory (`..2026_12_01_17_00_00.123456789/`) holding the
/// files; an update writes a new one and swaps `..data` through a `..data_tmp` link.
/// Only the key links are guests.
fn wasm_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') || !name.ends_with(".wasm") {
            continue;
        }
        // `metadata` follows symlinks: ConfigMap keys are links to regular files. A broken
        // link is kept, so that loading it reports it.
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}
