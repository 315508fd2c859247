//! Label and field selectors, parsed as kube-apiserver parses them; with the shard
//! selector (`shards`), what a list or watch selects.

use crate::shards::ShardSelector;
use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A `metav1.LabelSelector` object (or a selector string) in the string form `parse`
/// reads (what Scale shows); None for a selector with no requirement.
pub(crate) fn selector_string(sel: &Value) -> Option<String> {
    if let Some(s) = sel.as_str() {
        return Some(s.to_string());
    }
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e.get("operator").and_then(Value::as_str) {
            Some("In") => parts.push(format!("{key} in ({})", values.join(","))),
            Some("NotIn") => parts.push(format!("{key} notin ({})", values.join(","))),
            Some("Exists") => parts.push(key.to_string()),
            Some("DoesNotExist") => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

/// A parsed `labelSelector`: the AND of its requirements.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<Req>);

fn label_of<'a>(labels: Option<&'a Value>, key: &str) -> Option<&'a str> {
    labels.and_then(|l| l.get(key)).and_then(Value::as_str)
}

impl LabelSelector {
    /// Parses kube's selector syntax: `a=b,c!=d,e in (f,g),h notin (i),j,!k,l>1`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top(s)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_req(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => label_of(labels, k) == Some(v.as_str()),
            // kube: `!=` and `notin` also match objects without the label.
            Req::NotEq(k, v) => label_of(labels, k) != Some(v.as_str()),
            Req::In(k, vs) => label_of(labels, k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => !label_of(labels, k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::Exists(k) => label_of(labels, k).is_some(),
            Req::NotExists(k) => label_of(labels, k).is_none(),
            Req::Gt(k, n) => label_of(labels, k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Req::Lt(k, n) => label_of(labels, k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

/// kube's selector syntax again: what parses to the same selector.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match r {
                Req::Eq(k, v) => format!("{k}={v}"),
                Req::NotEq(k, v) => format!("{k}!={v}"),
                Req::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Req::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Req::Exists(k) => k.clone(),
                Req::NotExists(k) => format!("!{k}"),
                Req::Gt(k, n) => format!("{k}>{n}"),
                Req::Lt(k, n) => format!("{k}<{n}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Splits on commas that are not inside a parenthesised value set.
fn split_top(s: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unexpected ')' in {s:?}"))?
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unclosed '(' in {s:?}"));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn parse_req(p: &str) -> Result<Req, String> {
    let bad = || format!("unable to parse requirement: {p:?}");
    if let Some(k) = p.strip_prefix('!') {
        return Ok(Req::NotExists(valid_key(k.trim())?));
    }
    for (op, ctor) in [("==", 0), ("!=", 1), ("=", 0), (">", 2), ("<", 3)] {
        if let Some((k, v)) = p.split_once(op) {
            let k = valid_key(k.trim())?;
            let v = v.trim();
            return match ctor {
                0 => Ok(Req::Eq(k, valid_value(v)?)),
                1 => Ok(Req::NotEq(k, valid_value(v)?)),
                2 => Ok(Req::Gt(k, v.parse().map_err(|_| bad())?)),
                _ => Ok(Req::Lt(k, v.parse().map_err(|_| bad())?)),
            };
        }
    }
    // `key in (..)`, `key notin (..)`, or bare `key`.
    let mut words = p.splitn(2, char::is_whitespace);
    let key = valid_key(words.next().unwrap_or("").trim())?;
    let Some(rest) = words.next().map(str::trim) else {
        return Ok(Req::Exists(key));
    };
    let (notin, set) = if let Some(r) = rest.strip_prefix("notin") {
        (true, r)
    } else if let Some(r) = rest.strip_prefix("in") {
        (false, r)
    } else {
        return Err(bad());
    };
    let set = set.trim();
    let inner = set
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(bad)?;
    let values = inner
        .split(',')
        .map(|v| valid_value(v.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(if notin {
        Req::NotIn(key, values)
    } else {
        Req::In(key, values)
    })
}

fn valid_key(k: &str) -> Result<String, String> {
    if crate::validate::label_key(k).is_empty() {
        Ok(k.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label key {k:?}"
        ))
    }
}

fn valid_value(v: &str) -> Result<String, String> {
    if crate::validate::label_value(v).is_empty() {
        Ok(v.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label value {v:?}"
        ))
    }
}

/// A parsed `fieldSelector`: `path=value`, `path==value`, `path!=value`, comma-ANDed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<FieldRequirement>);

/// One `field=value` or `field!=value` of a field selector.
#[derive(Debug, Clone, PartialEq)]
struct FieldRequirement {
    /// The field label as the client names it.
    label: String,
    negated: bool,
    value: String,
    /// Where the object keeps it, and what it is when absent: kube reads the fields of
    /// typed objects, where an absent boolean is `false` and an absent count `0`.
    field: Field,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Field {
    path: &'static str,
    absent: &'static str,
}

/// Where a supported field label is read from, when it is not the label's own path.
fn field_of(plural: &str, label: &str) -> Option<Field> {
    let field = |path, absent| Some(Field { path, absent });
    match (plural, label) {
        ("events", "source") => field("source.component", ""),
        ("nodes", "spec.unschedulable") => field("spec.unschedulable", "false"),
        ("replicasets", "status.replicas") => field("status.replicas", "0"),
        _ => None,
    }
}

/// Fields kube-apiserver supports beyond `metadata.name`/`metadata.namespace`, by resource.
fn extra_fields(plural: &str) -> &'static [&'static str] {
    match plural {
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
        ],
        "secrets" => &["type"],
        "namespaces" => &["status.phase"],
        "nodes" => &["spec.unschedulable"],
        "replicasets" => &["status.replicas"],
        _ => &[],
    }
}

impl FieldSelector {
    /// Parses and checks the fields against what kube supports for `plural`.
    pub(crate) fn parse(s: &str, plural: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (k, neg, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let k = k.trim();
            let field = ["metadata.name", "metadata.namespace"]
                .into_iter()
                .chain(extra_fields(plural).iter().copied())
                .find(|f| *f == k)
                .map(|path| field_of(plural, k).unwrap_or(Field { path, absent: "" }))
                .ok_or_else(|| format!("field label not supported: {k}"))?;
            out.push(FieldRequirement {
                label: k.to_string(),
                negated: neg,
                value: v.trim().to_string(),
                field,
            });
        }
        Ok(FieldSelector(out))
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let mut cur = Some(obj);
            for seg in r.field.path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let got = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => r.field.absent.to_string(),
                Some(other) => other.to_string(),
            };
            (got == r.value) != r.negated
        })
    }
}

/// The selector syntax again (`==` for equality, so a value starting with `=` survives).
impl std::fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| {
                let op = if r.negated { "!=" } else { "==" };
                format!("{}{op}{}", r.label, r.value)
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The selectors of a list or watch request: labels, fields and, when the client asks
/// for one shard of the collection, the shard.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selectors {
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    pub(crate) shard: Option<ShardSelector>,
}

impl Selectors {
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj)
            && self.fields.matches(obj)
            && self.shard.as_ref().is_none_or(|shard| shard.matches(obj))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns1", "labels": labels}})
    }

