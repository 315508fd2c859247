//! [`OperatorMemo`]: Kopf's operator-wide `memo` — what startup handlers (and the
//! embedding application) leave for every later call. Activities share it; an object's
//! memo starts as it, until a handler of the object leaves a memo of its own.
//!
//! Kopf's memo is one Python object that concurrent handlers change in place; here each
//! call gets the memo as JSON and returns it whole. So that two startup handlers running
//! at once both keep what they set, a call's changes are applied key by key (the
//! top-level keys it added, changed or removed since it was called) onto the memo as it
//! is when the call returns.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};

/// The operator-wide memo (JSON), shared by every part of one operator.
#[derive(Clone, Debug, Default)]
pub(crate) struct OperatorMemo(Arc<Mutex<Option<String>>>);

impl OperatorMemo {
    fn lock(&self) -> MutexGuard<'_, Option<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The memo as it is now.
    pub(crate) fn get(&self) -> Option<String> {
        self.lock().clone()
    }

    /// A call that was given `given` returned `returned`: its changes, applied to the
    /// memo as it is now.
    pub(crate) fn update(&self, given: Option<&str>, returned: &str) {
        let mut memo = self.lock();
        let merged = match (parse_object(given), parse_object(Some(returned))) {
            (Some(given), Some(returned)) => {
                let mut current = parse_object(memo.as_deref()).unwrap_or_default();
                apply_changes(&mut current, &given, returned);
                Value::Object(current).to_string()
            }
            // Not a mapping on either side: the returned memo as it is.
            _ => returned.to_owned(),
        };
        *memo = Some(merged);
    }
}

/// A JSON object's fields; `None` for anything else. No memo yet is an empty object.
fn parse_object(text: Option<&str>) -> Option<Map<String, Value>> {
    match text.map(serde_json::from_str::<Value>) {
        None | Some(Ok(Value::Null)) => Some(Map::new()),
        Some(Ok(Value::Object(fields))) => Some(fields),
        Some(_) => None,
    }
}

/// The keys `returned` added, changed or removed against `given`, applied to `current`.
fn apply_changes(
    current: &mut Map<String, Value>,
    given: &Map<String, Value>,
    returned: Map<String, Value>,
) {
    for key in given.keys() {
        if !returned.contains_key(key) {
            current.remove(key);
        }
    }
    for (key, value) in returned {
        if given.get(&key) != Some(&value) {
            current.insert(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(memo: &OperatorMemo) -> Value {
        serde_json::from_str(&memo.get().unwrap_or_default()).unwrap_or(Value::Null)
    }

    #[test]
    fn concurrent_calls_keep_each_others_keys() {
        let memo = OperatorMemo::default();
        memo.update(None, &json!({"shared": 1, "old": true}).to_string());
        let given = memo.get();
        // Two startup handlers got the same memo; each sets its own key.
        memo.update(
            given.as_deref(),
            &json!({"shared": 1, "old": true, "a": "A"}).to_string(),
        );
        memo.update(
            given.as_deref(),
            &json!({"shared": 2, "b": "B"}).to_string(),
        );
        assert_eq!(value(&memo), json!({"shared": 2, "a": "A", "b": "B"}));
    }

    #[test]
    fn a_first_memo_and_a_memo_that_is_no_mapping_are_taken_whole() {
        let memo = OperatorMemo::default();
        memo.update(None, &json!({"a": 1}).to_string());
        assert_eq!(value(&memo), json!({"a": 1}));
        let given = memo.get();
        memo.update(given.as_deref(), "[1, 2]");
        assert_eq!(value(&memo), json!([1, 2]));
    }
}
