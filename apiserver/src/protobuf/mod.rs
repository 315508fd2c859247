//! Decoding of Kubernetes protobuf request bodies for a few built-in kinds.
//!
//! kubectl's typed commands (`kubectl create namespace|configmap|secret|serviceaccount`)
//! send `application/vnd.kubernetes.protobuf` bodies and do not fall back to JSON on 415.
//! Decoding needs each message's field numbers; this table holds those of the kinds above
//! (from k8s.io/api generated.proto). Any other kind, or any field not in the table, is
//! refused with 415 rather than guessed, so nothing is silently lost.

use crate::status::ApiError;
use serde_json::{Map, Value, json};

/// How a field is encoded and shown in JSON.
#[derive(Debug, Clone, Copy)]
enum F {
    Str,
    /// A `*int64`/`*bool`-style optional scalar: present means set, even when zero.
    OptInt,
    OptBool,
    /// A plain (non-pointer) int64: zero means unset (`omitempty`).
    Int,
    Msg(&'static str),
    RepMsg(&'static str),
    RepStr,
    MapStr,
    /// map<string, bytes>: JSON shows the bytes base64-encoded.
    MapBytes,
    Time,
}

fn fields(msg: &str) -> Option<&'static [(u64, &'static str, F)]> {
    use F::*;
    Some(match msg {
        "ObjectMeta" => &[
            (1, "name", Str),
            (2, "generateName", Str),
            (3, "namespace", Str),
            (4, "selfLink", Str),
            (5, "uid", Str),
            (6, "resourceVersion", Str),
            (7, "generation", Int),
            (8, "creationTimestamp", Time),
            (9, "deletionTimestamp", Time),
            (10, "deletionGracePeriodSeconds", OptInt),
            (11, "labels", MapStr),
            (12, "annotations", MapStr),
            (13, "ownerReferences", RepMsg("OwnerReference")),
            (14, "finalizers", RepStr),
            // managedFields (17) are dropped by the server anyway.
            (17, "managedFields", RepMsg("Ignored")),
        ],
        "OwnerReference" => &[
            (1, "kind", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "controller", OptBool),
            (7, "blockOwnerDeletion", OptBool),
        ],
        "ConfigMap" => &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "data", MapStr),
            (3, "binaryData", MapBytes),
            (4, "immutable", OptBool),
        ],
        "Secret" => &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "data", MapBytes),
            (3, "type", Str),
            (4, "stringData", MapStr),
            (5, "immutable", OptBool),
        ],
        "Namespace" => &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "spec", Msg("NamespaceSpec")),
            (3, "status", Msg("NamespaceStatus")),
        ],
        "NamespaceSpec" => &[(1, "finalizers", RepStr)],
        "NamespaceStatus" => &[(1, "phase", Str)],
        "ServiceAccount" => &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "secrets", RepMsg("ObjectReference")),
            (3, "imagePullSecrets", RepMsg("LocalObjectReference")),
            (4, "automountServiceAccountToken", OptBool),
        ],
        "ObjectReference" => &[
            (1, "kind", Str),
            (2, "namespace", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "resourceVersion", Str),
            (7, "fieldPath", Str),
        ],
        "LocalObjectReference" => &[(1, "name", Str)],
        "TypeMeta" => &[(1, "apiVersion", Str), (2, "kind", Str)],
        _ => return None,
    })
}

/// A minimal protobuf reader.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// One field: its number and payload.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn next(&mut self) -> Option<Result<(u64, Wire<'a>), ()>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let Some(tag) = self.varint() else {
            return Some(Err(()));
        };
        let wire = match tag & 7 {
            0 => self.varint().map(Wire::Varint),
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                self.pos = self
                    .pos
                    .checked_add(n)
                    .filter(|p| *p <= self.buf.len())
                    .unwrap_or(usize::MAX);
                (self.pos != usize::MAX).then_some(Wire::Fixed)
            }
            2 => self.varint().and_then(|n| {
                let end = self.pos.checked_add(usize::try_from(n).ok()?)?;
                let b = self.buf.get(self.pos..end)?;
                self.pos = end;
                Some(Wire::Bytes(b))
            }),
            _ => None,
        };
        Some(wire.map(|w| (tag >> 3, w)).ok_or(()))
    }
}

pub(crate) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

type Fail = String;

fn text(b: &[u8]) -> Result<String, Fail> {
    String::from_utf8(b.to_vec()).map_err(|_| "a string field is not UTF-8".to_string())
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), Fail> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), json!(""));
    while let Some(f) = r.next() {
        match f.map_err(|_| "malformed map entry".to_string())? {
            (1, Wire::Bytes(x)) => k = text(x)?,
            (2, Wire::Bytes(x)) if bytes_value => v = json!(base64(x)),
            (2, Wire::Bytes(x)) => v = json!(text(x)?),
            _ => return Err("unexpected map entry field".into()),
        }
    }
    Ok((k, v))
}

