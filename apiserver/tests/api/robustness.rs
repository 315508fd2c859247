//! Odd and hostile request bodies: every answer is a Status or a success, never a hang or a
//! dropped connection, and the server keeps serving.

use super::*;
use serde_json::json;

/// A small deterministic generator (xorshift), so failures reproduce.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }

    fn value(&mut self, depth: u32) -> Value {
        match self.next() % if depth > 3 { 6 } else { 8 } {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64),
            3 => json!(-1.5e300),
            4 => json!(*self.pick(&["", "a", "ü-名前", "A_b", "-x", "x/y", "a.b.c", "\u{0}"])),
            5 => json!("z".repeat((self.next() % 400) as usize)),
            6 => Value::Array(
                (0..self.next() % 4)
                    .map(|_| self.value(depth + 1))
                    .collect(),
            ),
            _ => {
                let keys = [
                    "metadata",
                    "name",
                    "labels",
                    "annotations",
                    "finalizers",
                    "ownerReferences",
                    "spec",
                    "status",
                    "data",
                    "apiVersion",
                    "kind",
                    "namespace",
                    "generateName",
                    "resourceVersion",
                    "uid",
                    "$patch",
                    "containers",
                ];
                let mut m = serde_json::Map::new();
                for _ in 0..self.next() % 5 {
                    m.insert(self.pick(&keys).to_string(), self.value(depth + 1));
                }
                Value::Object(m)
            }
        }
    }
}

#[tokio::test]
async fn hostile_bodies_get_status_answers() {
    let (server, _client) = start().await;
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        kopf_crd(),
    )
    .await;
    post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "t"}}),
    )
    .await;
    post(
        &server,
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
        json!({"metadata": {"name": "t"}}),
    )
    .await;
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    let targets = [
        ("POST", "/api/v1/namespaces/default/configmaps"),
        ("POST", "/api/v1/namespaces"),
        ("POST", "/api/v1/namespaces/default/pods"),
        ("POST", "/apis/kopf.dev/v1/namespaces/default/kopfexamples"),
        (
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        ),
        ("PUT", "/api/v1/namespaces/default/configmaps/t"),
        (
            "PUT",
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples/t/status",
        ),
        ("PATCH", "/api/v1/namespaces/default/configmaps/t"),
        (
            "PATCH",
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples/t",
        ),
        (
            "PATCH",
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples/t/status",
        ),
        ("DELETE", "/api/v1/namespaces/default/configmaps/t"),
    ];
    let cts = [
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
    ];
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    for i in 0..300 {
        let (method, path) = *g.pick(&targets);
        let ct = *g.pick(&cts);
        let body = match i % 10 {
            0 => deep.clone().into_bytes(),
            1 => (0..g.next() % 64).map(|_| g.next() as u8).collect(),
            2 => json!([{"op": "add", "path": "/metadata/labels/x", "value": g.value(0)}])
                .to_string()
                .into_bytes(),
            _ => g.value(0).to_string().into_bytes(),
        };
        let r = raw(&server, method, path, Some(ct), &body).await;
        assert!(
            [200, 201, 400, 403, 404, 405, 409, 413, 415, 422].contains(&r.code),
            "{method} {path} {ct}: {} {}",
            r.code,
            r.body
        );
        let v = r.json();
        if r.code >= 400 {
            assert_eq!(v["kind"], "Status", "{}", r.body);
        }
        // Recreate what a successful delete removed, so later requests have a target.
        if method == "DELETE" && r.code == 200 {
            post(
                &server,
                "/api/v1/namespaces/default/configmaps",
                json!({"metadata": {"name": "t"}}),
            )
            .await;
        }
    }
    assert_eq!(get(&server, "/version").await.code, 200);
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/configmaps")
            .await
            .code,
        200
    );
}
