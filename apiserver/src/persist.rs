//! The optional state file: a write-ahead log of every change, synced to disk before the
//! change is acknowledged, so a crash (even SIGKILL or power loss) loses no acknowledged
//! write.
//!
//! # Format
//!
//! A text file. The first line is `KAPSEL-STATE 2`. Each following line is one record:
//! the CRC-32 (IEEE) of the JSON text as 8 lowercase hex digits, one space, the JSON text
//! (one line; JSON escapes newlines), and `\n`. Records are:
//!
//! - `{"snapshot": {"resourceVersion": "N", "resources": [{"group", "plural", "items"}],
//!   "credentials": {...}}}`: every object at resourceVersion N, and the server's secrets
//!   (the ServiceAccount token signing key and the admin token, so that tokens and
//!   kubeconfigs outlive a restart; absent in files written before them); the first
//!   record of every file.
//! - `{"put": {"group", "plural", "object"}}`: an object created or changed (its
//!   `metadata.resourceVersion` is the change's).
//! - `{"delete": {"group", "plural", "namespace", "name"}, "rv": N}`: an object removed.
//!
//! Replaying the records in order rebuilds the store. A crash while appending leaves at
//! most a torn last record (no newline, a bad checksum or bad JSON): it was never
//! acknowledged, and loading drops it. A bad record followed by good ones is not a torn
//! write but damage, and loading fails with a message naming the file, leaving it as is.
//!
//! Every start, and whenever the log has grown well past the last snapshot, the file is
//! compacted: a new file holding one snapshot is written beside it, synced, and renamed
//! over it, so the file never holds more than a few snapshots' worth of records.
//!
//! Files of the previous format (one JSON document, `"kind": "KapselState"`) load as
//! before and are rewritten in this format at start.

use crate::Error;
use crate::meta::{ResKey, meta_str};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &str = "KAPSEL-STATE 2\n";

/// Compact once the records since the last snapshot are this many times its size (and
/// more than a minimum, so small stores are not rewritten all the time).
const COMPACT_FACTOR: u64 = 4;
const COMPACT_MIN_BYTES: u64 = 1 << 20;

/// CRC-32 (IEEE 802.3, as zlib and Go's `hash/crc32` compute it).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// One record as a line of the file.
pub(crate) fn record_line(v: &Value) -> String {
    let text = v.to_string();
    format!("{:08x} {text}\n", crc32(text.as_bytes()))
}

/// The open log, appended to by the store.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    file: File,
    snapshot_bytes: u64,
    appended_bytes: u64,
}

