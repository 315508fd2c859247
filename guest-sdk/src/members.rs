//! Where the members of a JSON object are in its text, found without parsing their values.
//!
//! A handler reads a few members of the object it is called for (its `metadata`, often its
//! `spec`), and the host writes the object's text with serde_json. Skipping the other
//! members with serde (`IgnoredAny`) still tokenised them whole — every number, escape
//! and nesting checked — and was the largest part of a call's cost. This scan only
//! follows the text's structure (strings, brackets, the separators between members) to
//! find where each member's value begins and ends, and only as far as a reader goes (to
//! the name, namespace and uid of the bench's 4.7 KB Pod: its first 170 bytes); a value
//! is parsed, and its JSON checked, when a handler reads it. Text that is not an object, or whose strings
//! or brackets do not close, is refused when the scan reaches it.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

/// Why the text is not a JSON object: what was expected, at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The members of a JSON object, read one by one as far as a reader goes: each member's
/// key and where its value starts; its value is skipped (its end found) only when the
/// reader asks for its span or goes on to the next member. A handler that reads an
/// object's name scans the object only up to its `metadata` and `metadata` up to the name.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    /// Where the scan goes on.
    at: usize,
    state: State,
}

#[derive(Debug, Clone)]
enum State {
    /// Past `{`: the first key or `}` is next.
    Opened,
    /// A key was read; its value starts at `at`.
    Key,
    /// The value of the last key read was skipped: its span. `,` or `}` is next.
    Value(Range<usize>),
    /// Past the object's `}`, at `at`.
    Closed,
}

impl Members {
    /// The members of the object that starts at `start` of `text` (after whitespace).
    pub(crate) fn at(text: &str, start: usize) -> Result<Members, NotAnObject> {
        let mut scan = Scan::new(text, start);
        scan.expect(b'{', "`{`")?;
        Ok(Members {
            at: scan.at,
            state: State::Opened,
        })
    }

    /// The next member's key (decoded if it holds an escape) and where its value starts;
    /// `None` past the last member. The value of the member before is skipped first.
    pub(crate) fn next_key<'t>(
        &mut self,
        text: &'t str,
    ) -> Result<Option<(Cow<'t, str>, usize)>, NotAnObject> {
        if let State::Key = self.state {
            self.value(text)?;
        }
        let mut scan = Scan::new(text, self.at);
        match self.state {
            State::Closed => return Ok(None),
            State::Opened | State::Value(_) if scan.take(b'}') => {
                (self.at, self.state) = (scan.at, State::Closed);
                return Ok(None);
            }
            State::Value(_) => scan.expect(b',', "`,` or `}`")?,
            State::Opened | State::Key => {}
        }
        let key = scan.string()?;
        scan.expect(b':', "`:`")?;
        scan.skip_whitespace();
        (self.at, self.state) = (scan.at, State::Key);
        Ok(Some((decoded_key(text, key), scan.at)))
    }

    /// The span of the value of the member whose key was read last, skipped now if not
    /// yet.
    ///
    /// # Panics
    /// When no key was read yet, or the object is closed: a bug of the reader's.
    pub(crate) fn value(&mut self, text: &str) -> Result<Range<usize>, NotAnObject> {
        match &self.state {
            State::Key => {
                let mut scan = Scan::new(text, self.at);
                let span = scan.value()?;
                (self.at, self.state) = (scan.at, State::Value(span.clone()));
                Ok(span)
            }
            State::Value(span) => Ok(span.clone()),
            State::Opened | State::Closed => unreachable!("no member's key was read"),
        }
    }

    /// Where the object ends (past its `}`), once its last member was read.
    pub(crate) fn end(&self) -> Option<usize> {
        matches!(self.state, State::Closed).then_some(self.at)
    }
}

/// The key whose characters are at `span` of `text`: as written unless it holds an
/// escape (never, in what Kubernetes serves), then decoded, so `"spe\u0063"` is `spec`.
/// (Decoded as a `Value`, whose parser every guest has, rather than as a `String`, which
/// would bring serde's type errors into every guest.) A key that does not decode (a
/// broken escape) reads as written: it names no member a reader asks for.
fn decoded_key(text: &str, span: Range<usize>) -> Cow<'_, str> {
    let raw = &text[span.clone()];
    if !raw.as_bytes().contains(&b'\\') {
        return Cow::Borrowed(raw);
    }
    match serde_json::from_str(&text[span.start - 1..span.end + 1]) {
        Ok(serde_json::Value::String(decoded)) => Cow::Owned(decoded),
        _ => Cow::Borrowed(raw),
    }
}

