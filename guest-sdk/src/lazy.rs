//! The JSON of a call, parsed when a handler first reads it.
//!
//! The host hands the object, its old and new essences and the diff over as text. Parsing
//! all of it was most of a call's cost (a create handler that reads the object's name
//! parsed a 4 KB Pod whole, and its essence twice more, in `new` and in the diff). Here
//! the object's text is only scanned for where its members are, as far as a handler
//! reads ([`crate::members`]: up to `metadata`'s name for `name()`), and each part is
//! parsed the first time an accessor reads it.

use std::ops::Range;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::Value;

use crate::DiffItem;
use crate::members::{Members, NotAnObject, nothing_after};

/// The members of the object read as a handler asks for them, each parsed when first read.
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
///
/// Its text is read only as far as a handler asks: up to `metadata` for its name, on to
/// `spec` when it reads the spec. Where a key is there twice (never in the host's text:
/// serde_json and kube-apiserver write each key once), the first one is read, where
/// `body()` parsed whole keeps the last.
#[derive(Debug)]
pub(crate) struct Body {
    /// The host's text; empty for a body built from a value (tests).
    text: String,
    /// How far the text was read; none for a body built from a value.
    read: Mutex<Option<Read>>,
    /// Each of [`SECTIONS`] once read.
    sections: [OnceLock<Value>; 3],
    whole: OnceLock<Value>,
    /// Where each of [`META_STRINGS`] is, found when one is first read; `None` for a
    /// `metadata` that is no object (read parsed, as any other).
    meta_strings: OnceLock<Option<[MetaString; 3]>>,
}

/// How far the object's members were read, and what was found of [`SECTIONS`].
#[derive(Debug, Clone)]
struct Read {
    members: Members,
    /// At most one is `Starts`: the member whose key was read last, its value not
    /// skipped yet.
    places: [Place; 3],
    /// Why the text is no JSON object, once the reading came to where it is not.
    broken: Option<NotAnObject>,
}

/// Where a section is, as far as the object was read.
#[derive(Debug, Clone)]
enum Place {
    NotYet,
    /// Its key was read: its value starts here.
    Starts(usize),
    /// Its value was skipped: its span.
    Spans(Range<usize>),
}

impl Read {
    /// Reads on until `section` is found (its value skipped when `span`, to know its
    /// end), or past the object's end: `None`, an absent section.
    fn find(
        &mut self,
        text: &str,
        section: usize,
        span: bool,
    ) -> Result<Option<Place>, NotAnObject> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        let found = self.read_on(text, section, span);
        if let Err(broken) = &found {
            self.broken = Some(broken.clone());
        }
        found
    }

    fn read_on(
        &mut self,
        text: &str,
        section: usize,
        span: bool,
    ) -> Result<Option<Place>, NotAnObject> {
        loop {
            match &self.places[section] {
                Place::Spans(_) => return Ok(Some(self.places[section].clone())),
                Place::Starts(_) if !span => return Ok(Some(self.places[section].clone())),
                Place::Starts(_) | Place::NotYet => {}
            }
            // A section's value is skipped here, to keep its span; any other member's is
            // skipped by `next_key`.
            if let Some(started) = self
                .places
                .iter_mut()
                .find(|p| matches!(p, Place::Starts(_)))
            {
                *started = Place::Spans(self.members.value(text)?);
                continue;
            }
            let Some((key, start)) = self.members.next_key(text)? else {
                if let Some(end) = self.members.end() {
                    nothing_after(text, end)?;
                }
                return Ok(None);
            };
            if let Some(at) = SECTIONS.iter().position(|section| *section == key)
                && let Place::NotYet = self.places[at]
            {
                self.places[at] = Place::Starts(start);
            }
        }
    }
}

impl Clone for Body {
    fn clone(&self) -> Self {
        Self {
            text: self.text.clone(),
            read: Mutex::new(self.read().clone()),
            sections: self.sections.clone(),
            whole: self.whole.clone(),
            meta_strings: self.meta_strings.clone(),
        }
    }
}

