//! `meta.k8s.io/v1` Table responses, which `kubectl get` asks for (`Accept: …;as=Table`).
//!
//! Columns follow kube's printers for the common built-ins and the CRD's
//! `additionalPrinterColumns`; other types get kube's default Name and Age.

use crate::objects::Scope;
use crate::store::{CRDS, Store, meta_str};
use serde_json::{Value, json};

/// How a request wants rows' objects: `includeObject=None|Metadata|Object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

/// The columns for one type, fixed when a request starts.
#[derive(Debug, Clone)]
pub(crate) struct Columns {
    defs: Vec<Value>,
    /// How to compute each cell: a built-in rule or a CRD JSONPath.
    cells: Vec<Cell>,
    include: Include,
}

#[derive(Debug, Clone)]
enum Cell {
    Name,
    Age,
    Path(String, String),
    Builtin(&'static str),
}

/// The form a client asks objects in, from its Accept header's first choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// The objects themselves.
    Full,
    /// `as=Table` (kubectl get).
    Table,
    /// `as=PartialObjectMetadata[List]` (metadata-only clients such as kube-rs's
    /// `metadata_watcher`).
    Meta,
}

pub(crate) fn view(accept: &str) -> View {
    let first = accept.split(',').next().unwrap_or("");
    if first.contains("as=Table") {
        View::Table
    } else if first.contains("as=PartialObjectMetadata") {
        View::Meta
    } else {
        View::Full
    }
}

/// An object reduced to its metadata, as `PartialObjectMetadata`.
pub(crate) fn partial(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
}

