//! What may differ between two correct servers, replaced by placeholders before bodies are
//! compared: uids, timestamps, resourceVersions, continue tokens, generated names' random
//! part, the server's own address, and the order of a Status's causes.

use serde_json::Value;

/// Normalises a body in place.
pub(crate) fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(prefix)), Some(Value::String(name))) =
                (map.get("generateName"), map.get("name"))
                && name.starts_with(prefix.as_str())
            {
                let generated = format!("{prefix}<random>");
                map.insert("name".into(), Value::String(generated));
            }
            // kube-apiserver's causes of one refusal come in no fixed order (a schema's
            // violations, say): compared as a set.
            if let Some(Value::Array(causes)) = map.get_mut("causes") {
                causes.sort_by_cached_key(Value::to_string);
            }
            for (key, member) in map.iter_mut() {
                if let Some(placeholder) = placeholder(key, member) {
                    *member = Value::String(placeholder.into());
                } else {
                    normalise(member);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::String(text) if is_timestamp(text) => *value = Value::String("<time>".into()),
        Value::String(text) => *text = in_text(text),
        _ => {}
    }
}

/// What the server chose, inside a message: uids, and the resourceVersions that messages
/// of precondition failures and expired watches name.
fn in_text(text: &str) -> String {
    let mut out = mask_uuids(text);
    for phrase in [
        "ResourceVersion in object meta: ",
        "too old resource version: ",
        "current resource version ",
        "the ResourceVersion in record (",
    ] {
        out = mask_number_after(&out, phrase);
    }
    out
}

/// Each UUID (8-4-4-4-12 hex digits) becomes `<uid>`.
fn mask_uuids(text: &str) -> String {
    let shape = |s: &[u8]| {
        s.len() >= 36
            && s[..36].iter().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => *c == b'-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let bytes = text.as_bytes();
    let (mut out, mut i) = (String::new(), 0);
    while i < bytes.len() {
        if shape(&bytes[i..]) {
            out.push_str("<uid>");
            i += 36;
        } else {
            let c = text[i..].chars().next().unwrap_or_default();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The digits right after each `phrase` become `<rv>` (and a parenthesised number after
/// them, as in "too old resource version: 5 (17)").
fn mask_number_after(text: &str, phrase: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(phrase) {
        let (before, after) = rest.split_at(at + phrase.len());
        out.push_str(before);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            rest = after;
            continue;
        }
        out.push_str("<rv>");
        rest = &after[digits..];
        if let Some(inner) = rest.strip_prefix(" (")
            && let Some(end) = inner.find(')')
            && end > 0
            && inner[..end].bytes().all(|b| b.is_ascii_digit())
        {
            out.push_str(" (<rv>)");
            rest = &inner[end + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// The placeholder of a member whose value is the server's to choose.
fn placeholder(key: &str, value: &Value) -> Option<&'static str> {
    let text = value.as_str().filter(|s| !s.is_empty())?;
    match key {
        "uid" => Some("<uid>"),
        "resourceVersion" => Some("<rv>"),
        "continue" => Some("<continue>"),
        "serverAddress" => Some("<address>"),
        _ if is_timestamp(text) => Some("<time>"),
        _ => None,
    }
}

/// RFC 3339 as Kubernetes writes it: `2026-12-07T22:30:44Z`, with or without fractions.
fn is_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && text.ends_with('Z')
        && b[..4].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::normalise;
    use serde_json::json;

    #[test]
    fn what_the_server_chooses_becomes_a_placeholder() {
        let mut body = json!({"metadata": {
            "name": "cm-x7k2p", "generateName": "cm-", "uid": "0c4f…",
            "resourceVersion": "17", "creationTimestamp": "2026-12-07T22:30:44Z",
            "managedFields": [{"time": "2026-12-07T22:30:44.123456Z", "manager": "kube"}],
            "labels": {"at": "not-a-time"}},
            "message": "UID in object meta: 0a4c65ac-284a-4da1-ab03-e38492e59b75, ResourceVersion in object meta: 27; too old resource version: 1 (17)"});
        normalise(&mut body);
        assert_eq!(
            body,
            json!({"metadata": {
                "name": "cm-<random>", "generateName": "cm-", "uid": "<uid>",
                "resourceVersion": "<rv>", "creationTimestamp": "<time>",
                "managedFields": [{"time": "<time>", "manager": "kube"}],
                "labels": {"at": "not-a-time"}},
                "message": "UID in object meta: <uid>, ResourceVersion in object meta: <rv>; too old resource version: <rv> (<rv>)"})
        );
    }
}
