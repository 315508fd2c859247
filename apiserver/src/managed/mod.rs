//! Field ownership and server-side apply, after kube-apiserver's field manager
//! (structured-merge-diff): every write records in `metadata.managedFields` which fields
//! its manager set, as an `Apply` entry (server-side apply) or an `Update` entry (any other
//! write). An apply merges the configuration into the live object by the schema's list
//! and map semantics, fails with 409 Conflict when it would change a field another manager
//! owns (unless forced, which takes the field over), and removes the fields its manager
//! applied before and no longer applies, unless another manager owns them too. An update
//! takes over the fields it changes.

mod set;
mod walk;

use crate::registry::ResourceType;
use crate::status::ApiError;
use serde_json::{Map, Value, json};
use set::Set;
use std::collections::HashMap;
use walk::Typer;

/// Who writes: the field manager, the subresource written through (`status`, `scale`),
/// and the user when RBAC is checked (its writes of roles and bindings are checked for
/// privilege escalation).
#[derive(Debug, Clone)]
pub(crate) struct Who {
    pub(crate) manager: String,
    pub(crate) subresource: Option<&'static str>,
    pub(crate) user: Option<std::sync::Arc<crate::auth::User>>,
}

impl Who {
    /// kube's rule: the `fieldManager` parameter, else the User-Agent up to its first `/`,
    /// else `unknown` (structured-merge-diff's name for a manager without one).
    pub(crate) fn from_request(field_manager: Option<&str>, user_agent: &str) -> String {
        let manager = match field_manager.filter(|m| !m.is_empty()) {
            Some(m) => m,
            None => user_agent.split('/').next().unwrap_or(""),
        };
        if manager.is_empty() {
            "unknown".to_string()
        } else {
            manager.to_string()
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    set: Set,
}

impl Entry {
    fn is(&self, who: &Who, operation: &str) -> bool {
        self.manager == who.manager
            && self.operation == operation
            && self.subresource == who.subresource.unwrap_or("")
    }
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    entries_of(obj.pointer("/metadata/managedFields"))
}

/// The entries of a `managedFields` list.
fn entries_of(list: Option<&Value>) -> Vec<Entry> {
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: text(e, "manager"),
            operation: text(e, "operation"),
            api_version: text(e, "apiVersion"),
            time: text(e, "time"),
            subresource: text(e, "subresource"),
            set: Set::from_json(e.get("fieldsV1").unwrap_or(&Value::Null)),
        })
        .collect()
}

/// Stores the entries in kube's order (Apply before Update, then by time and manager),
/// dropping those that own nothing.
fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let list: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            // Built member by member, moving each in (`json!` copies every value it is
            // given, the field set's tree included).
            let mut entry = Map::new();
            entry.insert("manager".into(), Value::String(e.manager));
            entry.insert("operation".into(), Value::String(e.operation));
            entry.insert("apiVersion".into(), Value::String(e.api_version));
            entry.insert("time".into(), Value::String(e.time));
            entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            entry.insert("fieldsV1".into(), e.set.to_json());
            if !e.subresource.is_empty() {
                entry.insert("subresource".into(), Value::String(e.subresource));
            }
            Value::Object(entry)
        })
        .collect();
    let meta = crate::meta::meta_mut(obj);
    if list.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

/// The metadata the server keeps: no manager owns it.
const SYSTEM_METADATA: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// The parts of `old` and `new` where an update can change field ownership: the top-level
/// members that differ, and of `metadata` the members that differ and that a manager can
/// own. A member equal in both has the same fields with the same values in both, so it
/// adds nothing to what the update changed or removed; walking only the rest spares a
/// write the walk of the whole object twice (of its `managedFields` too), which was a
/// tenth of the server's cost of a write (`make bench`). What is left out is what
/// [`Ctx::fields`] drops anyway (`apiVersion`, `kind`, the system metadata); `metadata`
/// itself never counts as a field of its own, so trimming it changes nothing either.
fn differing(old: &Value, new: &Value) -> (Value, Value) {
    fn trimmed(
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        skip: &[&str],
    ) -> (Map<String, Value>, Map<String, Value>) {
        let (mut old_part, mut new_part) = (Map::new(), Map::new());
        let keys = old
            .keys()
            .chain(new.keys().filter(|k| !old.contains_key(*k)));
        for key in keys {
            if skip.contains(&key.as_str()) {
                continue;
            }
            let (before, after) = (old.get(key), new.get(key));
            if before == after {
                continue;
            }
            match (before, after) {
                (Some(Value::Object(b)), Some(Value::Object(a))) if key == "metadata" => {
                    let (b, a) = trimmed(b, a, &SYSTEM_METADATA);
                    old_part.insert(key.clone(), Value::Object(b));
                    new_part.insert(key.clone(), Value::Object(a));
                }
                _ => {
                    if let Some(b) = before {
                        old_part.insert(key.clone(), b.clone());
                    }
                    if let Some(a) = after {
                        new_part.insert(key.clone(), a.clone());
                    }
                }
            }
        }
        (old_part, new_part)
    }
    match (old.as_object(), new.as_object()) {
        (Some(o), Some(n)) => {
            let (o, n) = trimmed(o, n, &["apiVersion", "kind"]);
            (Value::Object(o), Value::Object(n))
        }
        _ => (old.clone(), new.clone()),
    }
}