fn col(name: &str, ty: &str, format: &str, priority: i64, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

impl Include {
    /// `includeObject`: a row carries its object's metadata unless the client asks for
    /// none or for the whole object.
    fn from_query(include: Option<&str>) -> Self {
        match include {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// A column of kube's printers for a common built-in: its name, type, priority, and the
/// rule that computes its cells.
type BuiltinColumn = (&'static str, &'static str, i64, &'static str);

/// The columns kube's printers show for a built-in type after Name (none for other types).
fn builtin_columns(group: &str, plural: &str) -> &'static [BuiltinColumn] {
    match (group, plural) {
        ("", "pods") => &[
            ("Ready", "string", 0, "ready"),
            ("Status", "string", 0, "podstatus"),
            ("Restarts", "string", 0, "restarts"),
        ],
        ("", "namespaces") => &[("Status", "string", 0, "phase")],
        ("", "events") => &[
            ("Last Seen", "string", 0, "lastseen"),
            ("Type", "string", 0, "evtype"),
            ("Reason", "string", 0, "reason"),
            ("Object", "string", 0, "involved"),
            ("Message", "string", 0, "message"),
        ],
        ("", "configmaps") => &[("Data", "integer", 0, "datacount")],
        ("", "secrets") => &[
            ("Type", "string", 0, "type"),
            ("Data", "integer", 0, "datacount"),
        ],
        ("apps", "deployments") => &[
            ("Ready", "string", 0, "deployready"),
            ("Up-to-date", "integer", 0, "updated"),
            ("Available", "integer", 0, "available"),
        ],
        CRDS => &[("Created At", "date", 0, "created")],
        ("", "componentstatuses") => &[
            ("Status", "string", 0, "healthy"),
            ("Message", "string", 0, "healthymessage"),
            ("Error", "string", 0, "healthyerror"),
        ],
        _ => &[],
    }
}

/// A CRD's `additionalPrinterColumns` entry: its definition, and its cells computed from
/// its JSONPath.
fn printer_column(c: &Value) -> (Value, Cell) {
    let text = |k: &str| c.get(k).and_then(Value::as_str);
    let name = text("name").unwrap_or("");
    let ty = text("type").unwrap_or("string");
    let priority = c.get("priority").and_then(Value::as_i64).unwrap_or(0);
    let description = text("description").unwrap_or("");
    let format = text("format").unwrap_or("");
    let path = text("jsonPath").unwrap_or("").to_string();
    (
        col(name, ty, format, priority, description),
        Cell::Path(path, ty.to_string()),
    )
}

impl Columns {
    pub(crate) fn new(store: &Store, scope: &Scope, include: Option<&str>) -> Self {
        let rt = &scope.rt;
        let name = col(
            "Name",
            "string",
            "name",
            0,
            "Name must be unique within a namespace.",
        );
        let mut columns = Columns {
            defs: vec![name],
            cells: vec![Cell::Name],
            include: Include::from_query(include),
        };
        for (n, t, p, rule) in builtin_columns(&rt.group, &rt.plural) {
            columns.add(col(n, t, "", *p, ""), Cell::Builtin(rule));
        }
        let custom = rt.custom.then(|| printer_columns(store, scope)).flatten();
        match custom {
            Some(cols) => {
                for c in &cols {
                    let (def, cell) = printer_column(c);
                    columns.add(def, cell);
                }
            }
            None if !matches!(
                (rt.group.as_str(), rt.plural.as_str()),
                CRDS | ("", "events" | "componentstatuses")
            ) =>
            {
                let age = col(
                    "Age",
                    "string",
                    "",
                    0,
                    "CreationTimestamp is a timestamp representing the server time when this object was created.",
                );
                columns.add(age, Cell::Age);
            }
            None => {}
        }
        columns
    }

    fn add(&mut self, def: Value, cell: Cell) {
        self.defs.push(def);
        self.cells.push(cell);
    }

    /// One object's row.
    fn row(&self, scope: &Scope, obj: &Value) -> Value {
        let cells: Vec<Value> = self.cells.iter().map(|c| cell(c, obj)).collect();
        let mut row = json!({"cells": cells});
        match self.include {
            Include::None => {}
            Include::Object => row["object"] = crate::objects::present(&scope.rt, obj),
            Include::Metadata => row["object"] = partial(obj),
        }
        row
    }

    /// A Table of these objects.
    pub(crate) fn table(&self, scope: &Scope, objs: &[Value], metadata: Value) -> Value {
        let rows: Vec<Value> = objs.iter().map(|o| self.row(scope, o)).collect();
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": self.defs, "rows": rows})
    }
}

fn printer_columns(store: &Store, scope: &Scope) -> Option<Vec<Value>> {
    let res = (CRDS.0.to_string(), CRDS.1.to_string());
    let crd = store.get(
        &res,
        &(
            String::new(),
            format!("{}.{}", scope.rt.plural, scope.rt.group),
        ),
    )?;
    let version = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(scope.rt.version.as_str()))?;
    version.get("additionalPrinterColumns")?.as_array().cloned()
}

/// A simple JSONPath (`.a.b[0].c`) as CRD printer columns use.
fn path<'a>(obj: &'a Value, p: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in p
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        let (key, idx) = match seg.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        if !key.is_empty() {
            cur = cur.get(key)?;
        }
        if let Some(i) = idx {
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

/// kube's HumanDuration, as `kubectl get` shows ages.
pub(crate) fn human_age(since: &str) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(since) else {
        return "<unknown>".into();
    };
    let s = (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && s % 60 != 0 => format!("{m}m{}s", s % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if d < 365 * 2 => format!("{d}d"),
        _ => format!("{}y", d / 365),
    }
}

fn count(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map_or(0, |m| m.len())
}

fn num(obj: &Value, p: &str) -> i64 {
    obj.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn cell(c: &Cell, obj: &Value) -> Value {
    match c {
        Cell::Name => json!(meta_str(obj, "name")),
        Cell::Age => json!(human_age(meta_str(obj, "creationTimestamp"))),
        Cell::Path(p, ty) => match path(obj, p) {
            None | Some(Value::Null) => Value::Null,
            Some(Value::String(s)) if ty == "date" => json!(human_age(s)),
            Some(v) => v.clone(),
        },
        Cell::Builtin(rule) => match *rule {
            "ready" => {
                let total = obj
                    .pointer("/spec/containers")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let ready = obj
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .map_or(0, |cs| {
                        cs.iter()
                            .filter(|c| c.get("ready") == Some(&json!(true)))
                            .count()
                    });
                json!(format!("{ready}/{total}"))
            }
            "podstatus" if !meta_str(obj, "deletionTimestamp").is_empty() => json!("Terminating"),
            "podstatus" => json!(
                obj.pointer("/status/reason")
                    .or(obj.pointer("/status/phase"))
                    .and_then(Value::as_str)
                    .unwrap_or("Unknown")
            ),
            "restarts" => {
                let n: i64 = obj
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .map_or(0, |cs| {
                        cs.iter()
                            .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                            .sum()
                    });
                json!(n.to_string())
            }
            "healthy" | "healthymessage" | "healthyerror" => healthy(rule, obj),
            "phase" => json!(
                obj.pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            "datacount" => json!(
                count(obj.get("data"))
                    + count(obj.get("binaryData"))
                    + count(obj.get("stringData"))
            ),
            "type" => json!(obj.get("type").and_then(Value::as_str).unwrap_or("Opaque")),
            "deployready" => json!(format!(
                "{}/{}",
                num(obj, "/status/readyReplicas"),
                obj.pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
            )),
            "updated" => json!(num(obj, "/status/updatedReplicas")),
            "available" => json!(num(obj, "/status/availableReplicas")),
            "created" => json!(meta_str(obj, "creationTimestamp")),
            "lastseen" => {
                let t = ["lastTimestamp", "eventTime", "firstTimestamp"]
                    .iter()
                    .find_map(|k| {
                        obj.get(*k)
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                    })
                    .unwrap_or(meta_str(obj, "creationTimestamp"));
                json!(human_age(t))
            }
            "evtype" => json!(obj.get("type").and_then(Value::as_str).unwrap_or("")),
            "reason" => json!(obj.get("reason").and_then(Value::as_str).unwrap_or("")),
            "message" => json!(obj.get("message").and_then(Value::as_str).unwrap_or("")),
            "involved" => {
                let kind = obj
                    .pointer("/involvedObject/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = obj
                    .pointer("/involvedObject/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                json!(format!("{}/{name}", kind.to_lowercase()))
            }
            _ => Value::Null,
        },
    }
}

/// A ComponentStatus's cells as kube's printer shows them: its `Healthy` condition's
/// status (`Healthy`, `Unhealthy`, or `Unknown` without one), message and error.
fn healthy(rule: &str, obj: &Value) -> Value {
    let condition = obj
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Healthy"));
    let text = |k: &str| {
        condition
            .and_then(|c| c.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    json!(match rule {
        "healthymessage" => text("message"),
        "healthyerror" => text("error"),
        _ => match condition.map(|_| text("status")).as_deref() {
            None => "Unknown".to_string(),
            Some("True") => "Healthy".to_string(),
            Some(_) => "Unhealthy".to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_ages() {
        let o = json!({"spec": {"a": [{"b": 1}]}});
        assert_eq!(path(&o, ".spec.a[0].b"), Some(&json!(1)));
        assert_eq!(path(&o, ".spec.x"), None);
        let t = (chrono::Utc::now() - chrono::Duration::seconds(3 * 60 + 5)).to_rfc3339();
        assert_eq!(human_age(&t), "3m5s");
        assert_eq!(human_age("garbage"), "<unknown>");
    }
}
