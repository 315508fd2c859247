//! What a replay does, worked out from the recording before anything runs: the objects
//! to seed, and the changes others made, at their recorded times.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use super::{
    Action, Address, Plan, Step, address_of, is_empty, namespace_of, strip_server_fields, text,
};
use crate::recording::{Entry, ResourceInfo};

/// Why a recording cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub(super) enum PlanError {
    #[error("the recording has no header")]
    NoHeader,
    #[error(
        "the recording was made with {} guests ({}); a replay runs one guest: record it alone",
        guests.len(),
        guests.join(", ")
    )]
    SeveralGuests { guests: Vec<String> },
    #[error("the recording's start {started:?} is not an RFC 3339 time: {source}")]
    BadStart {
        started: String,
        #[source]
        source: chrono::ParseError,
    },
    #[error("a watch event of {resource} comes before the resource's description")]
    WatchBeforeResource { resource: String },
}

/// Works out the replay from a recording.
pub(super) fn plan(entries: &[Entry]) -> Result<Plan, PlanError> {
    let started = started(entries)?;
    let own = OwnWrites::of(entries);
    let mut watched = Watched::new();
    for entry in entries {
        watched.follow(entry, &own)?;
    }
    let (seeds, changes) = unwatched(entries, &own.versions);
    let Watched {
        resources,
        given,
        mut steps,
        end,
        ..
    } = watched;
    steps.extend(changes);
    // Stable: steps of one time keep the recording's order, and a change of an unwatched
    // object comes after the steps of the read before it.
    steps.sort_by(|a, b| a.at.total_cmp(&b.at));
    Ok(Plan {
        started,
        resources,
        given,
        seeds,
        steps,
        end,
    })
}

/// The wall time the recording started at, from its header; a recording of several
/// guests is refused.
fn started(entries: &[Entry]) -> Result<chrono::DateTime<chrono::Utc>, PlanError> {
    let Some(Entry::Recording {
        started, guests, ..
    }) = entries.first()
    else {
        return Err(PlanError::NoHeader);
    };
    // Other guests' handlers would show as differences, and their patches in the objects.
    if guests.len() > 1 {
        return Err(PlanError::SeveralGuests {
            guests: guests.clone(),
        });
    }
    Ok(chrono::DateTime::parse_from_rfc3339(started)
        .map_err(|source| PlanError::BadStart {
            started: started.clone(),
            source,
        })?
        .with_timezone(&chrono::Utc))
}

/// An object by namespace and name (its resource left out).
type Named<'a> = (Option<&'a str>, &'a str);

/// What the operator did itself, gathered from the whole recording before anything is
/// replayed: a watch event may be recorded before the response to the patch that caused
/// it.
struct OwnWrites<'a> {
    /// The versions the operator produced itself, wherever their lines are.
    versions: HashSet<&'a str>,
    /// The objects the host released (removed its finalizers from).
    host_released: HashSet<Named<'a>>,
    /// The objects a guest deleted.
    guest_deleted: HashSet<Named<'a>>,
}

impl<'a> OwnWrites<'a> {
    fn of(entries: &'a [Entry]) -> OwnWrites<'a> {
        let mut own = OwnWrites {
            versions: HashSet::new(),
            host_released: HashSet::new(),
            guest_deleted: HashSet::new(),
        };
        for entry in entries {
            match entry {
                Entry::Write {
                    resource_version,
                    namespace,
                    name,
                    released,
                    ..
                } => {
                    // A release's answer is the deleted object, whose version another
                    // (somebody else's) event may carry: only the DELETED event is ours.
                    if *released {
                        own.host_released.insert((namespace.as_deref(), name));
                    } else {
                        own.versions.insert(resource_version);
                    }
                }
                Entry::Call {
                    verb,
                    result: Some(result),
                    ..
                } if verb == "create" || verb == "patch" => {
                    own.versions
                        .extend(text(result, "/metadata/resourceVersion"));
                }
                Entry::Call {
                    verb,
                    namespace,
                    name: Some(name),
                    error: None,
                    ..
                } if verb == "delete" => {
                    own.guest_deleted.insert((namespace.as_deref(), name));
                }
                _ => {}
            }
        }
        own
    }
}

/// The recording followed line by line as its streams saw it: the resources served, the
/// objects given at the start, and the steps that replay what somebody else did.
struct Watched {
    resources: BTreeMap<String, ResourceInfo>,
    given: Vec<(String, Value)>,
    steps: Vec<Step>,
    /// The last recorded version of each object that exists.
    last: HashMap<Address, Value>,
    /// Whether every watch event so far was a listing: what the first listings show
    /// exists before the operator starts.
    listing: bool,
    /// The time of the last line so far.
    end: f64,
}

impl Watched {
    fn new() -> Watched {
        Watched {
            resources: BTreeMap::new(),
            given: Vec::new(),
            steps: Vec::new(),
            last: HashMap::new(),
            listing: true,
            end: 0.0,
        }
    }

