//! Python's formatting (JSON, strings, durations), so records and messages match Kopf's byte for byte.
//!
//! Kopf writes its annotations with `json.dumps(value, separators=(',', ':'))`,
//! i.e. `ensure_ascii=True` and Python's float `repr`. Kapsel must write byte-identical
//! values so that a record written by one is recognised unchanged by the other, and so
//! that the diff-base of a migrated object does not look changed. Equality also follows
//! Python (`1 == 1.0 == True`), because that is how Kopf decides "no diff".

use std::fmt::Write as _;

use serde_json::Value;

/// `json.dumps(value, separators=(',', ':'))` as Python writes it (key order = insertion order).
pub(crate) fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else {
                out.push_str(&float_repr(n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k);
                out.push(':');
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal with Python's `ensure_ascii=True` escaping.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: shortest round-trip digits, scientific below 1e-4 and from 1e16.
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // `{:e}` gives the shortest round-trip digits as `d.ddde<exp>`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat(usize::try_from(-point).unwrap_or(0));
        format!("{sign}0.{zeros}{digits}")
    } else {
        let point = usize::try_from(point).unwrap_or(0);
        if digits.len() <= point {
            format!("{sign}{digits}{}.0", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    }
}

/// Python's `==` over JSON-like values: numbers compare by value, booleans equal 0/1.
pub(crate) fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        (Value::Bool(x), Value::Bool(y)) => x == y,
        _ => match (as_number(a), as_number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        #[expect(
            clippy::cast_precision_loss,
            reason = "Python compares int and float by value, too"
        )]
        Value::Number(n) => n.as_i64().map(|i| i as f64).or_else(|| n.as_f64()),
        _ => None,
    }
}

/// Python truthiness of a JSON value (`not x` is true).
pub(crate) fn falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Python's `repr(str)` for the handler names in Kopf's messages (`Handler 'x'`).
pub(crate) fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// How Python prints a number of seconds given by the user (`timeout=60` → `60`).
///
/// Guests pass seconds as floats; integral values are printed as integers because
/// that is what a Kopf user would have written in the decorator.
pub(crate) fn py_seconds(seconds: f64) -> String {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "only integral values in range are printed as ints"
    )]
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        format!("{}", seconds as i64)
    } else {
        float_repr(seconds)
    }
}

/// A time difference in seconds, with microsecond precision (Python's `total_seconds()`).
#[expect(
    clippy::cast_precision_loss,
    reason = "handler runtimes and delays are far below 2^52 µs"
)]
pub(crate) fn seconds(delta: chrono::TimeDelta) -> f64 {
    delta
        .num_microseconds()
        .map_or(f64::MAX, |us| us as f64 / 1e6)
}

/// Python's `str(timedelta)`: `H:MM:SS[.ffffff]`, with `N day(s), ` in front.
pub(crate) fn py_timedelta(delta: chrono::TimeDelta) -> String {
    let micros = delta.num_microseconds().unwrap_or(i64::MAX);
    let (days, rest) = (
        micros.div_euclid(86_400_000_000),
        micros.rem_euclid(86_400_000_000),
    );
    let (secs, frac) = (rest / 1_000_000, rest % 1_000_000);
    let mut out = String::new();
    if days != 0 {
        let _ = write!(
            out,
            "{days} day{}, ",
            if days.abs() == 1 { "" } else { "s" }
        );
    }
    let _ = write!(
        out,
        "{}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    if frac != 0 {
        let _ = write!(out, ".{frac:06}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_like_python() {
        // Expected strings produced by `json.dumps(v, separators=(',',':'))` in Python 3.11.
        assert_eq!(
            dumps(&json!({"b": 1, "a": [true, null, "x"]})),
            r#"{"b":1,"a":[true,null,"x"]}"#
        );
        assert_eq!(
            dumps(&json!("ä€😀\n\u{1}")),
            r#""\u00e4\u20ac\ud83d\ude00\n\u0001""#
        );
        assert_eq!(dumps(&json!(1.5)), "1.5");
        assert_eq!(dumps(&json!(2.0)), "2.0");
        assert_eq!(dumps(&json!(1e16)), "1e+16");
        assert_eq!(dumps(&json!(1.25e-5)), "1.25e-05");
        assert_eq!(dumps(&json!(0.0001)), "0.0001");
        assert_eq!(dumps(&json!(123456789012345.6)), "123456789012345.6");
        assert_eq!(dumps(&json!(-0.5)), "-0.5");
        assert_eq!(dumps(&json!("\u{7f}")), r#""\u007f""#);
    }

    #[test]
    fn equality_like_python() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(py_eq(&json!({"a": [1, 2]}), &json!({"a": [1.0, 2]})));
        assert!(!py_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn reprs() {
        assert_eq!(py_repr_str("create_fn"), "'create_fn'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_seconds(60.0), "60");
        assert_eq!(py_seconds(1.5), "1.5");
    }
}
