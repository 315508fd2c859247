//! Shard selectors (KEP-5866, Kubernetes' `ShardedListAndWatch`): `shardSelector=
//! shardRange(object.metadata.uid, '0x…', '0x…') || …` on a list or watch keeps the
//! objects whose field hashes (64-bit FNV-1a) into one of the ranges `[start, end)`.
//!
//! kube-apiserver reads the selector as a CEL expression and walks its syntax tree; here a
//! small parser of CEL's expression syntax builds the same tree, so that a selector that
//! is valid CEL gets kube's own message when it is not a shard selector (`_&&_` is not
//! allowed, `hexStart must be a string literal, got int64`, ...). Text that is not CEL at
//! all gets a syntax error in this parser's own words. Checked once against kube's own
//! parser (`k8s.io/apiserver/pkg/sharding.Parse`, v0.37.2) on 4000 random texts of CEL's
//! and selectors' pieces: the same texts accepted, and the same message for every text
//! refused, but for the syntax errors' words.

use serde_json::Value;

use crate::cel::{Expr, Literal, Parser};

/// The largest exclusive end of a range: 2^64.
const END_OF_SPACE: u128 = 1 << 64;

/// The fields a shard selector may hash.
const FIELDS: [&str; 2] = ["object.metadata.uid", "object.metadata.namespace"];

/// A parsed shard selector: ranges of the hash of one field, OR-ed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelector {
    /// `object.metadata.uid` or `object.metadata.namespace`.
    field: &'static str,
    /// `[start, end)` of the 64-bit hash, `end` at most 2^64.
    ranges: Vec<(u128, u128)>,
}

/// The 64-bit FNV-1a hash, kube's hash of a shard key.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

impl ShardSelector {
    /// Parses a `shardSelector` as kube-apiserver does; the error is kube's text after
    /// `invalid shard selector: `.
    pub(crate) fn parse(text: &str) -> Result<ShardSelector, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .into(),
            );
        }
        let expr = Parser::new(text)
            .and_then(Parser::whole)
            .map_err(|e| format!("CEL parse error: Syntax error: {e}"))?;
        let mut found = Vec::new();
        walk(&expr, &mut found)?;
        let field = found.first().map_or(FIELDS[0], |(field, _)| *field);
        if let Some((other, _)) = found.iter().find(|(f, _)| *f != field) {
            return Err(format!(
                "all shard ranges must use the same field, got {field:?} and {other:?}"
            ));
        }
        Ok(ShardSelector {
            field,
            ranges: found.into_iter().map(|(_, range)| range).collect(),
        })
    }

    /// Whether the object's field hashes into one of the ranges (a field the object does
    /// not have, a cluster-scoped object's namespace, is the empty text, as in kube).
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let name = self.field.rsplit('.').next().unwrap_or_default();
        let value = obj
            .get("metadata")
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .unwrap_or("");
        let hash = u128::from(fnv1a64(value.as_bytes()));
        self.ranges
            .iter()
            .any(|(start, end)| *start <= hash && hash < *end)
    }
}

/// The selector as kube echoes it in a list's `metadata.shardInfo.selector`.
impl std::fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (start, end)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '0x{start:016x}', '0x{end:016x}')",
                self.field
            )?;
        }
        Ok(())
    }
}

/// The ranges of the expression, in order, as kube's `walkExpr` finds them.
fn walk(expr: &Expr, found: &mut Vec<(&'static str, (u128, u128))>) -> Result<(), String> {
    let Expr::Call { function, args } = expr else {
        return Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            expr.kind()
        ));
    };
    match function.as_str() {
        "_||_" => args.iter().try_for_each(|arg| walk(arg, found)),
        "shardRange" => {
            found.push(shard_range(args)?);
            Ok(())
        }
        other => Err(format!(
            "unsupported function {other:?}; only shardRange() and || are allowed"
        )),
    }
}

/// One `shardRange(field, start, end)`.
fn shard_range(args: &[Expr]) -> Result<(&'static str, (u128, u128)), String> {
    let [field, start, end] = args else {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    };
    let path = field_path(field).map_err(|e| format!("shardRange() first argument: {e}"))?;
    let field = FIELDS.into_iter().find(|f| *f == path).ok_or_else(|| {
        format!(
            "unsupported field path {path:?}; supported: object.metadata.uid, \
                 object.metadata.namespace"
        )
    })?;
    let (start_text, start) = bound(start, "hexStart")?;
    let (end_text, end) = bound(end, "hexEnd")?;
    if start >= end {
        return Err(format!(
            "shard range start {start_text} must be less than end {end_text}"
        ));
    }
    Ok((field, (start, end)))
}

