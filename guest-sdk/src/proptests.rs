//! Property tests of the lazy reading of a call's object ([`crate::members`]'s scan and
//! [`crate::lazy::Body`]'s accessors) against serde_json parsing the same text whole.
//!
//! The documents are arbitrary JSON objects, written out here (not by serde_json) with
//! whitespace of every kind between tokens and strings escaped in every way JSON allows
//! (`\u0063` for `c`, surrogate pairs, `\/`), so that the scan meets what a host
//! other than serde_json could send. Keys and strings come from a small alphabet that
//! holds what the scan must step over (quotes, backslashes, brackets, commas, colons,
//! control characters) and the keys it looks for (`metadata`, `spec`, `status`, `name`,
//! `namespace`, `uid`).
//!
//! `cargo test -p kapsel-sdk` runs proptest's default 256 cases per property (about a
//! second); a longer run: `PROPTEST_CASES=20000 cargo test -p kapsel-sdk --lib proptests`
//! (run for this commit: 20000 cases each, all passing, 82 s on 2 shared cores). Both
//! properties failed, shrunk to a few bytes, with the scan broken on purpose: an escaped
//! quote taken for a string's end (`{"metadata":{"name":"\""}}`), and a tab not taken
//! for whitespace (`\t{}`), which no example-based test of the scan noticed; those cases
//! are kept as seeds in `proptest-regressions/`.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::lazy::Body;
use crate::members::{Members, NotAnObject, nothing_after};

/// Keys, to collide with what a reader asks for and to hold what the scan steps over.
const KEYS: [&str; 14] = [
    "metadata",
    "spec",
    "status",
    "name",
    "namespace",
    "uid",
    "kind",
    "a",
    "",
    "a\"b",
    "\\",
    "}],:{[",
    "é\u{1F600}",
    "tab\there\n",
];

/// Strings: the keys' alphabet, and some more.
fn text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "x",
        "name",
        "\"",
        "\\",
        "\\\"",
        "/",
        "}",
        "]",
        ",",
        ":",
        "{",
        "[",
        " ",
        "\u{0}",
        "\u{1f}",
        "\n",
        "é",
        "\u{1F600}",
        "\u{2028}",
        "null",
    ]);
    prop_oneof![
        prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        prop::collection::vec(pieces, 0..6).prop_map(|pieces| pieces.concat()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        1 => text(),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-5_i64..5).prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            object(key(), inner),
        ]
    })
}

/// An object of `values` under `keys` (each key once, as serde_json and Kubernetes
/// write them: where a key is twice, the scan reads the first and serde_json the last).
fn object(
    keys: impl Strategy<Value = String>,
    values: impl Strategy<Value = Value>,
) -> impl Strategy<Value = Value> {
    prop::collection::vec((keys, values), 0..6).prop_map(|members| {
        let mut object = Map::new();
        for (key, value) in members {
            object.entry(key).or_insert(value);
        }
        Value::Object(object)
    })
}

/// `metadata` as the host sends it more often than not: an object whose name,
/// namespace and uid are strings; else anything.
fn metadata() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        4 => prop::sample::select(vec!["name", "namespace", "uid"]).prop_map(str::to_owned),
        1 => key(),
    ];
    let value = prop_oneof![4 => text().prop_map(Value::String), 1 => json_value()];
    prop_oneof![4 => object(key, value), 1 => json_value()]
}

/// A call's object: its members any value, `metadata` most often an object, and there
/// in most documents; `spec` and `status` often.
fn document() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        1 => prop::sample::select(vec!["spec", "status"]).prop_map(str::to_owned),
        2 => key(),
    ];
    let value = prop_oneof![1 => metadata(), 2 => json_value()];
    let add = prop::bool::weighted(0.8);
    (object(key, value), metadata(), add).prop_map(|(mut top, metadata, add)| {
        if let (true, Value::Object(members)) = (add, &mut top) {
            members.entry("metadata").or_insert(metadata);
        }
        top
    })
}

/// How a document is written: each choice (whitespace, an escape, a number's form) taken
/// in turn from a list that proptest draws and shrinks.
struct Writer {
    choices: Vec<u8>,
    next: usize,
    out: String,
}

impl Writer {
    fn choose(&mut self, among: u8) -> u8 {
        let choice = self.choices[self.next % self.choices.len()];
        self.next += 1;
        choice % among
    }

    fn whitespace(&mut self) {
        let space = ["", "", "", " ", "\n  ", "\t", "\r\n", " \t \n"];
        let at = self.choose(8);
        self.out.push_str(space[usize::from(at)]);
    }

    fn value(&mut self, value: &Value) {
        self.whitespace();
        match value {
            Value::Null | Value::Bool(_) => self.out.push_str(&value.to_string()),
            Value::Number(number) => self.number(number),
            Value::String(text) => self.string(text),
            Value::Array(items) => {
                self.out.push('[');
                for (at, item) in items.iter().enumerate() {
                    if at > 0 {
                        self.whitespace();
                        self.out.push(',');
                    }
                    self.value(item);
                }
                self.whitespace();
                self.out.push(']');
            }
            Value::Object(members) => {
                self.out.push('{');
                for (at, (key, value)) in members.iter().enumerate() {
                    if at > 0 {
                        self.whitespace();
                        self.out.push(',');
                    }
                    self.whitespace();
                    self.string(key);
                    self.whitespace();
                    self.out.push(':');
                    self.value(value);
                }
                self.whitespace();
                self.out.push('}');
            }
        }
        self.whitespace();
    }

