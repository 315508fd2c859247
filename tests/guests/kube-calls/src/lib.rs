//! A guest for the host's tests of Kubernetes calls from handlers, on
//! `kopfexamples`. It may call `configmaps` (every verb but watch) and nothing else.
//!
//! - `make_child` (on create): creates the ConfigMap `<name>-child` in the object's
//!   namespace (relying on the current-object namespace for the call, and naming it
//!   in the body too), labelled `kapsel.dev/parent: <name>`, with `data.size` the
//!   object's `spec.size` as text (`"0"` when missing); reads it back, patches
//!   `data.patched: "yes"` into it, lists the object's namespace by that label, and
//!   returns `{"child": <name>-child, "size": <data.size read back>, "listed": <count>}`
//!   (in `status.make_child`).
//! - `peek_secret` (on create): tries to get a Secret, which it never declared, and
//!   returns `{"code": <code>, "reason": <reason>, "message": <message>}` of the refusal
//!   (`{"code": 200, "reason": "Allowed"}` if the host wrongly allowed it).
//! - `read_settings` (on update): reads the ConfigMap `settings` of the object's
//!   namespace, which nothing watches, and returns its `data`.
//! - `remove_child` (on delete): deletes `<name>-child`; a missing child is fine.
//! - `announce` (on startup, about no object): creates the ConfigMap `kube-calls-started`
//!   without naming a namespace, so it lands in `default`; an existing one is fine.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-kube-calls`
//! (the component is `target/wasm32-wasip2/release/kube_calls.wasm`).

use kapsel::api::Api;
use kapsel::{Cause, Value, json};

kapsel::permit!(
    "v1",
    "configmaps",
    verbs = ["get", "list", "create", "patch", "delete"]
);

/// The label that ties a child ConfigMap to its parent.
const PARENT_LABEL: &str = "kapsel.dev/parent";

fn child_name(cause: &Cause) -> String {
    format!("{}-child", cause.name().unwrap_or_default())
}

/// ConfigMaps in the object's namespace, named explicitly where there is one.
fn configmaps_here(cause: &Cause) -> Api {
    let configmaps = Api::new("v1", "configmaps");
    match cause.namespace() {
        Some(namespace) => configmaps.namespace(namespace),
        None => configmaps,
    }
}

/// `spec.size` as ConfigMap data (which holds strings only).
fn size_text(cause: &Cause) -> String {
    match cause.spec().get("size") {
        None | Some(Value::Null) => "0".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

#[kapsel::on::create("kopfexamples")]
fn make_child(cause: &Cause) -> kapsel::Result<Value> {
    let parent = cause.name().unwrap_or_default();
    let name = child_name(cause);
    let mut metadata = json!({"name": name, "labels": {PARENT_LABEL: parent}});
    if let Some(namespace) = cause.namespace() {
        metadata["namespace"] = json!(namespace);
    }
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"size": size_text(cause)},
    });
    // No namespace on the Api: the host uses the current object's (or the body's).
    Api::new("v1", "configmaps").create(&body)?;

    let configmaps = configmaps_here(cause);
    let child = configmaps.get(&name)?;
    let size = child.pointer("/data/size").cloned().unwrap_or(Value::Null);
    configmaps.patch(&name, &json!({"data": {"patched": "yes"}}))?;
    let selector = format!("{PARENT_LABEL}={parent}");
    let listed = configmaps.list(Some(&selector))?.len();
    Ok(json!({"child": name, "size": size, "listed": listed}))
}

#[kapsel::on::create("kopfexamples", id = "peek_secret")]
fn peek_secret(cause: &Cause) -> Value {
    let namespace = cause.namespace().unwrap_or("default");
    match Api::namespaced("v1", "secrets", namespace).get("anything") {
        Ok(_) => json!({"code": 200, "reason": "Allowed"}),
        Err(error) => json!({"code": error.code, "reason": error.reason, "message": error.message}),
    }
}

#[kapsel::on::update("kopfexamples")]
fn read_settings(cause: &Cause) -> kapsel::Result<Value> {
    let settings = configmaps_here(cause).get("settings")?;
    Ok(settings.get("data").cloned().unwrap_or(Value::Null))
}

#[kapsel::on::startup]
fn announce() -> kapsel::Result<()> {
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-calls-started"},
        "data": {},
    });
    match Api::new("v1", "configmaps").create(&body) {
        Err(error) if error.is_already_exists() => Ok(()),
        other => Ok(other.map(drop)?),
    }
}

