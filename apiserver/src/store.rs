//! The cluster's state: objects, the resourceVersion counter, the watch history and the
//! broadcast that feeds watchers.

pub(crate) use crate::meta::{ObjKey, ResKey, meta_str};
use crate::owners::{Owners, Place};
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
    /// The object after the change (for DELETED: its last state, carrying the deletion's
    /// RV); shared with the store while it is the stored version.
    pub(crate) object: Arc<Value>,
    /// The object before a MODIFIED change: lets a filtered watcher see objects leave
    /// its selector.
    pub(crate) old: Option<Arc<Value>>,
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
    /// Each object shared with the event that wrote it: a write copies it only for its
    /// answer (a copy for the store and one for the event were a twentieth of the
    /// server's cost of a write, `make bench`).
    objects: BTreeMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    /// The objects by uid and by their owners' uids; changed wherever `objects` is.
    owners: Owners,
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
    /// Whether a kubelet confirms pod deletions, so a scheduled pod's is graceful.
    graceful_pods: bool,
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
            owners: Owners::default(),
            rv: 0,
            history: VecDeque::new(),
            compacted: 0,
            history_limit: history_limit.max(1),
            events,
            journal: None,
            pending: Vec::new(),
            journal_error: None,
            credentials: None,
            graceful_pods: false,
        }
    }

    /// Makes scheduled pods' deletions graceful: a kubelet confirms them.
    pub(crate) fn set_graceful_pods(&mut self, on: bool) {
        self.graceful_pods = on;
    }

    /// Whether scheduled pods' deletions are graceful (a kubelet confirms them).
    pub(crate) fn graceful_pods(&self) -> bool {
        self.graceful_pods
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, res: &ResKey, key: &ObjKey) -> Option<&Value> {
        self.shared(res, key).map(|obj| &**obj)
    }

    /// The stored object itself, to keep without a copy.
    pub(crate) fn shared(&self, res: &ResKey, key: &ObjKey) -> Option<&Arc<Value>> {
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
            .map(|(k, obj)| (k, &**obj))
    }

    /// The object with `uid`: where it is stored, and it.
    pub(crate) fn by_uid(&self, uid: &str) -> Option<(&Place, &Value)> {
        let place = self.owners.locate(uid)?;
        Some((place, self.get(&place.0, &place.1)?))
    }

    /// The objects whose `ownerReferences` name `owner_uid`, in the store's order.
    pub(crate) fn dependents(&self, owner_uid: &str) -> Vec<Place> {
        self.owners.dependents(owner_uid)
    }

    /// Every stored resource and its objects (for persistence and a namespace's cleanup).
    pub(crate) fn all(&self) -> impl Iterator<Item = (&ResKey, &BTreeMap<ObjKey, Arc<Value>>)> {
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
            .map(|((group, plural), objs)| json!({"group": group, "plural": plural, "items": objs.values().map(|obj| &**obj).collect::<Vec<_>>()}))
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
    pub(crate) fn insert(&mut self, res: &ResKey, obj: Value) -> Arc<Value> {
        self.write(res, obj, EventType::Added)
    }

    /// Replaces an existing object under a fresh resourceVersion; emits MODIFIED.
    pub(crate) fn replace(&mut self, res: &ResKey, obj: Value) -> Arc<Value> {
        self.write(res, obj, EventType::Modified)
    }

    /// Stores `obj` under a fresh resourceVersion and emits `ty` (ADDED or MODIFIED) with
    /// it; the object stored, the event's and the one returned (for the answer) are one.
    fn write(&mut self, res: &ResKey, mut obj: Value, ty: EventType) -> Arc<Value> {
        let rv = self.next_rv();
        Self::stamp(&mut obj, rv);
        let obj = Arc::new(obj);
        let old = self.put(res, Arc::clone(&obj));
        let old = old.filter(|_| ty == EventType::Modified);
        self.emit(rv, ty, res, Arc::clone(&obj), old);
        obj
    }

    /// Stores `obj` where its key says, in place of what was there (returned); the
    /// index follows.
    fn put(&mut self, res: &ResKey, obj: Arc<Value>) -> Option<Arc<Value>> {
        let key = obj_key(&obj);
        let old = self
            .objects
            .entry(res.clone())
            .or_default()
            .insert(key.clone(), Arc::clone(&obj));
        match &old {
            Some(old) => self.owners.replace(res, &key, old, &obj),
            None => self.owners.add(res, &key, &obj),
        }
        old
    }

    /// Removes an object; emits DELETED with its last state at a fresh resourceVersion.
    pub(crate) fn remove(&mut self, res: &ResKey, key: &ObjKey) -> Option<Arc<Value>> {
        let stored = self.objects.get_mut(res)?.remove(key)?;
        self.owners.forget(res, key, &stored);
        let rv = self.next_rv();
        // A copy only while an event still holds the stored version.
        let mut obj = Arc::unwrap_or_clone(stored);
        Self::stamp(&mut obj, rv);
        let obj = Arc::new(obj);
        self.emit(rv, EventType::Deleted, res, Arc::clone(&obj), None);
        Some(obj)
    }

    /// Drops a whole resource's storage (its CRD is gone) without events: by then every
    /// object has been deleted one by one.
    pub(crate) fn drop_resource(&mut self, res: &ResKey) {
        for (key, obj) in self.objects.remove(res).unwrap_or_default() {
            self.owners.forget(res, &key, &obj);
        }
    }

    fn emit(
        &mut self,
        rv: u64,
        ty: EventType,
        res: &ResKey,
        object: Arc<Value>,
        old: Option<Arc<Value>>,
    ) {
        if self.journal.is_some() {
            let record = match ty {
                EventType::Deleted => {
                    json!({"delete": {"group": res.0, "plural": res.1, "namespace": meta_str(&object, "namespace"), "name": meta_str(&object, "name")}, "rv": rv})
                }
                _ => json!({"put": {"group": res.0, "plural": res.1, "object": &*object}}),
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
            self.put(&res, Arc::new(obj));
        }
        self.rv = self.rv.max(rv);
        self.compacted = self.rv;
        self.history.clear();
        self.rebuild_registry();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, uid: &str, owners: &[&str]) -> Value {
        let refs: Vec<Value> = owners
            .iter()
            .map(|uid| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": uid}))
            .collect();
        json!({"metadata": {"namespace": "ns", "name": name, "uid": uid, "ownerReferences": refs}})
    }

    /// What a scan of every stored object finds, which the index must answer.
    fn scanned(store: &Store, uid: &str) -> (Option<Place>, Vec<Place>) {
        let mut found = None;
        let mut dependents = Vec::new();
        for (res, objects) in store.all() {
            for (key, obj) in objects {
                if meta_str(obj, "uid") == uid {
                    found = Some((res.clone(), key.clone()));
                }
                let refs = obj
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array);
                if refs.is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid)) {
                    dependents.push((res.clone(), key.clone()));
                }
            }
        }
        (found, dependents)
    }

    fn assert_in_step(store: &Store) {
        for uid in ["a", "b", "c", "d", "gone"] {
            let indexed = (
                store.by_uid(uid).map(|(place, _)| place.clone()),
                store.dependents(uid),
            );
            assert_eq!(indexed, scanned(store, uid), "uid {uid}");
        }
    }

    #[test]
    fn the_index_follows_every_change_of_the_objects() {
        let maps: ResKey = (String::new(), "configmaps".into());
        let secrets: ResKey = (String::new(), "secrets".into());
        let key = |name: &str| ("ns".to_owned(), name.to_owned());
        let mut store = Store::new(100);

        store.insert(&maps, object("owner", "a", &[]));
        store.insert(&maps, object("one", "b", &["a"]));
        store.insert(&secrets, object("two", "c", &["a", "b"]));
        assert_in_step(&store);
        assert_eq!(store.dependents("a").len(), 2);

        // A dependent changes owners, then loses them.
        store.replace(&maps, object("one", "b", &["c"]));
        assert_in_step(&store);
        store.replace(&secrets, object("two", "c", &[]));
        assert_in_step(&store);
        assert!(store.dependents("a").is_empty());

        // Re-created under another uid: the old uid names nothing.
        store.remove(&maps, &key("owner"));
        assert_in_step(&store);
        store.insert(&maps, object("owner", "d", &[]));
        store.insert(&secrets, object("three", "gone", &["d"]));
        assert_in_step(&store);
        assert!(store.by_uid("a").is_none());

        store.drop_resource(&secrets);
        assert_in_step(&store);
        assert!(store.dependents("d").is_empty());

        // A state file's objects, one of them twice (the last holds).
        let mut loaded = Store::new(100);
        loaded.load(
            7,
            vec![
                (maps.clone(), object("one", "b", &["a"])),
                (maps.clone(), object("one", "b", &["d"])),
                (secrets.clone(), object("two", "c", &["d"])),
            ],
        );
        assert_in_step(&loaded);
        assert_eq!(loaded.dependents("d").len(), 2);
    }
}