    /// As serde_json writes it, or an integer with a fraction or an exponent.
    fn number(&mut self, number: &serde_json::Number) {
        let written = number.to_string();
        match (number.is_f64(), self.choose(4)) {
            (false, 1) => self.out.push_str(&format!("{written}.0")),
            (false, 2) => self.out.push_str(&format!("{written}e0")),
            (false, 3) => self.out.push_str(&format!("{written}E+00")),
            _ => self.out.push_str(&written),
        }
    }

    fn string(&mut self, text: &str) {
        self.out.push('"');
        for c in text.chars() {
            let must = matches!(c, '"' | '\\') || u32::from(c) < 0x20;
            match (must, self.choose(4)) {
                (false, 0 | 1) => self.out.push(c),
                (_, 2) => self.unicode_escape(c),
                (_, 3) if c == '/' => self.out.push_str("\\/"),
                _ => self.short_escape(c),
            }
        }
        self.out.push('"');
    }

    /// `\"`, `\\`, `\n`...; `\u` for a character without a short form.
    fn short_escape(&mut self, c: char) {
        let short = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            _ => return self.unicode_escape(c),
        };
        self.out.push_str(short);
    }

    /// `\u0063`, or a surrogate pair beyond the basic plane.
    fn unicode_escape(&mut self, c: char) {
        let mut units = [0; 2];
        for unit in c.encode_utf16(&mut units) {
            self.out.push_str(&format!("\\u{unit:04x}"));
        }
    }
}

fn written(document: &Value, choices: Vec<u8>) -> String {
    let mut writer = Writer {
        choices,
        next: 0,
        out: String::new(),
    };
    writer.value(document);
    writer.out
}

/// Every member of the object at `start` of `text` as the scan finds them, with each
/// value's text; the members of values that are objects checked the same way.
fn check_members(text: &str, start: usize, parsed: &Value) -> Result<(), TestCaseError> {
    let mut members = Members::at(text, start).map_err(fail)?;
    let mut keys = Vec::new();
    while let Some((key, value_start)) = members.next_key(text).map_err(fail)? {
        let span = members.value(text).map_err(fail)?;
        prop_assert_eq!(span.start, value_start);
        let value: Value = serde_json::from_str(&text[span.clone()])
            .map_err(|e| TestCaseError::fail(format!("{key}: {e}")))?;
        prop_assert_eq!(Some(&value), parsed.get(&*key), "member {:?}", key);
        if value.is_object() {
            check_members(text, span.start, &value)?;
        }
        keys.push(key.into_owned());
    }
    let expected: Vec<&String> = parsed
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    prop_assert_eq!(keys.iter().collect::<Vec<_>>(), expected);
    prop_assert!(members.end().is_some());
    Ok(())
}

fn fail(broken: NotAnObject) -> TestCaseError {
    TestCaseError::fail(format!("the scan refused valid JSON: {broken}"))
}

/// One accessor of a body.
#[derive(Debug, Clone)]
enum Read {
    Section(&'static str),
    MetaStr(&'static str),
    Whole,
}

fn reads() -> impl Strategy<Value = Vec<Read>> {
    let read = prop_oneof![
        2 => prop::sample::select(vec!["metadata", "spec", "status", "kind", "a"]).prop_map(Read::Section),
        2 => prop::sample::select(vec!["name", "namespace", "uid", "generateName"])
            .prop_map(Read::MetaStr),
        1 => Just(Read::Whole),
    ];
    prop::collection::vec(read, 1..8)
}

proptest! {
    /// The scan finds every member of every object in the text, in order, each value's
    /// span holding what serde_json parses there, and the object's end.
    #[test]
    fn the_scan_finds_the_members_serde_json_parses(
        document in document(),
        choices in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let text = written(&document, choices);
        let parsed: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let mut members = Members::at(&text, 0).map_err(fail)?;
        while members.next_key(&text).map_err(fail)?.is_some() {}
        let end = members.end().ok_or_else(|| TestCaseError::fail("no end"))?;
        nothing_after(&text, end).map_err(fail)?;
        check_members(&text, 0, &parsed)?;
    }

    /// Whatever a handler reads, in whatever order (sections, names, the whole object),
    /// is what serde_json parses from the whole text.
    #[test]
    fn a_body_reads_what_serde_json_parses(
        document in document(),
        choices in prop::collection::vec(any::<u8>(), 1..64),
        reads in reads(),
    ) {
        let text = written(&document, choices);
        let parsed: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let body = Body::from_text(text.clone()).map_err(fail)?;
        for read in reads {
            match read {
                Read::Section(key) => {
                    prop_assert_eq!(body.section(key), parsed.get(key).unwrap_or(&Value::Null), "{}", key);
                }
                Read::MetaStr(key) => {
                    let expected = parsed.get("metadata").and_then(|m| m.get(key)).and_then(Value::as_str);
                    prop_assert_eq!(body.meta_str(key), expected, "{}", key);
                }
                Read::Whole => prop_assert_eq!(body.whole(), &parsed),
            }
        }
    }
}
