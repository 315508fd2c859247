//! The `fieldValidation` query parameter of create, update and patch requests:
//! `Strict` rejects objects with unknown or duplicate fields (400 BadRequest,
//! `strict decoding error: unknown field "spec.foo"`), `Warn` accepts them with
//! one `Warning: 299` header per field (the default, as in kube-apiserver),
//! `Ignore` accepts them silently. Unknown fields of custom resources are
//! pruned on every write whatever the directive (see [`crate::schema`]).

use std::collections::{HashMap, HashSet};
use std::fmt;

use axum::response::Response;
use http::{HeaderValue, header};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::registry::ResourceType;
use crate::status::ApiError;

/// The client's `fieldValidation` directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// Reads `fieldValidation` from the query; an invalid value is a 400.
    pub(crate) fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        match q.get("fieldValidation").map(String::as_str) {
            // kube-apiserver (1.25+) warns about unknown fields unless told otherwise.
            Some("Ignore") => Ok(Self::Ignore),
            None | Some("" | "Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Warn\", \"Strict\""
            ))),
        }
    }

    /// Checks `object` (the object to be written, after any patch) against the
    /// schema of `rt`. `before`, for updates and patches, is the current object:
    /// unknown fields it already has are not the request's doing and are not
    /// reported. `body` is the request body, searched for duplicate fields when
    /// it is JSON (`json_body`).
    ///
    /// Returns the problems to send as warnings (empty unless `Warn`), or the
    /// `Strict` error.
    pub(crate) fn check(
        self,
        rt: &ResourceType,
        object: &Value,
        before: Option<&Value>,
        body: Option<&[u8]>,
    ) -> Result<Vec<String>, ApiError> {
        if self == Self::Ignore {
            return Ok(Vec::new());
        }
        let known: HashSet<String> = before
            .map(|b| crate::openapi::fields::unknown_fields(rt, b))
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut problems: Vec<String> = crate::openapi::fields::unknown_fields(rt, object)
            .into_iter()
            .filter(|f| !known.contains(f))
            .map(|f| format!("unknown field {}", quote(&f)))
            .collect();
        if let Some(body) = body {
            problems.extend(
                duplicate_fields(body)
                    .into_iter()
                    .map(|f| format!("duplicate field {}", quote(&f))),
            );
        }
        if self == Self::Strict && !problems.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                problems.join(", "),
                kind = rt.kind,
                version = rt.version,
            )));
        }
        Ok(problems)
    }
}

/// A Go `%q`-style quoted string (what kube's messages show).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Adds one `Warning: 299 - "<text>"` header per warning, as kube-apiserver does.
pub(crate) fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", quote(w))) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// The paths of the keys a JSON document repeats within one object, in
/// document order. Anything that is not valid JSON has none.
pub(crate) fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = Dups {
        path: String::new(),
        out: &mut out,
    };
    if seed.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    out
}

struct Dups<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Dups<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dups<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let seed = Dups {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Dups {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_duplicate_keys_with_their_paths() {
        let body = br#"{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}], "c": 2}, "a": 3}"#;
        assert_eq!(duplicate_fields(body), ["b.c[1].d", "b.c", "a"]);
        assert!(duplicate_fields(br#"{"a": {"a": 1}, "b": [1, 2]}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn parses_the_directive() {
        let q = |v: &str| HashMap::from([("fieldValidation".to_string(), v.to_string())]);
        assert_eq!(
            FieldValidation::from_query(&HashMap::new()),
            Ok(FieldValidation::Warn),
            "kube's default"
        );
        assert_eq!(
            FieldValidation::from_query(&q("Strict")),
            Ok(FieldValidation::Strict)
        );
        assert_eq!(
            FieldValidation::from_query(&q("Warn")),
            Ok(FieldValidation::Warn)
        );
        assert_eq!(
            FieldValidation::from_query(&q("strict")).unwrap_err().code,
            400
        );
    }
}