impl Journal {
    /// Writes a fresh file holding `snapshot` (the store's, `Store::snapshot`) (beside the target, synced, then
    /// renamed over it) and opens it for appending.
    pub(crate) fn create(path: &Path, snapshot: &Value) -> Result<Journal, Error> {
        let err = |source| Error::Save {
            path: path.to_path_buf(),
            source,
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let line = record_line(snapshot);
        let mut f = File::create(&tmp).map_err(err)?;
        f.write_all(MAGIC.as_bytes()).map_err(err)?;
        f.write_all(line.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(err)?;
        // The rename itself must survive a crash: sync the directory that holds it.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
        }
        let file = OpenOptions::new().append(true).open(path).map_err(err)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            snapshot_bytes: line.len() as u64,
            appended_bytes: 0,
        })
    }

    /// Appends records and syncs them to disk; only then may the writes be acknowledged.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        self.appended_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Whether the log has grown enough since its snapshot to be compacted.
    pub(crate) fn wants_compaction(&self) -> bool {
        self.appended_bytes > COMPACT_MIN_BYTES.max(self.snapshot_bytes * COMPACT_FACTOR)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// What a state file holds.
#[derive(Debug)]
pub(crate) struct Saved {
    pub(crate) resource_version: u64,
    pub(crate) objects: Objects,
    /// The last snapshot's `credentials`, if it had them.
    pub(crate) credentials: Option<Value>,
}

/// Reads a state file: the resourceVersion, every object and the credentials. A missing
/// file is not an error (`Ok(None)`); a damaged one is, and names the file (which is left
/// untouched).
pub(crate) fn load(path: &Path) -> Result<Option<Saved>, Error> {
    let bad = |message: String| Error::State {
        path: path.to_path_buf(),
        message,
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    let saved = if let Some(log) = bytes.strip_prefix(MAGIC.as_bytes()) {
        replay(log, MAGIC.len()).map_err(bad)?
    } else if bytes.first() == Some(&b'{') {
        let v: Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let (resource_version, objects) = read_snapshot(&v, "KapselState").map_err(bad)?;
        Saved {
            resource_version,
            objects,
            credentials: None,
        }
    } else {
        return Err(bad(
            "not a Kapsel state file (it does not start with KAPSEL-STATE 2)".into(),
        ));
    };
    Ok(Some(saved))
}

/// Objects as a state file holds them, with their resource.
pub(crate) type Objects = Vec<(ResKey, Value)>;

/// Every object of a snapshot (the `snapshot` record's body, or an old-format file).
fn read_snapshot(v: &Value, old_kind: &str) -> Result<(u64, Objects), String> {
    if !old_kind.is_empty() && v.get("kind").and_then(Value::as_str) != Some(old_kind) {
        return Err("not a Kapsel state file (kind is not KapselState)".into());
    }
    let rv = v
        .get("resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or("missing or invalid resourceVersion")?;
    let mut objects = Vec::new();
    for r in v
        .get("resources")
        .and_then(Value::as_array)
        .ok_or("missing resources")?
    {
        let (group, plural) = res_key(r)?;
        for item in r
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{plural}: missing items"))?
        {
            if meta_str(item, "name").is_empty() {
                return Err(format!("{plural}: an object without metadata.name"));
            }
            objects.push(((group.clone(), plural.clone()), item.clone()));
        }
    }
    Ok((rv, objects))
}

fn res_key(r: &Value) -> Result<ResKey, String> {
    let text = |k: &str| {
        r.get(k)
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(|| format!("a record without {k}"))
    };
    Ok((text("group")?, text("plural")?))
}

/// One line's record, or None when the line is torn or damaged.
fn parse_line(line: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(line).ok()?;
    let (sum, json) = text.split_once(' ')?;
    let sum = u32::from_str_radix(sum, 16).ok()?;
    (sum == crc32(json.as_bytes()))
        .then(|| serde_json::from_str(json).ok())
        .flatten()
}

/// Replays the records after the magic line; `offset` is where they start in the file.
fn replay(log: &[u8], offset: usize) -> Result<Saved, String> {
    let mut objects: BTreeMap<(ResKey, String, String), Value> = BTreeMap::new();
    let mut rv = 0u64;
    let mut credentials = None;
    let mut pos = 0;
    let mut damaged: Option<usize> = None;
    while pos < log.len() {
        let end = log[pos..].iter().position(|b| *b == b'\n').map(|i| pos + i);
        let record = end.and_then(|e| parse_line(&log[pos..e]));
        let Some(record) = record else {
            if pos == 0 {
                // The snapshot is written whole (to a new file, renamed): never torn.
                return Err("the snapshot record at its start is damaged".into());
            }
            // A torn write can only be the last record; remember where, and look on.
            damaged.get_or_insert(offset + pos);
            pos = end.map_or(log.len(), |e| e + 1);
            continue;
        };
        if let Some(at) = damaged {
            return Err(format!(
                "the record at byte {at} is damaged, and records after it are intact: the file was changed or corrupted, not cut short by a crash"
            ));
        }
        pos = end.map_or(log.len(), |e| e + 1);
        if let Some(c) = record.pointer("/snapshot/credentials") {
            credentials = Some(c.clone());
        }
        apply(&record, &mut objects, &mut rv)?;
    }
    if let Some(at) = damaged {
        tracing::warn!(
            byte = at,
            "dropped the torn last record of the state file (a write cut short by a crash; it was never acknowledged)"
        );
    }
    let objects = objects
        .into_iter()
        .map(|((res, _, _), obj)| (res, obj))
        .collect();
    Ok(Saved {
        resource_version: rv,
        objects,
        credentials,
    })
}

type Live = BTreeMap<(ResKey, String, String), Value>;

fn apply(record: &Value, objects: &mut Live, rv: &mut u64) -> Result<(), String> {
    let key_of = |res: ResKey, obj: &Value| {
        (
            res,
            meta_str(obj, "namespace").to_string(),
            meta_str(obj, "name").to_string(),
        )
    };
    if let Some(snap) = record.get("snapshot") {
        let (at, items) = read_snapshot(snap, "")?;
        objects.clear();
        for (res, obj) in items {
            objects.insert(key_of(res, &obj), obj);
        }
        *rv = (*rv).max(at);
    } else if let Some(put) = record.get("put") {
        let obj = put.get("object").ok_or("a put record without object")?;
        let at = meta_str(obj, "resourceVersion")
            .parse::<u64>()
            .map_err(|_| "a put record without a resourceVersion")?;
        *rv = (*rv).max(at);
        objects.insert(key_of(res_key(put)?, obj), obj.clone());
    } else if let Some(del) = record.get("delete") {
        let text = |k: &str| del.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        objects.remove(&(res_key(del)?, text("namespace"), text("name")));
        let at = record.get("rv").and_then(Value::as_u64).unwrap_or(0);
        *rv = (*rv).max(at);
    } else {
        return Err("a record of an unknown kind".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let line = record_line(&json!({"a": 1}));
        assert_eq!(
            parse_line(line.trim_end().as_bytes()),
            Some(json!({"a": 1}))
        );
        assert_eq!(parse_line(b"00000000 {\"a\":1}"), None);
    }

    /// A state file as an earlier build wrote it, checksums and all: it loads the same.
    #[test]
    fn a_fixed_log_loads() {
        let log = concat!(
            "KAPSEL-STATE 2\n",
            r#"183cc58d {"snapshot":{"resourceVersion":"3","resources":[{"group":"","plural":"configmaps","items":[{"metadata":{"name":"a","namespace":"default","resourceVersion":"3"}}]}]}}"#,
            "\n",
            r#"8d48b3df {"put":{"group":"","plural":"configmaps","object":{"metadata":{"name":"b","namespace":"default","resourceVersion":"4"}}}}"#,
            "\n",
            r#"667fa40e {"delete":{"group":"","plural":"configmaps","namespace":"default","name":"a"},"rv":5}"#,
            "\n",
        );
        let path = std::env::temp_dir().join(format!("kapsel-fixed-log-{}", std::process::id()));
        std::fs::write(&path, log).expect("written");
        let saved = load(&path).expect("loads").expect("a file");
        let _ = std::fs::remove_file(&path);
        assert_eq!(saved.resource_version, 5);
        let names: Vec<&str> = saved
            .objects
            .iter()
            .map(|(_, object)| meta_str(object, "name"))
            .collect();
        assert_eq!(names, ["b"]);
    }
}
