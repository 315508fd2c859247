//! `kapsel run --record FILE`: what an operator received and what it did, as JSON Lines,
//! so that `kapsel test GUEST --replay FILE` can run a guest through the same traffic.
//!
//! One JSON object per line, each with an `entry` naming what it is:
//! - `recording`: the header (format version, wall time of the start, guests);
//! - `resource`: a resource the operator watches, as discovery described it (written before
//!   its first `watch` line), so a replay can serve it again;
//! - `watch`: an event a watch stream received (`LISTED` for listings);
//! - `write`: a patch the host itself sent, with the resourceVersion it produced, so a
//!   replay can tell the operator's own echoes from what others changed;
//! - `call`: a Kubernetes call a guest made, with its answer;
//! - `handler`: a handler call about an object ended, and how.
//!
//! Times (`at`) are seconds since the start. Lines are written as they happen and flushed
//! line by line: a recording of an operator that crashed is readable up to the crash.

use std::collections::HashSet;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::Resource;
use crate::journal::Record;
use crate::runtime::{Caller, KubeError, KubeRequest};

/// The format this host writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// One line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "entry",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub(crate) enum Entry {
    Recording {
        format: u32,
        /// RFC 3339 wall time of `at` = 0.
        started: String,
        host: String,
        guests: Vec<String>,
    },
    Resource(ResourceInfo),
    Watch {
        at: f64,
        /// [`Resource::key`].
        resource: String,
        #[serde(rename = "type")]
        event_type: String,
        object: Value,
    },
    Write {
        at: f64,
        resource: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        name: String,
        /// `object`, `status` or `finalizers`.
        part: String,
        resource_version: String,
        /// The write removed the last finalizer of an object marked for deletion, so
        /// the server deleted it: no watch event carries `resource_version`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        released: bool,
    },
    Call {
        at: f64,
        handler: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        object: Option<String>,
        /// `get`, `list`, `create`, `patch`, `delete`.
        verb: String,
        /// The selector as the guest gave it.
        target: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// The object's name, or the label selector of a list.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The body of a create, the merge patch of a patch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        /// The answer: the object or list (`null` for a delete), or the error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<CallError>,
    },
    Handler {
        at: f64,
        handler: String,
        handler_kind: String,
        object: String,
        /// `success`, `retry`, `failure` or `ignored`.
        outcome: String,
    },
}

impl Entry {
    #[cfg(feature = "testing")]
    /// When it happened, in seconds since the start (0 for the header and resources).
    pub(crate) fn at(&self) -> f64 {
        match self {
            Entry::Recording { .. } | Entry::Resource(_) => 0.0,
            Entry::Watch { at, .. }
            | Entry::Write { at, .. }
            | Entry::Call { at, .. }
            | Entry::Handler { at, .. } => *at,
        }
    }
}

/// A watched resource, as discovery described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceInfo {
    /// [`Resource::key`].
    pub(crate) key: String,
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) singular: String,
    #[serde(default)]
    pub(crate) short_names: Vec<String>,
    #[serde(default)]
    pub(crate) categories: Vec<String>,
    pub(crate) namespaced: bool,
    #[serde(default)]
    pub(crate) subresources: Vec<String>,
}

impl ResourceInfo {
    fn of(resource: &Resource) -> ResourceInfo {
        ResourceInfo {
            key: resource.key(),
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
            kind: resource.kind.clone(),
            singular: resource.singular.clone(),
            short_names: resource.short_names.clone(),
            categories: resource.categories.clone(),
            namespaced: resource.namespaced,
            subresources: resource.subresources.clone(),
        }
    }

    #[cfg(feature = "testing")]
    /// `apiVersion` as objects carry it.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// A guest call's error, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CallError {
    pub(crate) code: u16,
    pub(crate) reason: String,
    pub(crate) message: String,
}

/// Where recorded lines go. Cheap to clone; does nothing unless recording.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Option<Arc<Sink>>);

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Recorder(on)"
        } else {
            "Recorder(off)"
        })
    }
}

struct Sink {
    epoch: Instant,
    out: Mutex<Output>,
}

struct Output {
    writer: Box<dyn Write + Send>,
    /// Resources whose `resource` line is written already.
    described: HashSet<String>,
    /// Set after the first write error: said once, then nothing more is written.
    broken: bool,
}

#[cfg(any(test, feature = "testing"))]
/// A recording kept in memory (a replay records what the replayed guest does).
#[derive(Clone, Default)]
pub(crate) struct Memory(Arc<Mutex<Vec<u8>>>);

#[cfg(any(test, feature = "testing"))]
impl Memory {
    /// Everything recorded so far.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

#[cfg(any(test, feature = "testing"))]
impl Write for Memory {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Recorder {
    /// Records into `path` (created or truncated), starting with the header.
    ///
    /// # Errors
    /// When the file cannot be created.
    pub(crate) fn to_file(path: &Path, guests: &[String]) -> std::io::Result<Recorder> {
        let file = std::fs::File::create(path)?;
        let recorder = Recorder::to_writer(Box::new(LineWriter::new(file)));
        recorder.header(guests);
        Ok(recorder)
    }