    #[test]
    fn every_label_operator() {
        let o = obj(json!({"a": "1", "b": "x", "n": "5"}));
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(ok("a=1") && ok("a==1") && !ok("a=2"));
        assert!(ok("a!=2") && !ok("a!=1") && ok("zz!=1"));
        assert!(ok("b in (x, y)") && !ok("b in (y)") && !ok("zz in (x)"));
        assert!(ok("b notin (y)") && !ok("b notin (x,y)") && ok("zz notin (x)"));
        assert!(ok("a") && !ok("zz") && ok("!zz") && !ok("!a"));
        assert!(ok("a=1,b in (x),!c") && !ok("a=1,b=y"));
        assert!(ok("n>4") && !ok("n<4") && ok(""));
    }

    #[test]
    fn bad_label_selectors() {
        for s in [
            "a in x", "a in (x", "a)", "a=b=c", "!", "a notin", "-a=1", "a=-",
        ] {
            assert!(LabelSelector::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let ok = |s: &str| FieldSelector::parse(s, "configmaps").unwrap().matches(&o);
        assert!(ok("metadata.name=n1") && ok("metadata.name==n1") && !ok("metadata.name!=n1"));
        assert!(ok("metadata.namespace=ns1,metadata.name!=x"));
        assert!(FieldSelector::parse("spec.x=1", "configmaps").is_err());
        assert!(FieldSelector::parse("status.phase=Running", "pods").is_ok());
        assert!(FieldSelector::parse("bogus", "pods").is_err());
    }

    /// kube reads fields from typed objects: an absent boolean is `false`, an absent count
    /// `0`, an Event's `source` is its component (kube-rs's cordon test lists
    /// `spec.unschedulable==false` nodes).
    #[test]
    fn field_selectors_read_typed_fields() {
        let sel = |s: &str, plural: &str| FieldSelector::parse(s, plural).unwrap();
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert!(sel("spec.unschedulable==false", "nodes").matches(&node));
        assert!(!sel("spec.unschedulable=true", "nodes").matches(&node));
        let cordoned = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert!(sel("spec.unschedulable=true", "nodes").matches(&cordoned));
        assert!(sel("status.replicas=0", "replicasets").matches(&json!({"status": {}})));
        let event = json!({"source": {"component": "kubelet", "host": "n"}});
        assert!(sel("source=kubelet", "events").matches(&event));
        assert_eq!(
            sel("source=kubelet", "events").to_string(),
            "source==kubelet"
        );
    }
}
