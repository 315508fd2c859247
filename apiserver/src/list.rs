//! LIST: selectors, namespaces, `limit` and `continue`.

use crate::objects::{Scope, present};
use crate::selectors::Selectors;
use crate::status::ApiError;
use crate::store::Store;
use serde_json::{Value, json};

/// What a list request asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListParams {
    pub(crate) selectors: Selectors,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: Option<String>,
}

/// A continue token: where the previous page stopped and at which resourceVersion it was
/// listed. Opaque to clients (hex-encoded JSON).
fn encode_token(rv: u64, ns: &str, name: &str) -> String {
    let raw = json!({"rv": rv, "ns": ns, "name": name}).to_string();
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_token(t: &str) -> Option<(u64, String, String)> {
    if !t.len().is_multiple_of(2) || !t.is_ascii() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..t.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&t[i..i + 2], 16).ok())
        .collect();
    let v: Value = serde_json::from_slice(&bytes?).ok()?;
    Some((
        v.get("rv")?.as_u64()?,
        v.get("ns")?.as_str()?.to_string(),
        v.get("name")?.as_str()?.to_string(),
    ))
}

/// Builds the `<Kind>List`. Pages after the first carry the first page's resourceVersion
/// but read current data (kube serves them from that snapshot; here there is no MVCC).
pub(crate) fn list(store: &Store, scope: &Scope, params: &ListParams) -> Result<Value, ApiError> {
    let (rv, after) = match params.continue_token.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => {
            let (rv, ns, name) = decode_token(t).ok_or_else(|| {
                ApiError::bad_request("continue key is not valid: invalid continue token")
            })?;
            (rv, Some((ns, name)))
        }
        None => (store.rv(), None),
    };
    let matching = store
        .list(&scope.res(), scope.ns.as_deref())
        .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
        .filter(|(_, o)| params.selectors.matches(o));
    let limit = params.limit.filter(|l| *l > 0);
    let mut items = Vec::new();
    let mut last_key = None;
    for (k, o) in matching {
        if limit.is_some_and(|l| items.len() >= l) {
            break;
        }
        let mut item = present(&scope.rt, o);
        if !scope.rt.custom
            && let Some(m) = item.as_object_mut()
        {
            // kube's typed encoders leave kind/apiVersion out of built-in list items.
            m.remove("apiVersion");
            m.remove("kind");
        }
        items.push(item);
        last_key = Some(k.clone());
    }
    // Count what is left after the page, for `remainingItemCount` and the token.
    let remaining = if limit.is_some_and(|l| items.len() >= l) {
        let rest = store
            .list(&scope.res(), scope.ns.as_deref())
            .filter(|(k, _)| last_key.as_ref().is_none_or(|a| *k > a))
            .filter(|(_, o)| params.selectors.matches(o))
            .count();
        Some(rest)
    } else {
        None
    };
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let (Some(n), Some((ns, name))) = (remaining.filter(|n| *n > 0), &last_key) {
        metadata["continue"] = json!(encode_token(rv, ns, name));
        metadata["remainingItemCount"] = json!(n);
    } else if scope.rt.custom {
        // A custom resource's list is unstructured in kube-apiserver: it writes an empty
        // continue where a built-in's list leaves it out.
        metadata["continue"] = json!("");
    }
    if let Some(shard) = &params.selectors.shard {
        // kube echoes the shard, so a client knows the list is one shard of the whole.
        metadata["shardInfo"] = json!({"selector": shard.to_string()});
    }
    Ok(json!({
        "kind": format!("{}List", scope.rt.kind),
        "apiVersion": scope.rt.api_version(),
        "metadata": metadata,
        "items": items,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let t = encode_token(42, "ns", "a-b");
        assert_eq!(decode_token(&t), Some((42, "ns".into(), "a-b".into())));
        assert_eq!(decode_token("zz"), None);
        assert_eq!(decode_token("abc"), None);
        assert_eq!(decode_token("é1"), None);
    }
}
