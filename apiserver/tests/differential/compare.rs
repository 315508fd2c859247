//! Where two normalised transcripts differ: each difference a location (`<step>: <JSON
//! pointer>`) with the value each server gave there.

use serde_json::Value;

/// One place where the servers answered differently.
pub(crate) struct Difference {
    /// `<step>: <JSON pointer into the step's record>`, the key of the known list.
    pub(crate) at: String,
    /// What the real kube-apiserver gave (`None`: nothing there).
    pub(crate) real: Option<Value>,
    /// What the dev cluster gave.
    pub(crate) dev: Option<Value>,
}

/// The differences of two transcripts, step by step.
pub(crate) fn transcripts(real: &[Value], dev: &[Value]) -> Vec<Difference> {
    let mut out = Vec::new();
    for index in 0..real.len().max(dev.len()) {
        let (r, d) = (real.get(index), dev.get(index));
        let step = r
            .or(d)
            .and_then(|s| s["step"].as_str())
            .unwrap_or("?")
            .to_string();
        match (r, d) {
            (Some(r), Some(d)) => values(r, d, &format!("{step}: "), &mut out),
            _ => out.push(Difference {
                at: format!("{step}: (the step)"),
                real: r.cloned(),
                dev: d.cloned(),
            }),
        }
    }
    out
}

/// The differences of two values below `at`. Arrays of strings differ as a whole (a set
/// of names, say); other arrays element by element, and by their length.
fn values(real: &Value, dev: &Value, at: &str, out: &mut Vec<Difference>) {
    match (real, dev) {
        (Value::Object(r), Value::Object(d)) => {
            let keys = r.keys().chain(d.keys().filter(|k| !r.contains_key(*k)));
            for key in keys {
                let at = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (r.get(key), d.get(key)) {
                    (Some(r), Some(d)) => values(r, d, &at, out),
                    (r, d) => out.push(Difference {
                        at,
                        real: r.cloned(),
                        dev: d.cloned(),
                    }),
                }
            }
        }
        (Value::Array(r), Value::Array(d)) if !all_strings(r) || !all_strings(d) => {
            for (index, (r, d)) in r.iter().zip(d).enumerate() {
                values(r, d, &format!("{at}/{index}"), out);
            }
            if r.len() != d.len() {
                out.push(Difference {
                    at: format!("{at}/(length)"),
                    real: Some(r.len().into()),
                    dev: Some(d.len().into()),
                });
            }
        }
        _ if real != dev => out.push(Difference {
            at: at.trim_end_matches(": ").to_string(),
            real: Some(real.clone()),
            dev: Some(dev.clone()),
        }),
        _ => {}
    }
}

fn all_strings(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(Value::is_string)
}

#[cfg(test)]
mod tests {
    use super::transcripts;
    use serde_json::json;

    #[test]
    fn a_difference_is_located_by_step_and_pointer() {
        let real = [json!({"step": "get", "status": 200, "body": {"a": 1, "b": [1, 2]}})];
        let dev = [json!({"step": "get", "status": 200, "body": {"a": 2, "c": "x", "b": [1]}})];
        let at: Vec<String> = transcripts(&real, &dev).into_iter().map(|d| d.at).collect();
        assert_eq!(
            at,
            ["get: /body/a", "get: /body/b/(length)", "get: /body/c"]
        );
    }
}
