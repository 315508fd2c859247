//! The optional state file: every object, saved atomically as JSON and loaded at start.

use crate::Error;
use crate::store::{ResKey, Store};
use serde_json::{Value, json};
use std::path::Path;

/// A snapshot of the store, taken under the lock and written outside it.
pub(crate) fn snapshot(store: &Store) -> Value {
    let resources: Vec<Value> = store
        .all()
        .filter(|(_, objs)| !objs.is_empty())
        .map(|((group, plural), objs)| json!({"group": group, "plural": plural, "items": objs.values().collect::<Vec<_>>()}))
        .collect();
    json!({"kind": "KapselState", "version": 1, "resourceVersion": store.rv().to_string(), "resources": resources})
}

/// Writes the snapshot: to a temporary file beside the target, then renamed over it, so a
/// crash mid-write never leaves a torn file.
pub(crate) fn save(path: &Path, snap: &Value) -> Result<(), Error> {
    let err = |source| Error::Save {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let bytes = serde_json::to_vec_pretty(snap).map_err(|e| err(std::io::Error::other(e)))?;
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Loads a state file into a fresh store. A missing file is not an error (Ok(false)); a
/// broken one is, and names the file.
pub(crate) fn load(path: &Path, store: &mut Store) -> Result<bool, Error> {
    let bad = |message: String| Error::State {
        path: path.to_path_buf(),
        message,
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(bad(e.to_string())),
    };
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    if v.get("kind").and_then(Value::as_str) != Some("KapselState") {
        return Err(bad(
            "not a Kapsel state file (kind is not KapselState)".into()
        ));
    }
    let rv = v
        .get("resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| bad("missing or invalid resourceVersion".into()))?;
    let mut objects: Vec<(ResKey, Value)> = Vec::new();
    for r in v
        .get("resources")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("missing resources".into()))?
    {
        let group = r
            .get("group")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("a resource without group".into()))?;
        let plural = r
            .get("plural")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("a resource without plural".into()))?;
        for item in r
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("{plural}: missing items")))?
        {
            if crate::store::meta_str(item, "name").is_empty() {
                return Err(bad(format!("{plural}: an object without metadata.name")));
            }
            objects.push(((group.to_string(), plural.to_string()), item.clone()));
        }
    }
    store.load(rv, objects);
    Ok(true)
}
