//! The fake Kubernetes API behind [`kapsel::api`](crate::api) in native tests:
//! an in-memory store of objects, per thread, that answers as an API server and
//! the real host would.
//!
//! - Seed objects with [`insert`], read them back with [`get`] and [`objects`];
//!   check the calls a handler made with [`calls`]; script a failure with
//!   [`fail_next`].
//! - Calls outside the crate's `permit!` declarations are refused with 403
//!   `Forbidden` (all of them when the crate declares none), as the host does.
//! - Missing objects answer 404 `NotFound`; creating a taken name 409
//!   `AlreadyExists`. `create` fills `metadata.uid` and `metadata.resourceVersion`
//!   (a counter); `patch` is a JSON merge patch and bumps the resourceVersion;
//!   `list` filters by namespace and equality-based label selectors (`a=b`,
//!   `a==b`, `a!=b`, `a`, `!a`; others answer 400 `BadRequest`).
//! - A resource is found by its kind (any case), its lowercased kind (singular)
//!   or its plural (the lowercased kind plus `s`, `es` after `s`/`x`/`ch`/`sh`,
//!   `-y` → `-ies`); the fake knows no short names or categories. A type is known
//!   once an object of it was inserted or created (`create` of an unknown type
//!   needs the body's `apiVersion` and `kind`); listing an unknown type answers
//!   no items.
//! - A type is namespaced when its first object has a namespace (when created
//!   without one: unless its kind is a well-known cluster-scoped one such as
//!   `Namespace` or `Node`). Calls without a namespace on a namespaced type act in
//!   the current object's namespace: the namespace of the last
//!   [`cause()`](super::cause) built on this thread, or [`set_current_namespace`];
//!   without one, in `default`, as in the host.
//!
//! [`reset`](super::reset) forgets everything.

pub use crate::host::fake::api::{
    Call, calls, fail_next, get, insert, objects, set_current_namespace,
};

#[cfg(test)]
mod tests {
    // The fake through the SDK's own `Api`, as a guest's native test drives it: here,
    // above both, so that the fake itself does not depend on the layers it serves.
    use serde_json::json;

    use super::*;
    use crate::api::{Api, ApiError};

    crate::permit!(
        "v1",
        "configmaps",
        verbs = ["get", "list", "create", "patch", "delete"]
    );
    crate::permit!(group = "kopf.dev", kind = "KopfExample", verbs = ["list"]);

    #[test]
    fn behaves_like_an_api_server() {
        crate::testing::reset();
        set_current_namespace(Some("here"));
        let cms = Api::new("v1", "configmaps");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "a", "labels": {"app": "x"}}, "data": {"k": "1"}});
        let created = cms.create(&body).unwrap();
        assert_eq!(created["metadata"]["namespace"], "here");
        assert_eq!(created["metadata"]["resourceVersion"], "1");
        assert!(created["metadata"]["uid"].is_string());
        assert_eq!(cms.create(&body).unwrap_err().reason, "AlreadyExists");
        let elsewhere = cms.clone().namespace("there");
        let error = elsewhere.create(&body).unwrap();
        assert_eq!(error["metadata"]["namespace"], "there");
        let mismatch = json!({"metadata": {"name": "b", "namespace": "other"}});
        assert_eq!(elsewhere.create(&mismatch).unwrap_err().code, 400);

        assert_eq!(cms.get("a").unwrap()["data"]["k"], "1");
        assert!(elsewhere.get("missing").unwrap_err().is_not_found());
        let patched = cms
            .patch(
                "a",
                &json!({"data": {"k": null, "j": "2"}, "metadata": {"name": "z"}}),
            )
            .unwrap();
        assert_eq!(patched["data"], json!({"j": "2"}));
        assert_eq!(patched["metadata"]["name"], "a");
        assert_ne!(
            patched["metadata"]["resourceVersion"],
            created["metadata"]["resourceVersion"]
        );

        assert_eq!(cms.list(None).unwrap().len(), 2);
        assert_eq!(
            cms.clone()
                .namespace("here")
                .list(Some("app=x"))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(cms.list(Some("app!=x")).unwrap().len(), 0);
        let kinds = Api::of(&patched).list(None).unwrap();
        assert_eq!(kinds[0]["kind"], "ConfigMap");
        assert_eq!(cms.list(Some("a in (b)")).unwrap_err().reason, "BadRequest");

        insert(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                      "metadata": {"name": "k", "namespace": "here"}}));
        assert_eq!(
            Api::new("kopf.dev/v1", "kopfexamples")
                .list(None)
                .unwrap()
                .len(),
            1
        );
        assert!(
            Api::new("kopf.dev/v1", "kopfexample")
                .get("k")
                .unwrap_err()
                .is_forbidden()
        );

        cms.delete("a").unwrap();
        assert!(cms.delete("a").unwrap_err().is_not_found());
        assert!(get("v1", "ConfigMap", Some("here"), "a").is_none());
        assert!(get("v1", "ConfigMap", Some("there"), "a").is_some());
        assert_eq!(objects().len(), 2);
        let verbs: Vec<String> = calls().into_iter().map(|c| c.verb).collect();
        assert_eq!(verbs[..4], ["create", "create", "create", "create"]);
    }

    #[test]
    fn undeclared_calls_are_forbidden() {
        crate::testing::reset();
        let error = Api::namespaced("v1", "secrets", "ns").get("x").unwrap_err();
        assert_eq!((error.code, error.reason.as_str()), (403, "Forbidden"));
        assert!(
            error
                .message
                .contains(r#"kapsel::permit!("v1", "secrets", verbs = ["get"]);"#),
            "{}",
            error.message
        );
        assert_eq!(calls()[0].target, "secrets.v1");
        fail_next("get", ApiError::new(500, "InternalError", "boom"));
        assert_eq!(Api::new("v1", "secrets").get("x").unwrap_err().code, 500);
        assert_eq!(Api::new("v1", "secrets").get("x").unwrap_err().code, 403);
    }
}