impl Body {
    /// A body from the host's text, refused if it does not start as a JSON object;
    /// nothing else of it read yet.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(
            dead_code,
            reason = "the host's text reaches the SDK in the wasm build only"
        )
    )]
    pub(crate) fn from_text(text: String) -> Result<Self, NotAnObject> {
        let members = Members::at(&text, 0)?;
        Ok(Self {
            text,
            read: Mutex::new(Some(Read {
                members,
                places: [const { Place::NotYet }; 3],
                broken: None,
            })),
            sections: Default::default(),
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
            read: Mutex::new(None),
            sections: Default::default(),
            whole: OnceLock::from(value),
            meta_strings: OnceLock::new(),
        }
    }

    fn read(&self) -> MutexGuard<'_, Option<Read>> {
        // Reading on never panics midway: what it leaves is whole.
        self.read.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where `section` is, reading the text on as far as needed (see [`Read::find`]).
    fn find(&self, section: usize, span: bool) -> Result<Option<Place>, NotAnObject> {
        match self.read().as_mut() {
            Some(read) => read.find(&self.text, section, span),
            None => Ok(None),
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
    /// As [`Lazy::get`], also when the text turns out to be no JSON object where it is
    /// read.
    pub(crate) fn section(&self, key: &str) -> &Value {
        if let Some(whole) = self.whole.get() {
            return whole.get(key).unwrap_or(&Value::Null);
        }
        match SECTIONS.iter().position(|section| *section == key) {
            Some(at) => self.sections[at].get_or_init(|| match self.find(at, true) {
                Ok(Some(Place::Spans(span))) => parse("object", &self.text[span]),
                Ok(_) => Value::Null,
                Err(broken) => panic!("the host sent an invalid object: {broken}"),
            }),
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
        let parsed = self.whole.get().is_some() || self.sections[METADATA].get().is_some();
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

    /// Reads `metadata`'s members until each of [`META_STRINGS`] is found or its end;
    /// `None` when `metadata` is no object, or its text turns out broken (it is read
    /// parsed then, and says so).
    fn find_meta_strings(&self) -> Option<[MetaString; 3]> {
        let start = match self.find(METADATA, false).ok()? {
            None => return Some([const { MetaString::Absent }; 3]),
            Some(Place::Starts(start)) => start,
            Some(Place::Spans(span)) => span.start,
            Some(Place::NotYet) => return None,
        };
        let mut found: [Option<MetaString>; 3] = Default::default();
        // `None` for a `metadata` that is no object.
        let mut members = Members::at(&self.text, start).ok()?;
        while found.iter().any(Option::is_none) {
            let Some((key, _)) = members.next_key(&self.text).ok()? else {
                break;
            };
            if let Some(at) = META_STRINGS.iter().position(|k| *k == key)
                && found[at].is_none()
            {
                let span = members.value(&self.text).ok()?;
                found[at] = Some(
                    plain_string(&self.text[span.clone()]).map_or(MetaString::Parse, |inner| {
                        MetaString::Plain(span.start + 1..span.start + 1 + inner.len())
                    }),
                );
            }
        }
        Some(found.map(|found| found.unwrap_or(MetaString::Absent)))
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
    fn a_section_is_found_whatever_its_key_spelling_and_the_first_one_is_read() {
        let spec = |text: &str| {
            Body::from_text(text.to_owned())
                .unwrap()
                .section("spec")
                .clone()
        };
        assert_eq!(spec(r#"{"spe\u0063": 1, "x": [{"spec": 2}]}"#), json!(1));
        assert_eq!(spec(r#"{"spec": 1, "spec": 2}"#), json!(1));
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
                r#"{"metadata": {"x": [{"name": "b"}], "name": "c"}, "name": "d"}"#,
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
            body.sections[METADATA].get().is_none(),
            "metadata was parsed"
        );
        assert_eq!(body.meta_str("generateName"), None);
        assert!(
            body.sections[METADATA].get().is_some(),
            "other members are read parsed"
        );
    }

    #[test]
    fn names_are_read_as_far_as_they_are_and_a_repeated_one_is_the_first() {
        // All three found: nothing after them is read, broken or not.
        let text = r#"{"kind": "Pod", "metadata": {"name": "a", "namespace": "n", "uid": "u",
                       "name": "b", "labels": [}, "spec": "#;
        let body = Body::from_text(text.to_owned()).unwrap();
        assert_eq!(body.meta_str("name"), Some("a"));
        assert_eq!(body.meta_str("uid"), Some("u"));
        assert!(std::panic::catch_unwind(|| body.section("spec").clone()).is_err());
    }

    #[test]
    fn text_that_is_no_object_is_refused_where_it_is_read() {
        for text in ["[1]", "3", "", " x{}"] {
            assert!(Body::from_text(text.to_owned()).is_err(), "{text}");
        }
        for (text, expected) in [
            (
                r#"{"metadata": {}, "spec": {"#,
                "the end of an object or array at byte 26",
            ),
            (r#"{"metadata": {}} x"#, "the end of the text at byte 17"),
            (r#"{"metadata": {} "spec": 1}"#, "`,` or `}` at byte 16"),
        ] {
            let body = Body::from_text(text.to_owned()).unwrap();
            assert_eq!(body.section("metadata"), &json!({}), "{text}");
            for section in ["status", "spec"] {
                let panic = std::panic::catch_unwind(|| body.section(section).clone()).unwrap_err();
                let message = panic.downcast_ref::<String>().cloned().unwrap();
                assert_eq!(
                    message,
                    format!(
                        "the host sent an invalid object: not a JSON object: expected {expected}"
                    ),
                    "{text}"
                );
            }
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
