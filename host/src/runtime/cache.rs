//! The compiled-guest cache on disk (`--cache-dir`): a guest compiled once is not
//! compiled again by a restart, nor by a reload that finds it unchanged.
//!
//! An entry is keyed by what decides whether its machine code may run here: the
//! component's content hash and the engine's compatibility hash (wasmtime's version, the
//! host's CPU features, the engine settings). Its file name carries both,
//! `<component sha-256>-<engine hash>.cwasm`, so a component or an engine that differs
//! never even opens another's file.
//!
//! wasmtime trusts what it deserializes (loading machine code is `unsafe`: a damaged file
//! could run anything), so the cache only loads what it wrote itself and can check: each
//! file is [`MAGIC`], the SHA-256 of the payload, then the payload that
//! `Component::serialize` produced. The file is read into memory, checked, and the very
//! bytes checked are deserialized (not the file mapped again, which could change in
//! between). A file that is damaged, truncated, or of another format is set aside with a
//! warning and the guest is compiled again; wasmtime itself refuses a payload of another
//! engine. Files are written to a temporary name and renamed, so a reader never sees half
//! a file, even when two operators share the folder.
//!
//! The folder must be writable by the operator alone (Kubernetes: an `emptyDir`); the
//! cache is an optimisation, so any failure to read or write it is a warning, never an
//! error.
//!
//! It is bounded ([`ComponentCache::prune`]): every hot reload of a changed guest adds an
//! entry, and a folder that only grows fills its volume (an `emptyDir` with a size limit
//! gets the pod evicted). The entries of the guests served stay; of the others, the most
//! recently used stay while they add up to at most `Limits::max_cache_mib`, and the rest
//! is removed, at start and after each reload. A hit marks its entry as used now.