#[kapsel::on::delete("kopfexamples")]
fn remove_child(cause: &Cause) -> kapsel::Result<()> {
    match configmaps_here(cause).delete(&child_name(cause)) {
        Err(error) if error.is_not_found() => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use kapsel::api::ApiError;
    use kapsel::testing::{self, Outcome};
    use kapsel::{Reason, json};

    use super::*;

    fn example(spec: Value) -> Cause {
        testing::cause()
            .handler_id("make_child")
            .changing(Reason::Create)
            .body(json!({
                "apiVersion": "kopf.dev/v1",
                "kind": "KopfExample",
                "metadata": {"name": "ex", "namespace": "ns"},
                "spec": spec,
            }))
            .build()
    }

    #[test]
    fn declares_configmaps_only() {
        assert_eq!(
            testing::permissions(),
            [json!({
                "target": {"group": "", "version": "v1", "name": {"any": "configmaps"}},
                "verbs": ["get", "list", "create", "patch", "delete"],
            })]
        );
        let ids: Vec<Value> = testing::registrations()
            .into_iter()
            .map(|r| r["id"].clone())
            .collect();
        assert_eq!(
            ids,
            [
                "make_child",
                "peek_secret",
                "read_settings",
                "announce",
                "remove_child"
            ]
        );
    }

    #[test]
    fn make_child_creates_patches_and_lists() {
        testing::reset();
        // Another parent's child in the same namespace must not be listed.
        testing::api::insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "other-child", "namespace": "ns",
                         "labels": {"kapsel.dev/parent": "other"}}}));
        let cause = example(json!({"size": 3}));
        let result = make_child(&cause).unwrap();
        assert_eq!(
            result,
            json!({"child": "ex-child", "size": "3", "listed": 1})
        );

        let child = testing::api::get("v1", "ConfigMap", Some("ns"), "ex-child").unwrap();
        assert_eq!(child["data"], json!({"size": "3", "patched": "yes"}));
        assert_eq!(child["metadata"]["labels"]["kapsel.dev/parent"], "ex");
        let calls = testing::api::calls();
        let verbs: Vec<&str> = calls.iter().map(|c| c.verb.as_str()).collect();
        assert_eq!(verbs, ["create", "get", "patch", "list"]);
        assert_eq!(calls[0].namespace, None);
        assert_eq!(calls[0].body["metadata"]["namespace"], "ns");
        assert_eq!(
            calls[3].label_selector.as_deref(),
            Some("kapsel.dev/parent=ex")
        );

        // Through the registry, as the host calls it; a second create is refused.
        let mut again = example(json!({}));
        let reply = testing::invoke(&mut again);
        assert!(
            matches!(&reply.outcome, Outcome::Failed(m) if m.contains("AlreadyExists")),
            "{reply:?}"
        );
    }

    #[test]
    fn make_child_defaults_the_size() {
        testing::reset();
        let result = make_child(&example(json!({}))).unwrap();
        assert_eq!(result["size"], "0");
    }

    #[test]
    fn peek_secret_is_forbidden() {
        testing::reset();
        let refused = peek_secret(&example(json!({})));
        assert_eq!(
            (&refused["code"], &refused["reason"]),
            (&json!(403), &json!("Forbidden"))
        );
        // The fake host names the declaration to add, as the real one does.
        assert!(
            refused["message"]
                .as_str()
                .is_some_and(|m| m.contains("kapsel::permit!(\"v1\", \"secrets\"")),
            "{refused}"
        );
        let calls = testing::api::calls();
        assert_eq!(
            (calls[0].verb.as_str(), calls[0].target.as_str()),
            ("get", "secrets.v1")
        );
    }

    #[test]
    fn read_settings_returns_the_data() {
        testing::reset();
        testing::api::insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "ns"}, "data": {"level": "2"}}));
        assert_eq!(
            read_settings(&example(json!({}))).unwrap(),
            json!({"level": "2"})
        );
    }

    #[test]
    fn announce_lands_in_default_once() {
        testing::reset();
        testing::api::set_current_namespace(None);
        announce().unwrap();
        announce().unwrap();
        assert!(
            testing::api::get("v1", "ConfigMap", Some("default"), "kube-calls-started").is_some()
        );
    }

    #[test]
    fn remove_child_tolerates_not_found() {
        testing::reset();
        let cause = example(json!({"size": 1}));
        make_child(&cause).unwrap();
        remove_child(&cause).unwrap();
        assert!(testing::api::get("v1", "ConfigMap", Some("ns"), "ex-child").is_none());
        // Already gone: still fine.
        remove_child(&cause).unwrap();
        // Other errors are errors.
        testing::api::fail_next("delete", ApiError::new(409, "Conflict", "busy"));
        assert!(remove_child(&cause).is_err());
    }
}