/// The schema context of one type.
struct Ctx<'a> {
    rt: &'a ResourceType,
    typer: Typer,
    schema: &'a Value,
}

impl<'a> Ctx<'a> {
    fn new(rt: &'a ResourceType) -> Self {
        Ctx {
            rt,
            typer: Typer {
                builtin: !rt.custom,
            },
            schema: &crate::openapi::kind_schema(rt).1,
        }
    }

    /// The object's field set without what no manager owns: type and system metadata, and
    /// the part of the object the subresource written through does not change.
    fn fields<'v>(
        &self,
        obj: &'v Value,
        who: &Who,
    ) -> Result<(Set, HashMap<Vec<String>, &'v Value>), String> {
        let (mut set, values) = self.typer.field_set(obj, Some(self.schema))?;
        set.children.remove("f:apiVersion");
        set.children.remove("f:kind");
        if let Some(meta) = set.children.get_mut("f:metadata") {
            meta.member = false;
            for f in SYSTEM_METADATA {
                meta.children.remove(&format!("f:{f}"));
            }
        }
        match who.subresource {
            Some("status") => set.children.retain(|k, _| k == "f:status"),
            _ if self.rt.has_status => {
                set.children.remove("f:status");
            }
            _ => {}
        }
        set.children.retain(|_, c| !c.is_empty());
        Ok((set, values))
    }
}

/// What an update from `old` to `new` does to field ownership: the fields it sets (adds or
/// changes) and the fields it removes.
fn update_change(ctx: &Ctx<'_>, old: &Value, new: &Value, who: &Who) -> Result<(Set, Set), String> {
    let (old, new) = (ctx.fields(old, who)?, ctx.fields(new, who)?);
    let mut set = changed(&old, &new);
    let mut removed = old.0.difference(&new.0);
    appeared(&new.0, Some(&old.0), &mut Vec::new(), &mut set);
    appeared(&old.0, Some(&new.0), &mut Vec::new(), &mut removed);
    Ok((set, removed))
}

/// Adds to `out` each node of `new` (a map, a struct, a list, below the root) that `old`
/// does not have: structured-merge-diff's comparison counts a node that a write brings as
/// added itself, besides its members (FieldsV1's `.`), and one it takes away as removed.
/// `metadata` itself is never a field of its own (kube strips it).
fn appeared(new: &Set, old: Option<&Set>, path: &mut Vec<String>, out: &mut Set) {
    for (name, child) in &new.children {
        let before = old.and_then(|o| o.children.get(name));
        path.push(name.clone());
        if before.is_none() && path.as_slice() != ["f:metadata"] {
            out.insert(path);
        }
        appeared(child, before, path, out);
        path.pop();
    }
}

/// The paths whose value `new` adds or changes relative to `old`.
fn changed(
    old: &(Set, HashMap<Vec<String>, &Value>),
    new: &(Set, HashMap<Vec<String>, &Value>),
) -> Set {
    let mut out = new.0.difference(&old.0);
    for path in new.0.intersection(&old.0).members() {
        let leaf = new.0.at(&path).is_some_and(|n| n.children.is_empty());
        if leaf && old.1.get(&path) != new.1.get(&path) {
            out.insert(&path);
        }
    }
    out
}

/// Records a write other than apply (create, update, patch) of `new` over `old`: the
/// manager's `Update` entry gains what the write added or changed, every other manager
/// loses it, and fields the write removed leave every entry. A write that changes nothing
/// keeps the entries as they were.
///
/// `given` is the managedFields the request itself carried. As kube-apiserver does, a
/// non-empty list sent to the main resource replaces the recorded entries before the write
/// is recorded (how kubectl moves client-side apply ownership to server-side apply, and
/// how `managedFields: [{}]` resets them); otherwise the stored entries are kept.
pub(crate) fn record_update(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &mut Value,
    who: &Who,
    given: Option<&Value>,
) {
    let ctx = Ctx::new(rt);
    let empty = json!({});
    let before = old.unwrap_or(&empty);
    let mut entries = match given.filter(|g| g.as_array().is_some_and(|a| !a.is_empty())) {
        Some(g) if who.subresource.is_none() => entries_of(Some(g)),
        _ => read_entries(before),
    };
    // The objects were accepted already: where a list that changed cannot be keyed by the
    // schema, the entries stay as they were.
    let (old_part, new_part) = differing(before, new);
    let Ok((changed_set, removed)) = update_change(&ctx, &old_part, &new_part, who) else {
        write_entries(new, entries);
        return;
    };
    if changed_set.is_empty() && removed.is_empty() {
        write_entries(new, entries);
        return;
    }
    let taken = changed_set.union(&removed);
    for e in &mut entries {
        e.set = e.set.difference(&taken);
    }
    let api_version = rt.api_version();
    let now = crate::meta::now();
    match entries.iter_mut().find(|e| e.is(who, "Update")) {
        Some(e) => {
            e.set = e.set.union(&changed_set);
            e.time = now;
            e.api_version = api_version;
        }
        None => entries.push(Entry {
            manager: who.manager.clone(),
            operation: "Update".into(),
            api_version,
            time: now,
            subresource: who.subresource.unwrap_or("").into(),
            set: changed_set,
        }),
    }
    write_entries(new, entries);
}

