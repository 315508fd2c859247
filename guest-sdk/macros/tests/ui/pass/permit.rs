//! `permit!` with the handler attributes' selector forms, and the fake API
//! enforcing what was declared.

use kapsel::api::Api;
use kapsel::json;

kapsel::permit!(
    "v1",
    "configmaps",
    verbs = ["get", "list", "create", "patch", "delete"]
);
kapsel::permit!("kopf.dev", "v1", "kopfexamples", verbs = ["get"]);
kapsel::permit!("deployments.apps", verbs = ["list", "watch"]);
kapsel::permit!(group = "", version = "v1", kind = "Secret", verbs = ["get"],);

mod nested {
    kapsel::permit!("kex", verbs = ["patch"]);
}

fn main() {
    let sel = |group: Option<&str>, version: Option<&str>, name: kapsel::Value| json!({"group": group, "version": version, "name": name});
    // In declaration order (file, line), whatever the link order.
    assert_eq!(
        kapsel::testing::permissions(),
        [
            json!({"target": sel(Some(""), Some("v1"), json!({"any": "configmaps"})),
                   "verbs": ["get", "list", "create", "patch", "delete"]}),
            json!({"target": sel(Some("kopf.dev"), Some("v1"), json!({"any": "kopfexamples"})),
                   "verbs": ["get"]}),
            json!({"target": sel(Some("apps"), None, json!({"any": "deployments"})),
                   "verbs": ["list", "watch"]}),
            json!({"target": sel(Some(""), Some("v1"), json!({"kind": "Secret"})),
                   "verbs": ["get"]}),
            json!({"target": sel(None, None, json!({"any": "kex"})), "verbs": ["patch"]}),
        ]
    );

    let secrets = Api::namespaced("v1", "secrets", "ns");
    assert!(secrets.get("token").unwrap_err().is_not_found());
    let denied = secrets.delete("token").unwrap_err();
    assert!(denied.is_forbidden(), "{denied}");
    assert!(
        denied
            .message
            .contains(r#"kapsel::permit!("v1", "secrets", verbs = ["delete"]);"#)
    );
    assert!(Api::new("v1", "configmaps").list(None).unwrap().is_empty());
}
