//! The JSON of a call, parsed when a handler first reads it.
//!
//! The host hands the object, its old and new essences and the diff over as text. Parsing
//! all of it was most of a call's cost (a create handler that reads the object's name
//! parsed a 4 KB Pod whole, and its essence twice more, in `new` and in the diff). Here
//! the object's text is only scanned for where its members are when the call starts
//! ([`crate::members`]), and each part is parsed the first time an accessor reads it.

use std::ops::Range;
use std::sync::OnceLock;

use serde_json::Value;

use crate::DiffItem;
use crate::members::{NotAnObject, each_member};

/// The members of the object found when the call starts, each parsed when first read.
const SECTIONS: [&str; 3] = ["metadata", "spec", "status"];

/// Where `metadata` is in [`SECTIONS`].
const METADATA: usize = 0;

/// The members of `metadata` read as text where they are (`name()`, `namespace()`,
/// `uid()`: most handlers read one), without parsing `metadata` (a Pod's is ~2 KB with
/// its managed fields, labels and owners: parsing it was a fifth of a call).
const META_STRINGS: [&str; 3] = ["name", "namespace", "uid"];

/// Where one of [`META_STRINGS`] is.
#[derive(Debug, Clone)]
enum MetaString {
    Absent,
    /// A string without escapes: the span of its characters in the object's text.
    Plain(Range<usize>),
    /// Anything else (an escape, another type): read from `metadata` parsed.
    Parse,
}

/// The object a call is about.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    /// The host's text; empty for a body built from a value (tests).
    text: String,
    /// Where each of [`SECTIONS`] is in the text (the last one when repeated, as
    /// serde_json's `Value` keeps), and its value once read.
    sections: [(Option<Range<usize>>, OnceLock<Value>); 3],
    whole: OnceLock<Value>,
    /// Where each of [`META_STRINGS`] is, found when one is first read; `None` for a
    /// `metadata` that is no object (read parsed, as any other).
    meta_strings: OnceLock<Option<[MetaString; 3]>>,
}

impl Body {
    /// A body from the host's text, refused if it is no JSON object; nothing of it parsed.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(
            dead_code,
            reason = "the host's text reaches the SDK in the wasm build only"
        )
    )]
    pub(crate) fn from_text(text: String) -> Result<Self, NotAnObject> {
        let mut spans: [Option<Range<usize>>; 3] = Default::default();
        each_member(&text, |key, value| {
            if let Some(at) = SECTIONS.iter().position(|section| *section == key) {
                spans[at] = Some(value);
            }
        })?;
        Ok(Self {
            text,
            sections: spans.map(|span| (span, OnceLock::new())),
            whole: OnceLock::new(),
            meta_strings: OnceLock::new(),
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
            sections: Default::default(),
            whole: OnceLock::from(value),
            meta_strings: OnceLock::new(),
        }
    }

    /// The whole object.
    ///
    /// # Panics
    /// As [`Lazy::get`].
    pub(crate) fn whole(&self) -> &Value {
        self.whole.get_or_init(|| parse("object", &self.text))
    }

    /// A member of the object, `Null` when absent; for [`SECTIONS`], their text alone
    /// unless the whole object was parsed already.
    ///
    /// # Panics
    /// As [`Lazy::get`].
    pub(crate) fn section(&self, key: &str) -> &Value {
        if let Some(whole) = self.whole.get() {
            return whole.get(key).unwrap_or(&Value::Null);
        }
        match SECTIONS.iter().position(|section| *section == key) {
            Some(at) => {
                let (span, value) = &self.sections[at];
                value.get_or_init(|| {
                    span.as_ref().map_or(Value::Null, |span| {
                        parse("object", &self.text[span.clone()])
                    })
                })
            }
            None => self.whole().get(key).unwrap_or(&Value::Null),
        }
    }

    /// A string member of `metadata` (`None` when absent or of another type): for
    /// [`META_STRINGS`] without escapes, the text as the host wrote it, unless
    /// `metadata` was parsed already.
    ///
    /// # Panics
    /// As [`Lazy::get`], when `metadata` has to be parsed.
    pub(crate) fn meta_str(&self, key: &str) -> Option<&str> {
        let parsed = self.whole.get().is_some() || self.sections[METADATA].1.get().is_some();
        let at = META_STRINGS.iter().position(|k| *k == key);
        if let (Some(at), false) = (at, parsed)
            && let Some(strings) = self.meta_strings.get_or_init(|| self.find_meta_strings())
        {
            match &strings[at] {
                MetaString::Absent => return None,
                MetaString::Plain(span) => return Some(&self.text[span.clone()]),
                MetaString::Parse => {}
            }
        }
        self.section("metadata").get(key).and_then(Value::as_str)
    }

    fn find_meta_strings(&self) -> Option<[MetaString; 3]> {
        let mut strings = [const { MetaString::Absent }; 3];
        let Some(span) = &self.sections[METADATA].0 else {
            return Some(strings);
        };
        let metadata = &self.text[span.clone()];
        each_member(metadata, |key, value| {
            if let Some(at) = META_STRINGS.iter().position(|k| *k == key) {
                // The last one, as serde_json's `Value` keeps.
                strings[at] =
                    plain_string(&metadata[value.clone()]).map_or(MetaString::Parse, |inner| {
                        let start = span.start + value.start + 1;
                        MetaString::Plain(start..start + inner.len())
                    });
            }
        })
        .ok()?;
        Some(strings)
    }
}

