//! Where the members of a JSON object are in its text, found without parsing their values.
//!
//! A handler reads a few members of the object it is called for (its `metadata`, often its
//! `spec`), and the host writes the object's text with serde_json. Skipping the other
//! members with serde (`IgnoredAny`) still tokenised them whole — every number, escape
//! and nesting checked — and was the largest part of a call's cost. This scan only
//! follows the text's structure (strings, brackets, the separators between members) to
//! find where each member's value begins and ends; a value is parsed, and its JSON
//! checked, when a handler reads it. Text that is not an object, or whose strings or
//! brackets do not close, is refused here, before any handler runs.

use std::fmt;
use std::ops::Range;

/// Why the text is not a JSON object: what was expected, at which byte.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotAnObject {
    expected: &'static str,
    at: usize,
}

impl fmt::Display for NotAnObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not a JSON object: expected {} at byte {}",
            self.expected, self.at
        )
    }
}

/// Calls `each` with the key and the span of the value of every member of the JSON object
/// `text`, in their order.
pub(crate) fn each_member(
    text: &str,
    mut each: impl FnMut(&str, Range<usize>),
) -> Result<(), NotAnObject> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
    };
    scan.expect(b'{', "`{`")?;
    if !scan.take(b'}') {
        loop {
            let key = scan.string()?;
            scan.expect(b':', "`:`")?;
            let value = scan.value()?;
            // Keys are compared as written unless they hold an escape (never, in what
            // Kubernetes serves): then decoded, so `"spe\u0063"` is `spec`.
            // (Decoded as a `Value`, whose parser every guest has, rather than as a `String`,
            // which would bring serde's type errors into every guest.)
            let raw = &text[key.clone()];
            if raw.as_bytes().contains(&b'\\') {
                let quoted = &text[key.start - 1..key.end + 1];
                if let Ok(serde_json::Value::String(decoded)) = serde_json::from_str(quoted) {
                    each(&decoded, value);
                }
            } else {
                each(raw, value);
            }
            if scan.take(b'}') {
                break;
            }
            scan.expect(b',', "`,` or `}`")?;
        }
    }
    scan.skip_whitespace();
    if scan.at < scan.bytes.len() {
        return Err(scan.expected("the end of the text"));
    }
    Ok(())
}

/// A position in the text.
struct Scan<'t> {
    bytes: &'t [u8],
    at: usize,
}

impl Scan<'_> {
    fn expected(&self, expected: &'static str) -> NotAnObject {
        NotAnObject {
            expected,
            at: self.at,
        }
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// Past `byte` (after whitespace) if it is next.
    fn take(&mut self, byte: u8) -> bool {
        self.skip_whitespace();
        let next = self.bytes.get(self.at) == Some(&byte);
        self.at += usize::from(next);
        next
    }

    fn expect(&mut self, byte: u8, expected: &'static str) -> Result<(), NotAnObject> {
        if self.take(byte) {
            Ok(())
        } else {
            Err(self.expected(expected))
        }
    }

    /// Past a string (after whitespace); the span of what is between its quotes.
    fn string(&mut self) -> Result<Range<usize>, NotAnObject> {
        self.expect(b'"', "a string")?;
        let start = self.at;
        self.string_rest()?;
        Ok(start..self.at - 1)
    }

    /// Past the rest of a string whose opening quote is behind.
    fn string_rest(&mut self) -> Result<(), NotAnObject> {
        loop {
            let rest = self.bytes.get(self.at..).unwrap_or_default();
            let Some(found) = rest.iter().position(|&b| b == b'"' || b == b'\\') else {
                self.at = self.bytes.len();
                return Err(self.expected("the end of a string"));
            };
            self.at += found + 1;
            if rest[found] == b'"' {
                return Ok(());
            }
            // An escape: its next byte is never the string's end.
            self.at += 1;
        }
    }

    /// Past a value (after whitespace); its span.
    fn value(&mut self) -> Result<Range<usize>, NotAnObject> {
        self.skip_whitespace();
        let start = self.at;
        match self.bytes.get(self.at) {
            Some(b'"') => {
                self.at += 1;
                self.string_rest()?;
            }
            Some(b'{' | b'[') => {
                let mut depth = 0_usize;
                loop {
                    let Some(&byte) = self.bytes.get(self.at) else {
                        return Err(self.expected("the end of an object or array"));
                    };
                    self.at += 1;
                    match byte {
                        b'"' => self.string_rest()?,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            // A number, `true`, `false` or `null`: up to what ends a value.
            _ => {
                while let Some(&byte) = self.bytes.get(self.at) {
                    if matches!(byte, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                        break;
                    }
                    self.at += 1;
                }
                if self.at == start {
                    return Err(self.expected("a value"));
                }
            }
        }
        Ok(start..self.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(text: &str) -> Result<Vec<(String, &str)>, NotAnObject> {
        let mut found = Vec::new();
        each_member(text, |key, value| {
            found.push((key.to_owned(), &text[value]))
        })?;
        Ok(found)
    }

    #[test]
    fn every_member_is_found_with_its_value_as_written() {
        let text = r#" { "a" : 1 , "b":"x\"}]\\", "c": {"d": [1, {"e": "}"}], "f": null},
                        "g": [], "h": true, "spe\u0063": -1.5e3 } "#;
        assert_eq!(
            members(text).unwrap(),
            [
                ("a".to_owned(), "1"),
                ("b".to_owned(), r#""x\"}]\\""#),
                ("c".to_owned(), r#"{"d": [1, {"e": "}"}], "f": null}"#),
                ("g".to_owned(), "[]"),
                ("h".to_owned(), "true"),
                ("spec".to_owned(), "-1.5e3"),
            ]
        );
        assert_eq!(members("{}").unwrap(), []);
    }

    #[test]
    fn text_that_is_no_object_or_does_not_close_is_refused_with_where() {
        for (text, expected, at) in [
            ("", "`{`", 0),
            ("[1]", "`{`", 0),
            ("3", "`{`", 0),
            (r#"{"a": 1} x"#, "the end of the text", 9),
            (r#"{"a": {"b": 1}"#, "`,` or `}`", 14),
            (r#"{"a": {"b": [1}"#, "the end of an object or array", 15),
            (r#"{"a": "b}"#, "the end of a string", 9),
            (r#"{"a" 1}"#, "`:`", 5),
            (r#"{"a": }"#, "a value", 6),
            (r#"{"a": 1,}"#, "a string", 8),
            (r#"{a: 1}"#, "a string", 1),
        ] {
            assert_eq!(members(text), Err(NotAnObject { expected, at }), "{text}");
        }
    }
}
