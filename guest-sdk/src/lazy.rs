//! The JSON of a call, parsed when a handler first reads it.
//!
//! The host hands the object, its old and new essences and the diff over as text. Parsing
//! all of it was most of a call's cost (a create handler that reads the object's name
//! parsed a 4 KB Pod whole, and its essence twice more, in `new` and in the diff). Here
//! the object's `metadata` is parsed when the call starts, the rest of the object only
//! checked, and each other part is parsed the first time an accessor reads it.

use std::fmt;
use std::sync::OnceLock;

use serde::Deserializer as _;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::DiffItem;

/// The object a call is about.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    /// The host's text; empty for a body built from a value (tests).
    text: String,
    /// `metadata` (`Null` when absent), read from the text when the call starts.
    metadata: Value,
    whole: OnceLock<Value>,
    spec: OnceLock<Value>,
    status: OnceLock<Value>,
}

impl Body {
    /// A body from the host's text: its `metadata` parsed, the rest of it checked to be
    /// JSON (so that a broken body fails the call before the handler runs) but not built.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(
            dead_code,
            reason = "the host's text reaches the SDK in the wasm build only"
        )
    )]
    pub(crate) fn from_text(text: String) -> Result<Self, String> {
        let metadata = member(&text, "metadata")
            .map_err(|e| e.to_string())?
            .ok_or("not a JSON object")?;
        Ok(Self {
            text,
            metadata,
            whole: OnceLock::new(),
            spec: OnceLock::new(),
            status: OnceLock::new(),
        })
    }

    /// A body already parsed.
    #[cfg_attr(
        target_arch = "wasm32",
        allow(
            dead_code,
            reason = "built by the testing module, not in the wasm build"
        )
    )]
    pub(crate) fn from_value(value: Value) -> Self {
        Self {
            text: String::new(),
            metadata: Value::Null,
            whole: OnceLock::from(value),
            spec: OnceLock::new(),
            status: OnceLock::new(),
        }
    }

    /// The whole object.
    pub(crate) fn whole(&self) -> &Value {
        // The text was read once already: it is JSON.
        self.whole
            .get_or_init(|| serde_json::from_str(&self.text).unwrap_or_default())
    }

    /// One of `metadata`, `spec` and `status`, `Null` when absent; the text's member
    /// alone unless the whole object was parsed already.
    pub(crate) fn section(&self, key: &str) -> &Value {
        if let Some(whole) = self.whole.get() {
            return whole.get(key).unwrap_or(&Value::Null);
        }
        match key {
            "metadata" => &self.metadata,
            "spec" => self.member(&self.spec, key),
            "status" => self.member(&self.status, key),
            _ => self.whole().get(key).unwrap_or(&Value::Null),
        }
    }

    fn member<'a>(&'a self, cell: &'a OnceLock<Value>, key: &str) -> &'a Value {
        // Read once already (for the metadata): it is JSON.
        cell.get_or_init(|| member(&self.text, key).ok().flatten().unwrap_or_default())
    }
}

/// The value of `key` in the JSON object `text` (`Null` when absent; the last one when
/// repeated, as serde_json's `Value` keeps), the other members skipped without being
/// built; `None` when `text` is JSON but no object.
fn member(text: &str, key: &str) -> Result<Option<Value>, serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_str(text);
    let value = reader.deserialize_any(Member(key))?;
    reader.end()?;
    Ok(value)
}

struct Member<'k>(&'k str);

/// Anything but an object reads as `None` (rather than as serde's errors, which
/// describe the value found: code a guest would carry for what the host never sends).
macro_rules! not_an_object {
    ($($visit:ident($($value:ty)?),)*) => {$(
        fn $visit<E>(self $(, _: $value)?) -> Result<Option<Value>, E> {
            Ok(None)
        }
    )*};
}

impl<'de> Visitor<'de> for Member<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let mut found = Value::Null;
        while let Some(wanted) = map.next_key_seed(KeyIs(self.0))? {
            if wanted {
                found = map.next_value()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Some(found))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    not_an_object! {
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str),
        visit_unit(),
    }
}

/// Reads a key as whether it is the one wanted, without keeping it.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, keys: D) -> Result<bool, D::Error> {
        keys.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// `old` or `new`: JSON from the host, parsed when first read; `null` is absent.
#[derive(Debug, Clone)]
pub(crate) struct Lazy {
    what: &'static str,
    text: String,
    value: OnceLock<Value>,
}