fn time(b: &[u8]) -> Result<Value, Fail> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut secs = 0i64;
    while let Some(f) = r.next() {
        if let (1, Wire::Varint(v)) = f.map_err(|_| "malformed time".to_string())? {
            secs = v as i64;
        }
    }
    if secs == 0 {
        return Ok(Value::Null);
    }
    Ok(chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .unwrap_or(Value::Null))
}

fn message(msg: &str, b: &[u8], depth: usize) -> Result<Value, Fail> {
    if msg == "Ignored" {
        return Ok(Value::Null);
    }
    let table = fields(msg).ok_or_else(|| format!("{msg} is not supported"))?;
    if depth > 16 {
        return Err("nesting too deep".into());
    }
    let mut out = Map::new();
    let mut r = Reader { buf: b, pos: 0 };
    while let Some(f) = r.next() {
        let (num, wire) = f.map_err(|_| format!("malformed {msg}"))?;
        let &(_, name, kind) = table
            .iter()
            .find(|(n, _, _)| *n == num)
            .ok_or_else(|| format!("field {num} of {msg} is not supported"))?;
        let key = name.to_string();
        match (kind, wire) {
            (F::Str, Wire::Bytes(x)) => {
                let s = text(x)?;
                if !s.is_empty() {
                    out.insert(key, json!(s));
                }
            }
            (F::Int, Wire::Varint(v)) if v != 0 => {
                out.insert(key, json!(v as i64));
            }
            (F::Int, Wire::Varint(_)) => {}
            (F::OptInt, Wire::Varint(v)) => {
                out.insert(key, json!(v as i64));
            }
            (F::OptBool, Wire::Varint(v)) => {
                out.insert(key, json!(v != 0));
            }
            (F::Msg(m), Wire::Bytes(x)) => {
                let v = message(m, x, depth + 1)?;
                if v.as_object().is_some_and(|o| !o.is_empty()) {
                    out.insert(key, v);
                }
            }
            (F::RepMsg(m), Wire::Bytes(x)) => {
                let v = message(m, x, depth + 1)?;
                if !v.is_null()
                    && let Some(a) = out.entry(key).or_insert_with(|| json!([])).as_array_mut()
                {
                    a.push(v);
                }
            }
            (F::RepStr, Wire::Bytes(x)) => {
                if let Some(a) = out.entry(key).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(json!(text(x)?));
                }
            }
            (F::MapStr | F::MapBytes, Wire::Bytes(x)) => {
                let (k, v) = map_entry(x, matches!(kind, F::MapBytes))?;
                if let Some(m) = out.entry(key).or_insert_with(|| json!({})).as_object_mut() {
                    m.insert(k, v);
                }
            }
            (F::Time, Wire::Bytes(x)) => {
                let t = time(x)?;
                if !t.is_null() {
                    out.insert(key, t);
                }
            }
            _ => return Err(format!("field {name} of {msg} has an unexpected encoding")),
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a `k8s\0`-prefixed protobuf body of a supported kind into its JSON form.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let refuse = |why: String| {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the protobuf body could not be decoded ({why}); send application/json instead"
            ),
        )
    };
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| refuse("missing the k8s magic prefix".into()))?;
    let mut r = Reader { buf: rest, pos: 0 };
    let (mut type_meta, mut raw) = (Value::Null, None);
    while let Some(f) = r.next() {
        match f.map_err(|_| refuse("malformed envelope".into()))? {
            (1, Wire::Bytes(x)) => type_meta = message("TypeMeta", x, 0).map_err(refuse)?,
            (2, Wire::Bytes(x)) => raw = Some(x),
            _ => {}
        }
    }
    let kind = type_meta
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let raw = raw.ok_or_else(|| refuse("no object in the envelope".into()))?;
    let mut obj = message(&kind, raw, 0).map_err(refuse)?;
    if let Some(m) = obj.as_object_mut() {
        let mut ordered = Map::new();
        ordered.insert(
            "apiVersion".into(),
            type_meta.get("apiVersion").cloned().unwrap_or(Value::Null),
        );
        ordered.insert("kind".into(), json!(kind));
        ordered.extend(std::mem::take(m));
        *m = ordered;
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let meta = [
            field(1, b"cm1"),
            field(4, b""),
            field(11, &[field(1, b"a"), field(2, b"b")].concat()),
        ]
        .concat();
        let cm = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
            field(3, &[field(1, b"bin"), field(2, b"hi")].concat()),
        ]
        .concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".as_slice(), &field(1, &tm), &field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"a": "b"}}, "data": {"k": "v"}, "binaryData": {"bin": "aGk="}})
        );
        assert_eq!(decode(b"k8s\0\xff").unwrap_err().code, 415);
        let pod = [
            b"k8s\0".as_slice(),
            &field(1, &[field(1, b"v1"), field(2, b"Pod")].concat()),
            &field(2, b""),
        ]
        .concat();
        assert_eq!(decode(&pod).unwrap_err().code, 415);
        assert_eq!(base64(b"abcd"), "YWJjZA==");
    }
}