/// Nothing but whitespace in `text` from `at` on.
pub(crate) fn nothing_after(text: &str, at: usize) -> Result<(), NotAnObject> {
    let mut scan = Scan::new(text, at);
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

impl<'t> Scan<'t> {
    fn new(text: &'t str, at: usize) -> Self {
        Scan {
            bytes: text.as_bytes(),
            at,
        }
    }

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
            let Some(found) = quote_or_backslash(rest) else {
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

/// Where the first `"` or `\\` of `bytes` is. Eight bytes at a time: strings are most
/// of an object's text, and with the search a byte at a time the scan of strings was a
/// quarter of a call to a handler that reads a Pod's name (perf; the guest's code is
/// built for size, and Cranelift does not vectorise).
fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // The high bit of each byte of `word` equal to `byte` (and, above such a byte, maybe
    // of others: a borrow runs upwards only, so the lowest bit set is always a match).
    let matches = |word: u64, byte: u8| {
        let zero_where_equal = word ^ (ONES * u64::from(byte));
        zero_where_equal.wrapping_sub(ONES) & !zero_where_equal & HIGHS
    };
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        // Little-endian: the first byte of the text is the lowest of the word.
        let word = u64::from_le_bytes(word);
        let found = matches(word, b'"') | matches(word, b'\\');
        if found != 0 {
            return Some(offset + found.trailing_zeros() as usize / 8);
        }
        offset += 8;
    }
    let rest = chunks.remainder();
    rest.iter()
        .position(|&b| b == b'"' || b == b'\\')
        .map(|at| offset + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every member of the object `text`, read to its end.
    fn members(text: &str) -> Result<Vec<(String, &str)>, NotAnObject> {
        let mut found = Vec::new();
        let mut members = Members::at(text, 0)?;
        while let Some((key, start)) = members.next_key(text)? {
            let span = members.value(text)?;
            assert_eq!(span.start, start);
            found.push((key.into_owned(), &text[span]));
        }
        nothing_after(text, members.end().unwrap())?;
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
    fn members_are_read_as_far_as_asked_and_a_value_is_skipped_only_when_passed() {
        let text = r#"{"a": {"b": 1}, "c": "d", "broken": [1, "#;
        let mut members = Members::at(text, 0).unwrap();
        let (key, start) = members.next_key(text).unwrap().unwrap();
        assert_eq!((&*key, &text[start..start + 1]), ("a", "{"));
        // The members of a value, from where it starts.
        let mut inner = Members::at(text, start).unwrap();
        assert_eq!(inner.next_key(text).unwrap().unwrap().0, "b");
        assert_eq!(&text[inner.value(text).unwrap()], "1");
        assert_eq!(inner.next_key(text).unwrap(), None);
        assert_eq!(inner.end(), Some(start + 8));
        // Going on skips `a`'s value; the broken one is only found when passed.
        assert_eq!(members.next_key(text).unwrap().unwrap().0, "c");
        assert_eq!(&text[members.value(text).unwrap()], r#""d""#);
        assert_eq!(members.end(), None);
        assert_eq!(members.next_key(text).unwrap().unwrap().0, "broken");
        assert_eq!(
            members.value(text),
            Err(NotAnObject {
                expected: "the end of an object or array",
                at: text.len()
            })
        );
    }

    #[test]
    fn quotes_and_backslashes_are_found_where_a_byte_at_a_time_search_finds_them() {
        // Every other byte around the one sought, in every position of a word and of the
        // tail after the last whole word, with a second match further on.
        for filler in (0..=255).filter(|&b| b != b'"' && b != b'\\') {
            for len in 0..20 {
                for at in 0..=len {
                    for (first, second) in [(b'"', b'\\'), (b'\\', b'"')] {
                        let mut text = vec![filler; len];
                        if at < len {
                            text[at] = first;
                        }
                        if at + 3 < len {
                            text[at + 3] = second;
                        }
                        let expected = text.iter().position(|&b| b == b'"' || b == b'\\');
                        assert_eq!(quote_or_backslash(&text), expected, "{text:?}");
                    }
                }
            }
        }
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
