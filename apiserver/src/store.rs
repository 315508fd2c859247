//! The cluster's state: objects, the resourceVersion counter, the watch history and the
//! broadcast that feeds watchers.

pub(crate) use crate::meta::{ObjKey, ResKey, meta_str};
use crate::registry::{Registry, ResourceType};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the history and sent to watchers.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) ty: EventType,
    pub(crate) res: ResKey,
    /// The object after the change (for DELETED: its last state, carrying the deletion's RV).
    pub(crate) object: Value,
    /// The object before a MODIFIED change: lets a filtered watcher see objects leave
    /// its selector.
    pub(crate) old: Option<Value>,
}

/// A watcher's live event feed.
pub(crate) type Feed = broadcast::Receiver<Arc<Event>>;

/// How many events a watcher may fall behind before it is closed (kube closes slow
/// watchers too; the client then resumes from its last resourceVersion).
const WATCH_BUFFER: usize = 8192;

/// Everything the server knows; one instance behind a mutex.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) registry: Registry,
    objects: BTreeMap<ResKey, BTreeMap<ObjKey, Value>>,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    /// Events with a resourceVersion up to this one are no longer in the history.
    compacted: u64,
    history_limit: usize,
    events: broadcast::Sender<Arc<Event>>,
    /// The state file's log, when there is one.
    journal: Option<crate::persist::Journal>,
    /// Records of changes not yet in the log: written and synced by [`Store::flush`]
    /// before the lock is released, so before any client hears of the change.
    pending: Vec<u8>,
    /// Why the log could not be written, once it could not: writes fail from then on.
    journal_error: Option<String>,
    /// The server's secrets, kept in every snapshot of the state file (opaque here).
    credentials: Option<Value>,
}

pub(crate) fn res_of(rt: &ResourceType) -> ResKey {
    (rt.group.clone(), rt.plural.clone())
}

pub(crate) fn obj_key(obj: &Value) -> ObjKey {
    (
        meta_str(obj, "namespace").to_string(),
        meta_str(obj, "name").to_string(),
    )
}

pub(crate) const CRDS: (&str, &str) = ("apiextensions.k8s.io", "customresourcedefinitions");

impl Store {
    pub(crate) fn new(history_limit: usize) -> Self {
        let (events, _) = broadcast::channel(WATCH_BUFFER);
        Store {
            registry: Registry::new(crate::builtins::builtins()),
            objects: BTreeMap::new(),
            rv: 0,
            history: VecDeque::new(),
            compacted: 0,
            history_limit: history_limit.max(1),
            events,
            journal: None,
            pending: Vec::new(),
            journal_error: None,
            credentials: None,
        }
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, res: &ResKey, key: &ObjKey) -> Option<&Value> {
        self.objects.get(res).and_then(|m| m.get(key))
    }

