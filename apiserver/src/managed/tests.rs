//! Unit tests of field ownership on built-in and custom types.

use super::*;
use serde_json::json;

fn configmaps() -> ResourceType {
    crate::builtins::builtins()
        .into_iter()
        .find(|t| t.plural == "configmaps")
        .expect("configmaps")
}

fn who(m: &str) -> Who {
    Who {
        manager: m.into(),
        subresource: None,
        user: None,
    }
}

#[test]
fn conflict_messages_name_fields_and_managers() {
    let rt = configmaps();
    let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1", "y": "2"}});
    let live = apply(&rt, None, &a, &who("alpha"), false).unwrap();
    let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "9"}});
    let e = apply(&rt, Some(&live), &b, &who("beta"), false).unwrap_err();
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alpha\": .data.x"
    );
    let both = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "9", "y": "8"}});
    let e = apply(&rt, Some(&live), &both, &who("beta"), false).unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"alpha\":\n- .data.x\n- .data.y"
    );
    let causes = &e.details.as_ref().unwrap()["causes"];
    assert_eq!(
        causes[0],
        json!({"reason": "FieldManagerConflict", "message": "conflict with \"alpha\"", "field": ".data.x"})
    );
}