/// Server-side apply of `config` by `who` onto `live` (None: the object does not exist).
/// Returns the object to store, `managedFields` included.
pub(crate) fn apply(
    rt: &ResourceType,
    live: Option<&Value>,
    config: &Value,
    who: &Who,
    force: bool,
) -> Result<Value, ApiError> {
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let ctx = Ctx::new(rt);
    let typed = |e: String| {
        ApiError::new(
            422,
            "Invalid",
            format!("failed to create typed patch object ({}): {e}", gvk(rt)),
        )
    };
    let empty = json!({});
    let live_obj = live.unwrap_or(&empty);
    let mut entries = read_entries(live_obj);
    let (config_set, _) = ctx.fields(config, who).map_err(typed)?;
    let mut merged = ctx
        .typer
        .merge(live_obj, config, Some(ctx.schema), "")
        .map_err(typed)?;
    let live_fields = ctx.fields(live_obj, who).map_err(typed)?;
    let changed_set = {
        let merged_fields = ctx.fields(&merged, who).map_err(typed)?;
        changed(&live_fields, &merged_fields)
    };
    let mut conflicts = Vec::new();
    for e in entries.iter_mut().filter(|e| !e.is(who, "Apply")) {
        let clash = e.set.intersection(&changed_set);
        if clash.is_empty() {
            continue;
        }
        if force {
            e.set = e.set.difference(&clash);
        } else {
            conflicts.extend(clash.members().into_iter().map(|p| (e.clone(), p)));
        }
    }
    if !conflicts.is_empty() {
        return Err(conflict_error(&conflicts));
    }
    let previous = entries
        .iter()
        .find(|e| e.is(who, "Apply"))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let others = entries
        .iter()
        .filter(|e| !e.is(who, "Apply"))
        .fold(Set::default(), |acc, e| acc.union(&e.set));
    let dropped = previous.difference(&config_set);
    // What others own stays, and so does what this configuration sets (a map applied empty
    // before and with entries now is dropped as a member, not as a field).
    let keep = others.union(&config_set);
    ctx.typer
        .prune(&mut merged, Some(ctx.schema), "", &dropped, Some(&keep));
    let removed = {
        let after = ctx.fields(&merged, who).map_err(typed)?;
        live_fields.0.difference(&after.0)
    };
    for e in entries.iter_mut().filter(|e| !e.is(who, "Apply")) {
        e.set = e.set.difference(&removed);
    }
    let object_changed = !changed_set.is_empty() || !removed.is_empty();
    let now = crate::meta::now();
    match entries.iter_mut().find(|e| e.is(who, "Apply")) {
        Some(e) => {
            if object_changed || e.set != config_set {
                e.time = now;
            }
            e.set = config_set;
            e.api_version = rt.api_version();
        }
        None => entries.push(Entry {
            manager: who.manager.clone(),
            operation: "Apply".into(),
            api_version: rt.api_version(),
            time: now,
            subresource: who.subresource.unwrap_or("").into(),
            set: config_set,
        }),
    }
    write_entries(&mut merged, entries);
    Ok(merged)
}

fn gvk(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("/{}, Kind={}", rt.version, rt.kind)
    } else {
        format!("{}/{}, Kind={}", rt.group, rt.version, rt.kind)
    }
}

/// A manager as kube's conflict messages name it.
fn print_manager(e: &Entry) -> String {
    let mut s = format!("{:?}", e.manager);
    if !e.subresource.is_empty() {
        s.push_str(&format!(" with subresource {:?}", e.subresource));
    }
    // kube names a manager by its identifier, which has no time: never "at <time>".
    if e.operation == "Update" {
        s.push_str(&format!(" using {}", e.api_version));
    }
    s
}

/// 409 Conflict listing each conflicting field and its manager, worded as kube-apiserver.
fn conflict_error(conflicts: &[(Entry, Vec<String>)]) -> ApiError {
    let message = match conflicts {
        [(e, path)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            print_manager(e),
            set::path_string(path)
        ),
        _ => {
            let mut by_manager: std::collections::BTreeMap<String, Vec<String>> =
                std::collections::BTreeMap::new();
            for (e, path) in conflicts {
                by_manager
                    .entry(print_manager(e))
                    .or_default()
                    .push(set::path_string(path));
            }
            let parts: Vec<String> = by_manager
                .into_iter()
                .map(|(m, paths)| {
                    let lines: Vec<String> = paths.iter().map(|p| format!("- {p}")).collect();
                    format!("conflicts with {m}:\n{}", lines.join("\n"))
                })
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                parts.join("\n")
            )
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(e, path)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", print_manager(e)), "field": set::path_string(path)})
        })
        .collect();
    let mut err = ApiError::new(409, "Conflict", message);
    err.details = Some(Box::new(json!({"causes": causes})));
    err
}

#[cfg(test)]
mod tests;