use std::collections::HashSet;
use std::fmt;
use std::hash::Hasher;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ring::digest::{Context, SHA256, digest as sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first bytes of every cache file: what it is and the layout version.
const MAGIC: &[u8; 16] = b"kapsel-cwasm-v1\n";
/// The bytes of a SHA-256 hash.
const HASH_LEN: usize = 32;
/// The engine hash in file names: 16 hex digits (64 bits) tell engines apart.
const ENGINE_KEY_LEN: usize = 16;

/// The SHA-256 hash of a component's bytes: what identifies a guest's version.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Digest([u8; HASH_LEN]);

impl Digest {
    /// The hash of these bytes.
    pub(crate) fn of(bytes: &[u8]) -> Digest {
        let mut hash = [0; HASH_LEN];
        hash.copy_from_slice(sha256(&SHA256, bytes).as_ref());
        Digest(hash)
    }

    /// The first 12 hex digits, enough to tell versions apart in a log line.
    pub(crate) fn short(&self) -> String {
        hex(&self.0[..6])
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds what wasmtime hashes into SHA-256, so that the engine key is the same in every
/// process of one build on one machine (std's `DefaultHasher` promises no such thing).
struct Sha256Hasher(Context);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        // Only the `Hasher` interface asks for this; the key is `finish`ed below.
        let digest = self.0.clone().finish();
        let mut first = [0; 8];
        first.copy_from_slice(&digest.as_ref()[..8]);
        u64::from_le_bytes(first)
    }
}

/// What the cache had for a component.
pub(super) enum Lookup {
    /// A sound entry, loaded.
    Hit(Component),
    /// No entry.
    Miss,
    /// An entry that cannot be used (damaged, another format, another engine); it has
    /// been removed.
    Unusable {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        reason: CacheError,
    },
}

/// Why an entry cannot be read or written: a warning, since the guest is compiled
/// instead. The texts go after "cannot be used," and "Cannot cache the compilation of ...:".
#[derive(Debug, thiserror::Error)]
pub(super) enum CacheError {
    #[error("cannot read it: {0}")]
    Unreadable(#[source] std::io::Error),
    #[error("it is not a Kapsel cache file (wrong header)")]
    WrongHeader,
    #[error("it is truncated")]
    Truncated,
    #[error("its checksum does not match: it is damaged or truncated")]
    Damaged,
    #[error("wasmtime refused it: {0:#}")]
    Refused(#[source] wasmtime::Error),
    #[error("cannot serialize the compiled component: {0:#}")]
    Unserializable(#[source] wasmtime::Error),
    #[error("cannot write {}: {source}", file.display())]
    Unwritable {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The compiled-guest cache: one folder, one file per (component, engine).
#[derive(Debug, Clone)]
pub(super) struct ComponentCache {
    dir: PathBuf,
    /// The engine's compatibility hash, as it appears in file names.
    engine_key: String,
}

impl ComponentCache {
    /// The cache in `dir` (created if missing) for components compiled by `engine`.
    ///
    /// # Errors
    /// The folder cannot be created.
    pub(super) fn open(dir: &Path, engine: &Engine) -> std::io::Result<ComponentCache> {
        std::fs::create_dir_all(dir)?;
        let mut hasher = Sha256Hasher(Context::new(&SHA256));
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        let engine_key = hex(&hasher.0.finish().as_ref()[..ENGINE_KEY_LEN / 2]);
        Ok(ComponentCache {
            dir: dir.to_owned(),
            engine_key,
        })
    }

    /// The file of a component's entry.
    pub(super) fn file(&self, digest: &Digest) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// The component with this digest, if the cache holds a sound entry for it. Blocks
    /// (file I/O, hashing): call it off the executor.
    pub(super) fn fetch(&self, engine: &Engine, digest: &Digest) -> Lookup {
        let file = self.file(digest);
        let bytes = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(error) => {
                return Lookup::Unusable {
                    file,
                    reason: CacheError::Unreadable(error),
                };
            }
        };
        let loaded = payload(&bytes).and_then(|payload| {
            // SAFETY: `payload` holds exactly the bytes `store` wrote from
            // `Component::serialize` (their SHA-256 matches the one written beside them),
            // and they are the bytes in memory now, not a file that could change while
            // wasmtime reads it. wasmtime itself checks that they were made by a
            // compatible engine.
            #[expect(
                unsafe_code,
                reason = "loading machine code that this cache wrote and has just checked"
            )]
            let component = unsafe { Component::deserialize(engine, payload) };
            component.map_err(CacheError::Refused)
        });
        match loaded {
            Ok(component) => {
                // Used now: the most recently used entries are those a prune keeps.
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&file)
                    .and_then(|opened| opened.set_modified(SystemTime::now()));
                Lookup::Hit(component)
            }
            Err(reason) => {
                // Set aside so that the next start does not stumble over it again; the
                // fresh compilation is stored under the same name.
                let _ = std::fs::remove_file(&file);
                Lookup::Unusable { file, reason }
            }
        }
    }

    /// Stores a compiled component under its digest. Blocks (serializing, file I/O).
    ///
    /// # Errors
    /// What failed, for a warning.
    pub(super) fn store(
        &self,
        component: &Component,
        digest: &Digest,
    ) -> Result<PathBuf, CacheError> {
        let payload = component.serialize().map_err(CacheError::Unserializable)?;
        self.store_artifact(&payload, digest)
    }

    /// Stores a compiled component, as `Component::serialize` (or a compiling helper)
    /// gave it, under its digest. Blocks (file I/O).
    ///
    /// # Errors
    /// What failed, for a warning.
    pub(super) fn store_artifact(
        &self,
        payload: &[u8],
        digest: &Digest,
    ) -> Result<PathBuf, CacheError> {
        let file = self.file(digest);
        // A name no other writer uses, in the same folder so that the rename is atomic.
        let temporary = self.dir.join(format!(
            ".{digest}-{}.{}.{}.tmp",
            self.engine_key,
            std::process::id(),
            rand::random::<u32>()
        ));
        let written =
            write_entry(&temporary, payload).and_then(|()| std::fs::rename(&temporary, &file));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(CacheError::Unwritable {
                file,
                source: error,
            });
        }
        Ok(file)
    }
}

impl ComponentCache {
    /// Removes the entries beyond the bound: those of the components `in_use` stay; of
    /// the others (this engine's or another's), the most recently used stay while their
    /// sizes add up to at most `keep_bytes`, and every older one goes. Files that are no
    /// entry (another writer's temporary files among them) are left alone. Blocks
    /// (listing, removing); returns the files removed.
    ///
    /// # Errors
    /// The folder cannot be listed, or an entry cannot be removed.
    pub(super) fn prune(
        &self,
        in_use: &[Digest],
        keep_bytes: u64,
    ) -> std::io::Result<Vec<PathBuf>> {
        let in_use: HashSet<PathBuf> = in_use.iter().map(|digest| self.file(digest)).collect();
        let mut others: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            let is_entry = path.extension().is_some_and(|ext| ext == "cwasm")
                && !entry.file_name().to_string_lossy().starts_with('.');
            if !is_entry || in_use.contains(&path) {
                continue;
            }
            let metadata = entry.metadata()?;
            if metadata.is_file() {
                let used = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                others.push((used, metadata.len(), path));
            }
        }
        // The most recently used first; ties by name, so that every prune agrees.
        others.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
        let mut kept: u64 = 0;
        let mut removed = Vec::new();
        for (_, len, path) in others {
            if removed.is_empty() && kept.saturating_add(len) <= keep_bytes {
                kept += len;
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        Ok(removed)
    }
}

/// The payload of a cache file's bytes, if they are a sound entry.
fn payload(bytes: &[u8]) -> Result<&[u8], CacheError> {
    let Some(rest) = bytes.strip_prefix(MAGIC.as_slice()) else {
        return Err(CacheError::WrongHeader);
    };
    if rest.len() < HASH_LEN {
        return Err(CacheError::Truncated);
    }
    let (hash, payload) = rest.split_at(HASH_LEN);
    if sha256(&SHA256, payload).as_ref() != hash {
        return Err(CacheError::Damaged);
    }
    Ok(payload)
}

fn write_entry(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(MAGIC)?;
    file.write_all(sha256(&SHA256, payload).as_ref())?;
    file.write_all(payload)?;
    // On disk before the rename makes it visible: a crash leaves no torn entry behind.
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_checked_before_they_are_trusted() {
        let body = b"compiled code".as_slice();
        let mut entry = MAGIC.to_vec();
        entry.extend_from_slice(sha256(&SHA256, body).as_ref());
        entry.extend_from_slice(body);
        assert_eq!(payload(&entry).ok(), Some(body));

        let mut flipped = entry.clone();
        *flipped.last_mut().expect("not empty") ^= 1;
        let refusal = |bytes: &[u8]| payload(bytes).map(|_| ()).unwrap_err().to_string();
        assert!(refusal(&flipped).contains("checksum"));
        assert!(refusal(&entry[..entry.len() - 1]).contains("checksum"));
        assert!(refusal(&entry[..MAGIC.len() + 3]).contains("truncated"));
        assert!(refusal(b"\x7fELF...").contains("header"));
    }

    /// The smallest component there is: the header alone (`\0asm`, version 0x0d, layer 1).
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kapsel-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn lookup(cache: &ComponentCache, engine: &Engine, digest: &Digest) -> Result<(), String> {
        match cache.fetch(engine, digest) {
            Lookup::Hit(_) => Ok(()),
            Lookup::Miss => Err("miss".to_owned()),
            Lookup::Unusable { reason, .. } => Err(reason.to_string()),
        }
    }

    #[test]
    fn entries_are_found_again_and_bad_ones_set_aside() {
        let engine = Engine::default();
        let dir = scratch("entries");
        let cache = ComponentCache::open(&dir, &engine).expect("a cache");
        let digest = Digest::of(EMPTY_COMPONENT);
        assert_eq!(lookup(&cache, &engine, &digest), Err("miss".to_owned()));

        let component = Component::from_binary(&engine, EMPTY_COMPONENT).expect("compiles");
        let file = cache.store(&component, &digest).expect("stored");
        assert_eq!(lookup(&cache, &engine, &digest), Ok(()));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("listed")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names.len(),
            1,
            "no temporary file is left behind: {names:?}"
        );

        // A damaged entry is refused before wasmtime sees it, and removed.
        let mut bytes = std::fs::read(&file).expect("read");
        *bytes.last_mut().expect("not empty") ^= 0xff;
        std::fs::write(&file, &bytes).expect("written");
        let refused = lookup(&cache, &engine, &digest).expect_err("damaged");
        assert!(refused.contains("checksum"), "{refused}");
        assert!(!file.exists(), "set aside");

        // Another engine's compilation under this engine's name (copied by hand, or a
        // key that clashed): sound as a file, refused by wasmtime, set aside.
        let other = Engine::new(wasmtime::Config::new().consume_fuel(true)).expect("engine");
        let other_cache = ComponentCache::open(&dir, &other).expect("a cache");
        assert_ne!(
            other_cache.file(&digest),
            file,
            "engines are told apart by name"
        );
        let foreign = Component::from_binary(&other, EMPTY_COMPONENT).expect("compiles");
        let foreign_file = other_cache.store(&foreign, &digest).expect("stored");
        std::fs::rename(&foreign_file, &file).expect("renamed");
        let refused = lookup(&cache, &engine, &digest).expect_err("foreign");
        assert!(refused.contains("wasmtime refused it"), "{refused}");
        assert!(!file.exists(), "set aside");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_hundred_entries_are_pruned_to_the_bound_and_those_in_use_stay() {
        let engine = Engine::default();
        let dir = scratch("prune");
        let cache = ComponentCache::open(&dir, &engine).expect("a cache");
        let digests: Vec<Digest> = (0..100u32).map(|i| Digest::of(&i.to_le_bytes())).collect();
        let start = SystemTime::now() - std::time::Duration::from_secs(1000);
        for (i, digest) in digests.iter().enumerate() {
            let file = cache.store_artifact(&[0; 1000], digest).expect("stored");
            // Entry i was used i seconds after the first: the last ones are the recent.
            let used = start + std::time::Duration::from_secs(i as u64);
            let opened = std::fs::File::options()
                .append(true)
                .open(&file)
                .expect("open");
            opened.set_modified(used).expect("dated");
        }
        std::fs::write(dir.join(".in-flight.tmp"), b"another writer's").expect("written");
        let size = std::fs::metadata(cache.file(&digests[0]))
            .expect("an entry")
            .len();
        // In use: the oldest two. The others: the 10 most recent fit in the bound.
        let in_use = [digests[0], digests[1]];
        let removed = cache.prune(&in_use, size * 10 + size / 2).expect("pruned");
        assert_eq!(removed.len(), 88);
        let mut left: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("listed")
            .map(|e| e.expect("entry").path())
            .collect();
        left.sort();
        let mut expected: Vec<PathBuf> = [0, 1]
            .into_iter()
            .chain(90..100)
            .map(|i| cache.file(&digests[i]))
            .chain([dir.join(".in-flight.tmp")])
            .collect();
        expected.sort();
        assert_eq!(left, expected);
        // A hit makes an entry the most recent: it outlives the others of the bound.
        let component = Component::from_binary(&engine, EMPTY_COMPONENT).expect("compiles");
        let empty = Digest::of(EMPTY_COMPONENT);
        let file = cache.store(&component, &empty).expect("stored");
        let long_ago = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        let opened = std::fs::File::options()
            .append(true)
            .open(&file)
            .expect("open");
        opened.set_modified(long_ago).expect("dated");
        assert_eq!(lookup(&cache, &engine, &empty), Ok(()));
        let entry_size = std::fs::metadata(&file).expect("an entry").len();
        cache.prune(&in_use, entry_size).expect("pruned");
        assert!(file.exists(), "the entry just used stays");
        assert!(!cache.file(&digests[99]).exists(), "older than the hit");
        // Nothing but what is in use, with a bound of 0.
        cache.prune(&in_use, 0).expect("pruned");
        assert!(!file.exists());
        assert!(cache.file(&digests[0]).exists() && cache.file(&digests[1]).exists());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn digests_name_versions() {
        let digest = Digest::of(b"abc");
        assert_eq!(
            digest.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest.short(), "ba7816bf8f01");
    }
}