    /// Takes in one line of the recording.
    fn follow(&mut self, entry: &Entry, own: &OwnWrites<'_>) -> Result<(), PlanError> {
        self.end = self.end.max(entry.at());
        match entry {
            Entry::Resource(info) => {
                self.resources.insert(info.key.clone(), info.clone());
            }
            Entry::Handler { at, .. } => self.steps.push(Step {
                at: *at,
                action: Action::Wait,
            }),
            Entry::Watch {
                at,
                resource,
                event_type,
                object,
            } => {
                if !self.resources.contains_key(resource) {
                    return Err(PlanError::WatchBeforeResource {
                        resource: resource.clone(),
                    });
                }
                if let Some(action) = self.event(resource, event_type, object, own) {
                    self.steps.push(Step { at: *at, action });
                }
            }
            Entry::Recording { .. } | Entry::Write { .. } | Entry::Call { .. } => {}
        }
        Ok(())
    }

    /// What somebody else did that a watch event shows, to be done again (nothing for
    /// what the operator did itself); the object's last version is remembered.
    fn event(
        &mut self,
        resource: &str,
        event_type: &str,
        object: &Value,
        own: &OwnWrites<'_>,
    ) -> Option<Action> {
        let address = address_of(resource, object);
        let key = (address.1.as_deref(), address.2.as_str());
        let version = text(object, "/metadata/resourceVersion").unwrap_or_default();
        self.listing &= event_type == "LISTED";
        let previous = self.last.get(&address).cloned();
        let mine = own.versions.contains(version);
        let action = match (event_type, &previous) {
            ("LISTED", None) if self.listing => {
                self.given.push((resource.to_owned(), object.clone()));
                None
            }
            ("DELETED", None) => None,
            ("DELETED", Some(previous)) => {
                let deleting = previous.pointer("/metadata/deletionTimestamp").is_some();
                if mine
                    || own.guest_deleted.contains(&key)
                    || (deleting && own.host_released.contains(&key))
                {
                    None
                } else if deleting {
                    Some(Action::Release(address.clone()))
                } else {
                    Some(Action::Delete(address.clone()))
                }
            }
            (_, _) if mine => None,
            (_, None) => Some(Action::Create(resource.to_owned(), object.clone())),
            (_, Some(previous)) => {
                change(&address, previous, object, own.guest_deleted.contains(&key))
            }
        };
        if event_type == "DELETED" {
            self.last.remove(&address);
        } else {
            self.last.insert(address, object.clone());
        }
        action
    }
}

/// An object's identity across clusters: apiVersion, kind, namespace, name.
pub(super) type Identity = (String, String, Option<String>, String);

fn identity(object: &Value) -> Identity {
    let field = |pointer: &str| text(object, pointer).unwrap_or_default().to_owned();
    (
        field("/apiVersion"),
        field("/kind"),
        namespace_of(object).map(str::to_owned),
        field("/metadata/name"),
    )
}

/// The objects the guests read (`get`, `list`) that no stream watched: the first read
/// of each that no guest had created is a seed (it existed in the recorded cluster, so
/// the replay's must have it too); a later read that found a version the operator did
/// not write is somebody else's change, replayed right after the read before it, so
/// that the guest under test reads what the recorded guest read, when it read it.
pub(super) fn unwatched(
    entries: &[Entry],
    own_versions: &HashSet<&str>,
) -> (Vec<Value>, Vec<Step>) {
    let watched: HashSet<Identity> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Watch { object, .. } => Some(identity(object)),
            _ => None,
        })
        .collect();
    // The last version the operator knew of each object, and when it learnt it.
    let mut known: HashMap<Identity, (f64, Value)> = HashMap::new();
    let mut seeds = Vec::new();
    let mut steps = Vec::new();
    for entry in entries {
        let Entry::Call {
            at,
            verb,
            result: Some(result),
            ..
        } = entry
        else {
            continue;
        };
        let read: Vec<&Value> = match verb.as_str() {
            // Written by a guest: the guest under test writes it again.
            "create" | "patch" => {
                known.insert(identity(result), (*at, result.clone()));
                continue;
            }
            "get" => vec![result],
            "list" => result
                .get("items")
                .and_then(Value::as_array)
                .map(|items| items.iter().collect())
                .unwrap_or_default(),
            _ => continue,
        };
        for object in read {
            let id = identity(object);
            if id.3.is_empty() || watched.contains(&id) {
                continue;
            }
            let version = text(object, "/metadata/resourceVersion").unwrap_or_default();
            match known.get(&id) {
                None => seeds.push(object.clone()),
                Some((before, previous))
                    if text(previous, "/metadata/resourceVersion") != Some(version)
                        && !own_versions.contains(version) =>
                {
                    if let Some(mut diff) =
                        merge_diff(&strip_server_fields(previous), &strip_server_fields(object))
                    {
                        let status = diff.as_object_mut().and_then(|d| d.remove("status"));
                        steps.push(Step {
                            at: *before,
                            action: Action::PatchUnwatched {
                                object: id.clone(),
                                main: Some(diff).filter(|d| !is_empty(d)),
                                status,
                            },
                        });
                    }
                }
                Some(_) => {}
            }
            known.insert(id, (*at, object.clone()));
        }
    }
    (seeds, steps)
}