    /// Objects of a resource in key order, optionally only one namespace's.
    pub(crate) fn list<'a>(
        &'a self,
        res: &ResKey,
        ns: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Value)> + 'a {
        self.objects
            .get(res)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(move |(k, _)| ns.is_none_or(|n| k.0 == n))
    }

    /// Every stored resource and its objects (for persistence and uid lookups).
    pub(crate) fn all(&self) -> impl Iterator<Item = (&ResKey, &BTreeMap<ObjKey, Value>)> {
        self.objects.iter()
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Every object and the resourceVersion, as the state file's snapshot record.
    pub(crate) fn snapshot(&self) -> Value {
        let resources: Vec<Value> = self
            .all()
            .filter(|(_, objs)| !objs.is_empty())
            .map(|((group, plural), objs)| json!({"group": group, "plural": plural, "items": objs.values().collect::<Vec<_>>()}))
            .collect();
        let mut snapshot =
            json!({"resourceVersion": self.rv().to_string(), "resources": resources});
        if let Some(c) = &self.credentials {
            snapshot["credentials"] = c.clone();
        }
        json!({ "snapshot": snapshot })
    }

    /// Sets the credentials every snapshot carries.
    pub(crate) fn set_credentials(&mut self, credentials: Value) {
        self.credentials = Some(credentials);
    }

    /// Starts logging every change to `journal`.
    pub(crate) fn set_journal(&mut self, journal: crate::persist::Journal) {
        self.journal = Some(journal);
    }

    /// Why the state file could not be written, if it could not.
    pub(crate) fn journal_error(&self) -> Option<&str> {
        self.journal_error.as_deref()
    }

    /// Writes the pending records to the state file and syncs it; compacts the file when
    /// it has grown enough. Called before the store's lock is released.
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let Some(journal) = self.journal.as_mut() else {
            return;
        };
        if let Err(e) = journal.append(&pending) {
            tracing::error!(error = %e, "could not write the state file; refusing writes from now on");
            self.journal_error
                .get_or_insert_with(|| format!("the state file could not be written: {e}"));
            return;
        }
        if journal.wants_compaction() {
            let path = journal.path().to_path_buf();
            match crate::persist::Journal::create(&path, &self.snapshot()) {
                Ok(fresh) => self.journal = Some(fresh),
                Err(e) => tracing::warn!(error = %e, "could not compact the state file"),
            }
        }
    }

    fn stamp(obj: &mut Value, rv: u64) {
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(rv.to_string()));
        }
    }

    /// Stores a new object under a fresh resourceVersion; emits ADDED.
    pub(crate) fn insert(&mut self, res: &ResKey, mut obj: Value) -> Value {
        let rv = self.next_rv();
        Self::stamp(&mut obj, rv);
        self.objects
            .entry(res.clone())
            .or_default()
            .insert(obj_key(&obj), obj.clone());
        self.emit(rv, EventType::Added, res, obj.clone(), None);
        obj
    }

    /// Replaces an existing object under a fresh resourceVersion; emits MODIFIED.
    pub(crate) fn replace(&mut self, res: &ResKey, mut obj: Value) -> Value {
        let rv = self.next_rv();
        Self::stamp(&mut obj, rv);
        let old = self
            .objects
            .entry(res.clone())
            .or_default()
            .insert(obj_key(&obj), obj.clone());
        self.emit(rv, EventType::Modified, res, obj.clone(), old);
        obj
    }

    /// Removes an object; emits DELETED with its last state at a fresh resourceVersion.
    pub(crate) fn remove(&mut self, res: &ResKey, key: &ObjKey) -> Option<Value> {
        let mut obj = self.objects.get_mut(res)?.remove(key)?;
        let rv = self.next_rv();
        Self::stamp(&mut obj, rv);
        self.emit(rv, EventType::Deleted, res, obj.clone(), None);
        Some(obj)
    }

    /// Drops a whole resource's storage (its CRD is gone) without events: by then every
    /// object has been deleted one by one.
    pub(crate) fn drop_resource(&mut self, res: &ResKey) {
        self.objects.remove(res);
    }

    fn emit(&mut self, rv: u64, ty: EventType, res: &ResKey, object: Value, old: Option<Value>) {
        if self.journal.is_some() {
            let record = match ty {
                EventType::Deleted => {
                    json!({"delete": {"group": res.0, "plural": res.1, "namespace": meta_str(&object, "namespace"), "name": meta_str(&object, "name")}, "rv": rv})
                }
                _ => json!({"put": {"group": res.0, "plural": res.1, "object": object}}),
            };
            self.pending
                .extend_from_slice(crate::persist::record_line(&record).as_bytes());
        }
        let ev = Arc::new(Event {
            rv,
            ty,
            res: res.clone(),
            object,
            old,
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_limit {
            if let Some(e) = self.history.pop_front() {
                self.compacted = e.rv;
            }
        }
        // No receivers is fine: nobody watches.
        let _ = self.events.send(ev);
    }

    /// Forgets the whole history: watches from any older resourceVersion get 410 Gone.
    pub(crate) fn expire_history(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// Subscribes a watcher and returns the events after `from` still in the history.
    /// Err carries the oldest resourceVersion still available (for the 410 message).
    /// Called under the state lock, so no event falls between the replay and the live feed.
    pub(crate) fn watch_from(&self, from: u64) -> Result<(Vec<Arc<Event>>, Feed), u64> {
        if from < self.compacted {
            return Err(self.compacted + 1);
        }
        let replay = self
            .history
            .iter()
            .filter(|e| e.rv > from)
            .cloned()
            .collect();
        Ok((replay, self.events.subscribe()))
    }

    /// Subscribes a watcher to live events only.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Recomputes the served types from the built-ins and the stored CRDs.
    pub(crate) fn rebuild_registry(&mut self) {
        let mut types = crate::builtins::builtins();
        let crd_res = (CRDS.0.to_string(), CRDS.1.to_string());
        for (_, crd) in self.list(&crd_res, None) {
            for t in crate::crd::types_of(crd) {
                // Built-ins are never shadowed by a CRD (a CRD's name is `plural.group`, so two
                // CRDs cannot claim the same resource).
                let taken = types.iter().any(|x: &ResourceType| {
                    x.group == t.group
                        && x.plural == t.plural
                        && (!x.custom || x.version == t.version)
                });
                if !taken {
                    types.push(t);
                }
            }
        }
        self.registry = Registry::new(types);
    }

    /// Restores objects loaded from a state file; the history starts empty after them.
    pub(crate) fn load(&mut self, rv: u64, objects: Vec<(ResKey, Value)>) {
        for (res, obj) in objects {
            self.objects
                .entry(res)
                .or_default()
                .insert(obj_key(&obj), obj);
        }
        self.rv = self.rv.max(rv);
        self.compacted = self.rv;
        self.history.clear();
        self.rebuild_registry();
    }
}