    #[cfg(any(test, feature = "testing"))]
    /// Records into memory.
    pub(crate) fn in_memory(guests: &[String]) -> (Recorder, Memory) {
        let memory = Memory::default();
        let recorder = Recorder::to_writer(Box::new(memory.clone()));
        recorder.header(guests);
        (recorder, memory)
    }

    fn to_writer(writer: Box<dyn Write + Send>) -> Recorder {
        Recorder(Some(Arc::new(Sink {
            epoch: Instant::now(),
            out: Mutex::new(Output {
                writer,
                described: HashSet::new(),
                broken: false,
            }),
        })))
    }

    fn header(&self, guests: &[String]) {
        self.push(|_| Entry::Recording {
            format: FORMAT,
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            host: format!("kapsel {}", env!("CARGO_PKG_VERSION")),
            guests: guests.to_vec(),
        });
    }

    /// Whether anything is recorded.
    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Writes the entry `make` builds from the time since the start.
    fn push(&self, make: impl FnOnce(f64) -> Entry) {
        let Some(sink) = &self.0 else { return };
        let entry = make(round(sink.epoch.elapsed().as_secs_f64()));
        let mut out = sink.out.lock().unwrap_or_else(PoisonError::into_inner);
        out.write(&entry);
    }

    /// A watch stream received an event (`LISTED`, `ADDED`, `MODIFIED`, `DELETED`).
    pub(crate) fn watch(&self, resource: &Resource, event_type: &str, object: &Value) {
        let Some(sink) = &self.0 else { return };
        let at = round(sink.epoch.elapsed().as_secs_f64());
        let mut out = sink.out.lock().unwrap_or_else(PoisonError::into_inner);
        if out.described.insert(resource.key()) {
            out.write(&Entry::Resource(ResourceInfo::of(resource)));
        }
        out.write(&Entry::Watch {
            at,
            resource: resource.key(),
            event_type: event_type.to_owned(),
            object: object.clone(),
        });
    }

    /// The host patched an object (`part`: `object`, `status`, `finalizers`) and the
    /// server answered with `response`.
    pub(crate) fn write(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        part: &str,
        response: &Value,
    ) {
        let Some(version) = response
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        else {
            return;
        };
        let released = response.pointer("/metadata/deletionTimestamp").is_some()
            && response
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        self.push(|at| Entry::Write {
            at,
            resource: resource.key(),
            namespace: namespace.filter(|_| resource.namespaced).map(str::to_owned),
            name: name.to_owned(),
            part: part.to_owned(),
            resource_version: version.to_owned(),
            released,
        });
    }

    /// A guest made a Kubernetes call.
    pub(crate) fn call(
        &self,
        caller: &Caller,
        request: &KubeRequest,
        result: &Result<String, KubeError>,
    ) {
        if !self.is_on() {
            return;
        }
        let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::String(text.into()));
        let (verb, target, namespace, name, body) = match request {
            KubeRequest::Get {
                target,
                namespace,
                name,
            } => ("get", target, namespace, Some(name.clone()), None),
            KubeRequest::List {
                target,
                namespace,
                label_selector,
            } => ("list", target, namespace, label_selector.clone(), None),
            KubeRequest::Create {
                target,
                namespace,
                body,
            } => ("create", target, namespace, None, Some(parse(body))),
            KubeRequest::Patch {
                target,
                namespace,
                name,
                merge_patch,
            } => (
                "patch",
                target,
                namespace,
                Some(name.clone()),
                Some(parse(merge_patch)),
            ),
            KubeRequest::Delete {
                target,
                namespace,
                name,
            } => ("delete", target, namespace, Some(name.clone()), None),
        };
        let (result, error) = match result {
            Ok(text) if text.is_empty() => (Some(Value::Null), None),
            Ok(text) => (Some(parse(text)), None),
            Err(e) => (
                None,
                Some(CallError {
                    code: e.code,
                    reason: e.reason.clone(),
                    message: e.message.clone(),
                }),
            ),
        };
        self.push(|at| Entry::Call {
            at,
            handler: caller.handler_id.clone(),
            object: caller.object.clone(),
            verb: verb.to_owned(),
            target: target.to_string(),
            namespace: namespace.clone(),
            name,
            body,
            result,
            error,
        });
    }