/// `object.metadata.uid` from its select chain.
fn field_path(expr: &Expr) -> Result<String, String> {
    match expr {
        Expr::Ident(name) => Ok(name.clone()),
        Expr::Select(operand, name) => Ok(format!("{}.{name}", field_path(operand)?)),
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind()
        )),
    }
}

/// Text quoted as Go's `%q` quotes it, as kube's messages show it.
fn quoted(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str(r#"\""#),
            '\\' => out.push_str(r"\\"),
            '\u{7}' => out.push_str(r"\a"),
            '\u{8}' => out.push_str(r"\b"),
            '\u{c}' => out.push_str(r"\f"),
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            '\u{b}' => out.push_str(r"\v"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!(r"\x{:02x}", u32::from(c)));
            }
            c if c.is_control() => out.push_str(&format!(r"\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A bound: a string literal of `0x` and 16 lowercase hex digits, or `0x1` and 16 zeros
/// (2^64).
fn bound(expr: &Expr, name: &str) -> Result<(String, u128), String> {
    let Expr::Literal(literal) = expr else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            expr.kind()
        ));
    };
    let text = match literal {
        Literal::Str(text) => text,
        other => {
            return Err(format!(
                "{name} must be a string literal, got {}",
                other.go_type()
            ));
        }
    };
    let q = quoted(text);
    let Some(hex) = text.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {q}"));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {}",
            hex.len(),
            quoted(hex)
        ));
    }
    if let Some(c) = hex
        .chars()
        .find(|c| !c.is_ascii_digit() && !('a'..='f').contains(c))
    {
        return Err(format!(
            "{name}: invalid hex character {} in {q}",
            quoted(&c.to_string())
        ));
    }
    if hex.len() == 17 && text != "0x10000000000000000" {
        return Err(format!(
            "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {q}"
        ));
    }
    if hex.len() < 16 {
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {q} (did you mean \
             \"0x{hex:0>16}\"?)"
        ));
    }
    let value = if hex.len() == 17 {
        END_OF_SPACE
    } else {
        u128::from_str_radix(hex, 16).map_err(|e| format!("{name}: {e}"))?
    };
    Ok((text.clone(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
    const HIGH: &str =
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

    /// FNV-1a 64's published test vectors, and kube's hash of a namespace and a uid
    /// (`k8s.io/apimachinery/pkg/sharding.HashField`, run once to get them).
    #[test]
    fn the_hash_is_fnv1a_64() {
        for (text, hash) in [
            ("", 0xcbf2_9ce4_8422_2325),
            ("a", 0xaf63_dc4c_8601_ec8c),
            ("foobar", 0x8594_4171_f739_67e8),
            ("default", 0xebad_a516_8620_c5fe),
            ("kube-system", 0xdf65_c7bc_1d82_b35e),
            (
                "3f2a4c1e-9b7d-4e8a-a1c2-5d6e7f809a1b",
                0xb29d_791d_d0c2_95f7,
            ),
        ] {
            assert_eq!(fnv1a64(text.as_bytes()), hash, "{text:?}");
        }
    }

    /// Selectors kube accepts, each with what kube echoes in `shardInfo`.
    #[test]
    fn good_selectors_parse_to_kubes_canonical_text() {
        let both = format!("{LOW} || {HIGH}");
        for (text, canonical) in [
            (LOW, LOW),
            (
                "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
                LOW,
            ),
            (
                "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
                LOW,
            ),
            (&format!("({LOW})"), LOW),
            (
                "shardRange(object.metadata.uid, r'0x0000000000000000', \"0x8000000000000000\")",
                LOW,
            ),
            (
                "shardRange(object.metadata.uid, '\\x30x0000000000000000', '''0x8000000000000000''')",
                LOW,
            ),
            (
                "object.shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
                LOW,
            ),
            (&both, &both),
            (&format!("{LOW}||{HIGH}"), &both),
            (
                "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
                "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            ),
        ] {
            let selector = ShardSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.to_string(), canonical, "{text}");
        }
    }

    /// Selectors kube refuses, each with kube's message (kube-apiserver's, from
    /// `k8s.io/apiserver/pkg/sharding.Parse`, run once on each; the syntax errors of text
    /// that is not CEL are this parser's own).
    #[test]
    fn bad_selectors_get_kubes_messages() {
        let uid =
            |start: &str, end: &str| format!("shardRange(object.metadata.uid, {start}, {end})");
        let z = "'0x0000000000000000'";
        let h = "'0x8000000000000000'";
        for (text, message) in [
            (
                "   ",
                "empty shard selector is not allowed; omit the parameter for unfiltered lists",
            ),
            (
                &uid("'0000000000000000'", h),
                "hexStart must have '0x' prefix, got \"0000000000000000\"",
            ),
            (
                &uid(z, "'8000000000000000'"),
                "hexEnd must have '0x' prefix, got \"8000000000000000\"",
            ),
            (
                &uid("'0X0000000000000000'", h),
                "hexStart must have '0x' prefix, got \"0X0000000000000000\"",
            ),
            (
                &uid("'0x'", h),
                "hexStart: hex value is required after '0x'",
            ),
            (
                "shardRange(object.metadata.name, '0x00', '0x80')",
                "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            (
                "shardRange(metadata.uid, '0x00', '0x80')",
                "unsupported field path \"metadata.uid\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            (
                "shardRange(.object.metadata.uid, '0x00', '0x80')",
                "unsupported field path \".object.metadata.uid\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            (
                "invalidFunc(object.metadata.uid, '0x00', '0x80')",
                "unsupported function \"invalidFunc\"; only shardRange() and || are allowed",
            ),
            (
                &uid("'0x000000000000000000'", "'0x80'"),
                "hexStart: hex value too long (18 chars, max 17): \"000000000000000000\"",
            ),
            (
                &uid("'0x0g'", "'0x80'"),
                "hexStart: invalid hex character \"g\" in \"0x0g\"",
            ),
            (
                &uid(z, "'0x800000000000000F'"),
                "hexEnd: invalid hex character \"F\" in \"0x800000000000000F\"",
            ),
            (
                &format!("{LOW} && {HIGH}"),
                "unsupported function \"_&&_\"; only shardRange() and || are allowed",
            ),
            (
                "object.metadata.uid > '0x0'",
                "unsupported function \"_>_\"; only shardRange() and || are allowed",
            ),
            (
                &format!("!{LOW}"),
                "unsupported function \"!_\"; only shardRange() and || are allowed",
            ),
            (
                &format!("{LOW} ? 1 : 2"),
                "unsupported function \"_?_:_\"; only shardRange() and || are allowed",
            ),
            (
                &uid("0", "8"),
                "hexStart must be a string literal, got int64",
            ),
            (
                &uid("-1", h),
                "hexStart must be a string literal, got int64",
            ),
            (
                &uid("0u", "8"),
                "hexStart must be a string literal, got uint64",
            ),
            (
                &uid("0.5", "8"),
                "hexStart must be a string literal, got float64",
            ),
            (
                &uid("true", "8"),
                "hexStart must be a string literal, got bool",
            ),
            (
                &uid("null", "8"),
                "hexStart must be a string literal, got structpb.NullValue",
            ),
            (
                &uid("b'0x00'", "8"),
                "hexStart must be a string literal, got []uint8",
            ),
            (
                &uid("hex(0)", h),
                "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
            ),
            (
                &uid("'0x00' + '00'", h),
                "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
            ),
            (
                &uid("x", h),
                "hexStart must be a string literal (e.g. '0xff'), got expression kind 3",
            ),
            (
                &uid(z, "object.x"),
                "hexEnd must be a string literal (e.g. '0xff'), got expression kind 7",
            ),
            (
                "object.metadata.uid",
                "unexpected expression kind 7; expected shardRange() call or || operator",
            ),
            (
                "'0x00'",
                "unexpected expression kind 5; expected shardRange() call or || operator",
            ),
            (
                "[1]",
                "unexpected expression kind 4; expected shardRange() call or || operator",
            ),
            (
                "{1: 2}",
                "unexpected expression kind 6; expected shardRange() call or || operator",
            ),
            (
                &format!("{LOW} || x"),
                "unexpected expression kind 3; expected shardRange() call or || operator",
            ),
            (
                "shardRange(object.metadata.uid, '0x0')",
                "shardRange() requires exactly 3 arguments, got 2",
            ),
            (
                "shardRange()",
                "shardRange() requires exactly 3 arguments, got 0",
            ),
            (
                &format!("shardRange(object.metadata.uid, {z}, {h}, '0x0')"),
                "shardRange() requires exactly 3 arguments, got 4",
            ),
            (
                "shardRange(object[\"metadata\"].uid, '0x00', '0x80')",
                "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1",
            ),
            (
                "shardRange(1, '0x00', '0x80')",
                "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5",
            ),
            (
                &format!(
                    "{LOW} || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
                ),
                "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"",
            ),
            (
                &uid("'0x0'", h),
                "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
            ),
            (
                &uid(z, "'0xff'"),
                "hexEnd must be a 0x-prefixed 16-digit hex value, got \"0xff\" (did you mean \"0x00000000000000ff\"?)",
            ),
            (
                &uid(h, h),
                "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
            ),
            (
                &uid("'0xffffffffffffffff'", z),
                "shard range start 0xffffffffffffffff must be less than end 0x0000000000000000",
            ),
            (
                &uid(z, "'0x20000000000000000'"),
                "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"",
            ),
            (
                &uid("'0x10000000000000000'", "'0x10000000000000000'"),
                "shard range start 0x10000000000000000 must be less than end 0x10000000000000000",
            ),
            (
                ".1",
                "unexpected expression kind 5; expected shardRange() call or || operator",
            ),
            (
                &uid(z, "'0x800000)0000\\x000000'"),
                "hexEnd: invalid hex character \")\" in \"0x800000)0000\\x000000\"",
            ),
            // Not CEL: kube's words are ANTLR's, these are the parser's own.
            (
                &format!("shardRange(object.metadata.uid, {z}, {h}"),
                "CEL parse error: Syntax error: missing ')' at '<EOF>'",
            ),
            (
                &format!("{LOW})"),
                "CEL parse error: Syntax error: extraneous input ')' expecting <EOF>",
            ),
            (
                &format!("{LOW} | {HIGH}"),
                "CEL parse error: Syntax error: token recognition error at: '|'",
            ),
            (
                &format!("{LOW} {HIGH}"),
                "CEL parse error: Syntax error: extraneous input 'shardRange' expecting <EOF>",
            ),
            (
                "shardRange(object.metadata.uid; '0x00', '0x80')",
                "CEL parse error: Syntax error: token recognition error at: ';'",
            ),
            (
                "shardRange(object.metadata.uid, '0x00, '0x80')",
                "CEL parse error: Syntax error: token recognition error at: '''",
            ),
        ] {
            assert_eq!(
                ShardSelector::parse(text),
                Err(message.to_owned()),
                "{text}"
            );
        }
        let trailing = ShardSelector::parse(&format!("{LOW} ||")).unwrap_err();
        assert!(
            trailing.starts_with("CEL parse error: Syntax error: mismatched input '<EOF>'"),
            "{trailing}"
        );
        let deep = format!("{}{LOW}{}", "(".repeat(1_000), ")".repeat(1_000));
        assert!(
            ShardSelector::parse(&deep)
                .unwrap_err()
                .contains("nested deeper")
        );
        let negated = format!("{}{LOW}", "!".repeat(1_000));
        assert!(
            ShardSelector::parse(&negated)
                .unwrap_err()
                .contains("nested deeper")
        );
        let long = vec![LOW; 1_000].join(" || ");
        assert!(
            ShardSelector::parse(&long)
                .unwrap_err()
                .contains("longer than 10000 tokens")
        );
    }

    #[test]
    fn an_object_is_in_the_shard_its_fields_hash_falls_in() {
        let uid = "3f2a4c1e-9b7d-4e8a-a1c2-5d6e7f809a1b"; // hashes to 0xb29d…
        let obj = json!({"metadata": {"uid": uid, "namespace": "default"}});
        let high = ShardSelector::parse(HIGH).unwrap();
        let low = ShardSelector::parse(LOW).unwrap();
        assert!(high.matches(&obj) && !low.matches(&obj));
        let around = |start: u64, end: u128| {
            ShardSelector::parse(&format!(
                "shardRange(object.metadata.uid, '0x{start:016x}', '0x{end:016x}')"
            ))
            .unwrap()
            .matches(&obj)
        };
        let hash = 0xb29d_791d_d0c2_95f7_u64;
        assert!(around(hash, u128::from(hash) + 1), "start is in");
        assert!(!around(hash - 1, u128::from(hash)), "end is out");
        let namespace = |selector: &str| ShardSelector::parse(selector).unwrap();
        // "default" hashes to 0xebad…, "" (a cluster-scoped object's) to 0xcbf2….
        let top = namespace(
            "shardRange(object.metadata.namespace, '0xe000000000000000', '0x10000000000000000')",
        );
        assert!(top.matches(&obj));
        assert!(!top.matches(&json!({"metadata": {"name": "cluster-scoped"}})));
    }
}
