//! Server-side apply: creating and changing by apply, managedFields, conflicts between
//! managers and `force`, and what an apply request must have.

use crate::run::{APPLY, MERGE, Run, rv};
use futures::future::BoxFuture;
use serde_json::{Value, json};

fn applied(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

pub(crate) fn apply(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let one = r.configmaps("applied");
        let by_a = format!("{one}?fieldManager=a");
        let first = r
            .patch(
                "apply creates",
                &by_a,
                APPLY,
                &applied("applied", json!({"x": "1"})),
            )
            .await;
        let again = r
            .patch(
                "apply the same again",
                &by_a,
                APPLY,
                &applied("applied", json!({"x": "1"})),
            )
            .await;
        r.note(
            "the same apply keeps the resourceVersion",
            json!(rv(&first) == rv(&again)),
        );
        r.patch(
            "apply drops a field it owned",
            &by_a,
            APPLY,
            &applied("applied", json!({"y": "2"})),
        )
        .await;
        r.patch(
            "merge by another manager",
            &format!("{one}?fieldManager=m"),
            MERGE,
            &json!({"data": {"z": "3"}}),
        )
        .await;
        r.patch(
            "apply without a fieldManager",
            &one,
            APPLY,
            &applied("applied", json!({})),
        )
        .await;
        let nameless = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": "1"}});
        r.patch(
            "apply without metadata.name",
            &format!("{one}?fieldManager=a"),
            APPLY,
            &nameless,
        )
        .await;
        r.patch(
            "apply with another name",
            &by_a,
            APPLY,
            &applied("other", json!({})),
        )
        .await;
        let no_kind = json!({"apiVersion": "v1", "metadata": {"name": "applied"}});
        r.patch("apply without kind", &by_a, APPLY, &no_kind).await;
        r.send_bytes("apply YAML", "PATCH", &by_a, APPLY, b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  y: '2'\n  w: '4'\n")
            .await;
    })
}

pub(crate) fn conflicts(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let one = r.configmaps("contested");
        let by_a = format!("{one}?fieldManager=a");
        let by_b = format!("{one}?fieldManager=b");
        r.patch(
            "a applies",
            &by_a,
            APPLY,
            &applied("contested", json!({"x": "1", "y": "1"})),
        )
        .await;
        r.patch(
            "b applies a field of a's",
            &by_b,
            APPLY,
            &applied("contested", json!({"x": "2"})),
        )
        .await;
        r.patch(
            "b applies the same value",
            &by_b,
            APPLY,
            &applied("contested", json!({"y": "1"})),
        )
        .await;
        r.patch(
            "b forces",
            &format!("{by_b}&force=true"),
            APPLY,
            &applied("contested", json!({"x": "2", "y": "1"})),
        )
        .await;
        r.patch(
            "force on a merge patch",
            &format!("{by_b}&force=true"),
            MERGE,
            &json!({}),
        )
        .await;
        let mut update = r.get("read", &one).await;
        update["data"]["x"] = json!("3");
        r.put(
            "an update takes x",
            &format!("{one}?fieldManager=u"),
            &update,
        )
        .await;
        r.patch(
            "b applies again",
            &by_b,
            APPLY,
            &applied("contested", json!({"x": "2", "y": "1"})),
        )
        .await;
    })
}