/// What is between the quotes of `value` when it is a JSON string that needs no
/// decoding: no escape, no control character (which JSON forbids unescaped).
fn plain_string(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.bytes().any(|b| b == b'\\' || b < 0x20)).then_some(inner)
}

/// `text` parsed; the guest traps if it is not JSON, saying which part of the call
/// (`what`) the host sent broken and where (see [`Lazy::get`]). Where, not serde's
/// description: its messages are kilobytes of code in every guest, for a host bug.
fn parse(what: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| {
        panic!(
            "the host sent an invalid {what}: not JSON at line {}, column {}",
            e.line(),
            e.column()
        )
    })
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
        self.value.get_or_init(|| parse(self.what, &self.text))
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
    fn a_section_is_found_whatever_its_key_spelling_and_the_last_one_wins() {
        let spec = |text: &str| {
            Body::from_text(text.to_owned())
                .unwrap()
                .section("spec")
                .clone()
        };
        assert_eq!(spec(r#"{"spe\u0063": 1, "x": [{"spec": 2}]}"#), json!(1));
        assert_eq!(spec(r#"{"spec": 1, "spec": 2}"#), json!(2));
        assert_eq!(spec("{}"), Value::Null);
    }

    #[test]
    fn names_are_read_where_they_are_and_as_parsed_metadata_reads_them() {
        let cases = [
            (
                r#"{"metadata": {"name": "a", "namespace": "ns", "uid": "u-1"}}"#,
                Some("a"),
                Some("ns"),
            ),
            (
                r#"{"metadata": {"name": "a", "x": [{"name": "b"}], "name": "c"}}"#,
                Some("c"),
                None,
            ),
            (
                r#"{"metadata": {"n\u0061me": "a\"b", "namespace": 3}}"#,
                Some("a\"b"),
                None,
            ),
            (
                r#"{"metadata": {"name": "\u00e9t\u00e9"}}"#,
                Some("été"),
                None,
            ),
            (
                r#"{"metadata": {"name": null}, "spec": {"name": "x"}}"#,
                None,
                None,
            ),
            (r#"{"metadata": "not an object"}"#, None, None),
            (r#"{"spec": {"metadata": {"name": "x"}}}"#, None, None),
        ];
        for (text, name, namespace) in cases {
            let read = Body::from_text(text.to_owned()).unwrap();
            assert_eq!(read.meta_str("name"), name, "{text}");
            assert_eq!(read.meta_str("namespace"), namespace, "{text}");
            // As from `metadata` parsed, once it is.
            let parsed = Body::from_text(text.to_owned()).unwrap();
            parsed.section("metadata");
            assert_eq!(parsed.meta_str("name"), name, "{text}");
            assert_eq!(parsed.meta_str("namespace"), namespace, "{text}");
        }
        let body =
            Body::from_text(r#"{"metadata": {"name": "a", "uid": "u-1"}}"#.to_owned()).unwrap();
        assert_eq!(body.meta_str("uid"), Some("u-1"));
        assert!(
            body.sections[METADATA].1.get().is_none(),
            "metadata was parsed"
        );
        assert_eq!(body.meta_str("generateName"), None);
        assert!(
            body.sections[METADATA].1.get().is_some(),
            "other members are read parsed"
        );
    }

    #[test]
    fn a_body_that_is_no_object_is_refused_before_any_section_is_read() {
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
    fn a_broken_section_traps_when_read_and_the_others_are_read_still() {
        let body = Body::from_text(r#"{"metadata": {"name": "a"}, "spec": {"x": tru}}"#.to_owned())
            .unwrap();
        assert_eq!(body.section("metadata"), &json!({"name": "a"}));
        let panic = std::panic::catch_unwind(|| body.section("spec").clone()).unwrap_err();
        let message = panic.downcast_ref::<String>().cloned().unwrap();
        assert!(
            message.starts_with("the host sent an invalid object: "),
            "{message}"
        );
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
