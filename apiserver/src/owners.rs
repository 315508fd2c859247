//! Who owns whom: the store's index of objects by uid and of dependents by their owners'
//! uids, so the garbage collector finds an object's dependents and an owner without
//! reading every stored object (as kube's collector keeps a graph of them).
//!
//! Scanning every object at every removal made deleting N objects cost N², with Events
//! beside them (figures: docs/performance.md).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::meta::{ObjKey, ResKey, meta_str};

/// Where an object is stored.
pub(crate) type Place = (ResKey, ObjKey);

/// The index; kept in step with the objects by the store alone.
#[derive(Debug, Default)]
pub(crate) struct Owners {
    /// Every object with a uid, by its uid.
    by_uid: HashMap<String, Place>,
    /// Per owner uid, the objects whose `ownerReferences` name it, in the store's order.
    dependents: HashMap<String, BTreeSet<Place>>,
}

impl Owners {
    /// Indexes `obj`, stored at `res` and `key`.
    pub(crate) fn add(&mut self, res: &ResKey, key: &ObjKey, obj: &Value) {
        let uid = meta_str(obj, "uid");
        if !uid.is_empty() {
            self.by_uid
                .insert(uid.to_owned(), (res.clone(), key.clone()));
        }
        for owner in owner_uids(obj) {
            self.dependents
                .entry(owner.to_owned())
                .or_default()
                .insert((res.clone(), key.clone()));
        }
    }

    /// Forgets `obj`, which was stored at `res` and `key` (what [`Owners::add`] indexed).
    pub(crate) fn forget(&mut self, res: &ResKey, key: &ObjKey, obj: &Value) {
        let uid = meta_str(obj, "uid");
        if self
            .by_uid
            .get(uid)
            .is_some_and(|place| place.0 == *res && place.1 == *key)
        {
            self.by_uid.remove(uid);
        }
        for owner in owner_uids(obj) {
            if let Some(places) = self.dependents.get_mut(owner) {
                places.remove(&(res.clone(), key.clone()));
                if places.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
    }

    /// Re-indexes the object at `res` and `key` that was `old` and is `new` now. Most
    /// writes (a patch of spec or status) change neither its uid nor its owners: nothing
    /// to do for them.
    pub(crate) fn replace(&mut self, res: &ResKey, key: &ObjKey, old: &Value, new: &Value) {
        if meta_str(old, "uid") == meta_str(new, "uid") && owner_uids(old).eq(owner_uids(new)) {
            return;
        }
        self.forget(res, key, old);
        self.add(res, key, new);
    }

    /// Where the object with `uid` is stored.
    pub(crate) fn locate(&self, uid: &str) -> Option<&Place> {
        self.by_uid.get(uid)
    }

    /// The objects whose `ownerReferences` name `owner_uid`, in the store's order.
    pub(crate) fn dependents(&self, owner_uid: &str) -> Vec<Place> {
        self.dependents
            .get(owner_uid)
            .map(|places| places.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// The uids `obj`'s `ownerReferences` name (a reference without one names nothing).
pub(crate) fn owner_uids(obj: &Value) -> impl Iterator<Item = &str> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
        .filter(|uid| !uid.is_empty())
}