    /// Records how handler calls about objects ended (a journal observer).
    pub(crate) fn observe(&self, journal: &crate::Journal) {
        if !self.is_on() {
            return;
        }
        let recorder = self.clone();
        journal.observe(move |record| {
            if let Record::HandlerFinished {
                handler,
                kind,
                object: Some(object),
                outcome,
                ..
            } = record
            {
                recorder.push(|at| Entry::Handler {
                    at,
                    handler: handler.clone(),
                    handler_kind: kind.clone(),
                    object: object.clone(),
                    outcome: outcome.clone(),
                });
            }
        });
    }
}

impl Output {
    fn write(&mut self, entry: &Entry) {
        if self.broken {
            return;
        }
        let written = serde_json::to_writer(&mut self.writer, entry)
            .map_err(std::io::Error::from)
            .and_then(|()| self.writer.write_all(b"\n"));
        if let Err(error) = written {
            self.broken = true;
            tracing::error!("The recording stopped: cannot write to it: {error}");
        }
    }
}

/// Microseconds are plenty, and keep the lines short.
fn round(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

/// Why a file is not a recording this host can replay; each names the file, and the
/// line where one is wrong.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("{}: cannot read the recording: {source}", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not a recording line: {source}", path.display())]
    NotALine {
        path: std::path::PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}:{line}: recording format {format}; this host reads format {FORMAT}", path.display())]
    OtherFormat {
        path: std::path::PathBuf,
        line: usize,
        format: u32,
    },
    #[error(
        "{}:{line}: a recording starts with its `recording` header line (made by `kapsel run --record`)",
        path.display()
    )]
    NoHeader {
        path: std::path::PathBuf,
        line: usize,
    },
    #[error("{}: the recording is empty", path.display())]
    Empty { path: std::path::PathBuf },
}

#[cfg(any(test, feature = "testing"))]
/// Reads a recording; errors name the line.
///
/// # Errors
/// For the first bad line (`FILE:LINE: what is wrong`), or for a file that is not a
/// recording of this format.
pub(crate) fn read(path: &Path) -> Result<Vec<Entry>, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Unreadable {
        path: path.to_owned(),
        source,
    })?;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_number = index + 1;
        let entry: Entry = serde_json::from_str(line).map_err(|source| ReadError::NotALine {
            path: path.to_owned(),
            line: line_number,
            source,
        })?;
        if entries.is_empty() {
            match &entry {
                Entry::Recording { format, .. } if *format == FORMAT => {}
                Entry::Recording { format, .. } => {
                    return Err(ReadError::OtherFormat {
                        path: path.to_owned(),
                        line: line_number,
                        format: *format,
                    });
                }
                _ => {
                    return Err(ReadError::NoHeader {
                        path: path.to_owned(),
                        line: line_number,
                    });
                }
            }
        }
        entries.push(entry);
    }
    if entries.is_empty() {
        return Err(ReadError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn resource() -> Resource {
        Resource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            singular: "kopfexample".into(),
            short_names: vec!["kex".into()],
            categories: Vec::new(),
            namespaced: true,
            verbs: Vec::new(),
            subresources: vec!["status".into()],
            preferred: true,
        }
    }

    #[test]
    fn lines_round_trip_and_resources_are_described_once() {
        let (recorder, memory) = Recorder::in_memory(&["g".into()]);
        let object = json!({"metadata": {"name": "a", "resourceVersion": "7"}});
        recorder.watch(&resource(), "ADDED", &object);
        recorder.watch(&resource(), "MODIFIED", &object);
        recorder.write(&resource(), Some("ns"), "a", "status", &object);
        let entries = memory.entries();
        let kinds: Vec<&str> = entries
            .iter()
            .map(|e| match e {
                Entry::Recording { .. } => "recording",
                Entry::Resource(_) => "resource",
                Entry::Watch { .. } => "watch",
                Entry::Write { .. } => "write",
                Entry::Call { .. } => "call",
                Entry::Handler { .. } => "handler",
            })
            .collect();
        assert_eq!(kinds, ["recording", "resource", "watch", "watch", "write"]);
        match &entries[4] {
            Entry::Write {
                namespace,
                resource_version,
                ..
            } => assert_eq!(
                (namespace.as_deref(), resource_version.as_str()),
                (Some("ns"), "7")
            ),
            other => panic!("not a write: {other:?}"),
        }
    }

    #[test]
    fn bad_files_are_refused_with_their_line() {
        let dir = std::env::temp_dir().join(format!("kapsel-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("bad.jsonl");
        std::fs::write(&path, "{\"entry\": \"watch\"}\n").expect("write");
        let refusal = |path: &Path| read(path).map(|_| ()).unwrap_err().to_string();
        assert!(refusal(&path).contains("bad.jsonl:1:"));
        std::fs::write(
            &path,
            "{\"entry\":\"recording\",\"format\":1,\"started\":\"x\",\"host\":\"h\",\"guests\":[]}\nnot json\n",
        )
        .expect("write");
        assert!(refusal(&path).contains("bad.jsonl:2:"));
        std::fs::write(
            &path,
            "{\"entry\":\"recording\",\"format\":9,\"started\":\"x\",\"host\":\"h\",\"guests\":[]}\n",
        )
        .expect("write");
        assert!(refusal(&path).contains("format 9"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