/// What somebody else changed between two recorded versions.
fn change(
    at: &Address,
    previous: &Value,
    current: &Value,
    deleted_by_guest: bool,
) -> Option<Action> {
    let was_deleting = previous.pointer("/metadata/deletionTimestamp").is_some();
    if current.pointer("/metadata/deletionTimestamp").is_some() && !was_deleting {
        // A deletion: the rest of that version's changes are the server's.
        return (!deleted_by_guest).then(|| Action::Delete(at.clone()));
    }
    let mut diff = merge_diff(
        &strip_server_fields(previous),
        &strip_server_fields(current),
    )?;
    let status = diff.as_object_mut().and_then(|d| d.remove("status"));
    let main = Some(diff).filter(|d| !is_empty(d));
    if main.is_none() && status.is_none() {
        return None;
    }
    Some(Action::Patch {
        at: at.clone(),
        main,
        status,
    })
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`; `None` when equal.
fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(before) => {
                        if let Some(inner) = merge_diff(before, value) {
                            patch.insert(key.clone(), inner);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (old, new) if old == new => None,
        (_, new) => Some(new.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn only_what_others_changed_is_replayed() {
        let entries = vec![
            header(),
            resource(),
            watch(0.5, "LISTED", kex("1", json!({}))),
            // The operator's own patch, its write line after its echo.
            watch(0.6, "MODIFIED", kex("2", json!({"status": {"done": true}}))),
            write("2", "status", false),
            // A user's change of spec.size and a label.
            watch(
                1.0,
                "MODIFIED",
                kex("3", json!({"spec": {"size": 2}, "status": {"done": true}})),
            ),
            watch(
                2.0,
                "MODIFIED",
                kex(
                    "4",
                    json!({"spec": {"size": 2}, "status": {"done": true},
                    "metadata": {"name": "kex", "namespace": "ns", "resourceVersion": "4",
                                 "deletionTimestamp": "t", "finalizers": ["f"]}}),
                ),
            ),
            watch(2.5, "DELETED", kex("5", json!({}))),
            // The release's answer carries the version of the user's deletion.
            write("4", "finalizers", true),
        ];
        let plan = plan(&entries).expect("a plan");
        assert_eq!(plan.given.len(), 1, "the listed object exists at the start");
        let address: Address = (
            "kopfexamples.v1.kopf.dev".into(),
            Some("ns".into()),
            "kex".into(),
        );
        assert_eq!(
            plan.steps,
            vec![
                Step {
                    at: 1.0,
                    action: Action::Patch {
                        at: address.clone(),
                        main: Some(json!({"spec": {"size": 2}})),
                        status: None,
                    },
                },
                Step {
                    at: 2.0,
                    action: Action::Delete(address),
                },
            ],
            "the status echo and the host's release are not replayed"
        );
        assert_eq!(plan.end, 2.5);
    }

    #[test]
    fn objects_only_guests_read_are_seeded() {
        let call = |verb: &str, result: Value| Entry::Call {
            at: 1.0,
            handler: "h".into(),
            object: Some("ns/kex".into()),
            verb: verb.into(),
            target: "configmaps.v1".into(),
            namespace: Some("ns".into()),
            name: None,
            body: None,
            result: Some(result),
            error: None,
        };
        let cm = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "ns"}, "data": {"a": "b"}})
        };
        let entries = vec![
            header(),
            resource(),
            watch(0.5, "LISTED", kex("1", json!({}))),
            call("create", cm("made")),
            call("get", cm("made")),
            call("get", cm("settings")),
            call("list", json!({"items": [cm("settings"), cm("other")]})),
            call("get", kex("1", json!({}))),
        ];
        let plan = plan(&entries).expect("a plan");
        let names: Vec<&str> = plan
            .seeds
            .iter()
            .map(|s| s["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            ["settings", "other"],
            "not the guest's own, not the watched"
        );
    }

    #[test]
    fn what_others_changed_in_unwatched_objects_is_replayed_after_the_read_before() {
        let call = |at: f64, verb: &str, version: &str, level: &str| Entry::Call {
            at,
            handler: "h".into(),
            object: Some("ns/kex".into()),
            verb: verb.into(),
            target: "configmaps.v1".into(),
            namespace: Some("ns".into()),
            name: Some("settings".into()),
            body: None,
            result: Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "ns", "resourceVersion": version},
                "data": {"level": level, "old": "x"}})),
            error: None,
        };
        let mut changed = call(3.0, "get", "7", "2");
        if let Entry::Call {
            result: Some(r), ..
        } = &mut changed
        {
            r["data"].as_object_mut().map(|d| d.remove("old"));
        }
        let entries = vec![
            header(),
            resource(),
            call(1.0, "get", "5", "1"),
            call(2.0, "get", "5", "1"),
            // The guest's own patch: not somebody else's change.
            call(2.5, "patch", "6", "1"),
            call(2.6, "get", "6", "1"),
            changed,
        ];
        let plan = plan(&entries).expect("a plan");
        assert_eq!(plan.seeds.len(), 1);
        assert_eq!(
            plan.steps,
            vec![Step {
                at: 2.6,
                action: Action::PatchUnwatched {
                    object: (
                        "v1".into(),
                        "ConfigMap".into(),
                        Some("ns".into()),
                        "settings".into()
                    ),
                    main: Some(json!({"data": {"level": "2", "old": null}})),
                    status: None,
                },
            }]
        );
    }

    #[test]
    fn recordings_of_several_guests_are_refused() {
        let entries = vec![Entry::Recording {
            format: crate::recording::FORMAT,
            started: "2026-11-30T10:00:00Z".into(),
            host: "kapsel".into(),
            guests: vec!["a".into(), "b".into()],
        }];
        let error = plan(&entries).expect_err("two guests").to_string();
        assert!(error.contains("made with 2 guests (a, b)"), "{error}");
    }

    #[test]

    fn merge_diffs_remove_and_replace() {
        assert_eq!(merge_diff(&json!({"a": 1}), &json!({"a": 1})), None);
        assert_eq!(
            merge_diff(
                &json!({"a": 1, "b": {"c": 1, "d": 2}}),
                &json!({"b": {"c": 2, "d": 2}, "e": [1]})
            ),
            Some(json!({"a": null, "b": {"c": 2}, "e": [1]}))
        );
    }
}