impl Lazy {
    /// The host's `text`, parsed when first asked; `what` names it in an error.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(
            dead_code,
            reason = "the host's text reaches the SDK in the wasm build only"
        )
    )]
    pub(crate) fn from_text(what: &'static str, text: String) -> Self {
        Self {
            what,
            text,
            value: OnceLock::new(),
        }
    }

    /// A value already parsed.
    pub(crate) fn from_value(value: Value) -> Self {
        Self {
            what: "",
            text: String::new(),
            value: OnceLock::from(value),
        }
    }

    /// The value, parsed now if not yet.
    ///
    /// # Panics
    /// When the host sent text that is not JSON (a bug of the host's: it writes these
    /// with serde_json). The guest traps, and the host reports the call failed with
    /// this message, rather than the handler deciding on a wrong value.
    pub(crate) fn get(&self) -> &Value {
        self.value.get_or_init(|| {
            serde_json::from_str(&self.text)
                .unwrap_or_else(|e| panic!("the host sent an invalid {}: {e}", self.what))
        })
    }

    /// The value; `None` for absent (`null`, Kopf's `None`).
    pub(crate) fn optional(&self) -> Option<&Value> {
        Some(self.get()).filter(|v| !v.is_null())
    }
}

/// The diff from the host (`[[op, [key...], old, new], ...]`), read when first asked.
#[derive(Debug, Clone)]
pub(crate) struct Diff {
    json: Lazy,
    items: OnceLock<Vec<DiffItem>>,
}

impl Diff {
    /// The host's `text`, read when first asked.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(
            dead_code,
            reason = "the host's text reaches the SDK in the wasm build only"
        )
    )]
    pub(crate) fn from_text(text: String) -> Self {
        Self {
            json: Lazy::from_text("diff", text),
            items: OnceLock::new(),
        }
    }

    /// Items already read.
    pub(crate) fn from_items(items: Vec<DiffItem>) -> Self {
        Self {
            json: Lazy::from_value(Value::Null),
            items: OnceLock::from(items),
        }
    }

    /// The items, read now if not yet.
    ///
    /// # Panics
    /// As [`Lazy::get`], also when the JSON is not of the diff's form.
    pub(crate) fn items(&self) -> &[DiffItem] {
        self.items.get_or_init(|| {
            crate::diff::parse(self.json.get())
                .unwrap_or_else(|e| panic!("the host sent an invalid diff: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_body_is_read_by_section_and_whole_alike() {
        let text = json!({"apiVersion": "v1", "metadata": {"name": "a"}, "spec": {"size": [1, 2]},
                          "status": {"phase": "x"}, "data": {"k": "v"}})
        .to_string();
        let body = Body::from_text(text).unwrap();
        assert_eq!(body.section("metadata"), &json!({"name": "a"}));
        assert_eq!(body.section("spec"), &json!({"size": [1, 2]}));
        assert_eq!(body.section("status"), &json!({"phase": "x"}));
        assert_eq!(body.section("data"), &json!({"k": "v"}));
        assert_eq!(body.section("absent"), &Value::Null);
        assert_eq!(body.whole()["apiVersion"], json!("v1"));

        let built = Body::from_value(json!({"spec": {"size": 3}}));
        assert_eq!(built.section("spec"), &json!({"size": 3}));
        assert_eq!(built.section("metadata"), &Value::Null);
    }

    #[test]
    fn a_member_is_found_whatever_its_key_spelling_and_the_last_one_wins() {
        let spec = |text| member(text, "spec").unwrap();
        assert_eq!(
            spec(r#"{"spe\u0063": 1, "x": [{"spec": 2}]}"#),
            Some(json!(1))
        );
        assert_eq!(spec(r#"{"spec": 1, "spec": 2}"#), Some(json!(2)));
        assert_eq!(spec("{}"), Some(Value::Null));
        assert_eq!(spec(r#"[{"spec": 1}]"#), None);
    }

    #[test]
    fn a_broken_body_is_refused_as_a_whole_even_where_no_section_is_read() {
        for text in [
            r#"{"metadata": {}, "spec": {"#,
            r#"{"metadata": {}} x"#,
            "[1]",
            "3",
        ] {
            assert!(Body::from_text(text.to_owned()).is_err(), "{text}");
        }
    }

    #[test]
    fn lazy_parts_are_read_when_asked_and_a_broken_one_says_what_it_is() {
        let new = Lazy::from_text("new", r#"{"a": 1}"#.to_owned());
        assert_eq!(new.optional(), Some(&json!({"a": 1})));
        assert_eq!(Lazy::from_text("old", "null".to_owned()).optional(), None);
        let diff = Diff::from_text(r#"[["add", ["spec"], null, 1]]"#.to_owned());
        assert_eq!(diff.items()[0].new, Some(json!(1)));

        let broken = |run: &dyn Fn()| {
            let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_err();
            panic.downcast_ref::<String>().cloned().unwrap()
        };
        let message = broken(&|| {
            Lazy::from_text("new", "[".to_owned()).get();
        });
        assert!(
            message.starts_with("the host sent an invalid new: "),
            "{message}"
        );
        let message = broken(&|| {
            Diff::from_text("[1]".to_owned()).items();
        });
        assert!(
            message.starts_with("the host sent an invalid diff: "),
            "{message}"
        );
    }
}
