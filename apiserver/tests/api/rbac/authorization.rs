//! Authorization: an account may do exactly what its bindings grant, where they grant it,
//! and gets kube's 403 for the rest; watches are authorized as a whole; discovery works
//! with the default roles only.

use super::*;
use crate::assert_status;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

const SA: &str = "system:serviceaccount:ops:kapsel";

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}})).unwrap()
}

#[tokio::test]
async fn a_role_grants_exactly_its_rules_in_its_namespace() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    role(&server, Some("ops"), "cm", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}])).await;
    bind(&server, Some("ops"), "cm", "Role", "cm", ("ops", "kapsel")).await;
    let client = client_with_token(&server, &token).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ops");
    cms.create(&PostParams::default(), &cm("x")).await.unwrap();
    cms.get("x").await.unwrap();
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    let s = status_of(
        cms.patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await,
    );
    assert_eq!(s.code, 403);
    assert_eq!(
        s.message,
        format!(
            r#"configmaps "x" is forbidden: User "{SA}" cannot patch resource "configmaps" in API group "" in the namespace "ops""#
        )
    );
    let s = status_of(cms.delete("x", &Default::default()).await);
    assert!(
        s.message.contains("cannot delete resource \"configmaps\""),
        "{}",
        s.message
    );
    // Not in another namespace, not across namespaces, not another resource.
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let s = status_of(elsewhere.list(&ListParams::default()).await);
    assert_eq!(
        s.message,
        format!(
            r#"configmaps is forbidden: User "{SA}" cannot list resource "configmaps" in API group "" in the namespace "default""#
        )
    );
    let all: Api<ConfigMap> = Api::all(client.clone());
    let s = status_of(all.list(&ListParams::default()).await);
    assert_eq!(
        s.message,
        format!(
            r#"configmaps is forbidden: User "{SA}" cannot list resource "configmaps" in API group "" at the cluster scope"#
        )
    );
    let secrets: Api<Secret> = Api::namespaced(client, "ops");
    assert_eq!(
        status_of(secrets.list(&ListParams::default()).await).code,
        403
    );
    // The raw answer is kube's Status, with details.
    let r = as_token(
        &server,
        &token,
        "DELETE",
        "/api/v1/namespaces/ops/configmaps/x",
        None,
    )
    .await;
    assert_status(&r, 403, "Forbidden");
    assert_eq!(
        r.json()["details"],
        json!({"name": "x", "kind": "configmaps"})
    );
}

#[tokio::test]
async fn a_cluster_role_bound_in_a_namespace_grants_only_there() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    admin_create(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "other"}}),
    )
    .await;
    role(
        &server,
        None,
        "pod-reader",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
    )
    .await;
    bind(
        &server,
        Some("other"),
        "read",
        "ClusterRole",
        "pod-reader",
        ("ops", "kapsel"),
    )
    .await;
    let client = client_with_token(&server, &token).await;
    let there: Api<Pod> = Api::namespaced(client.clone(), "other");
    there.list(&ListParams::default()).await.unwrap();
    let home: Api<Pod> = Api::namespaced(client.clone(), "ops");
    assert_eq!(status_of(home.list(&ListParams::default()).await).code, 403);
    let all: Api<Pod> = Api::all(client);
    let s = status_of(all.list(&ListParams::default()).await);
    assert!(s.message.ends_with("at the cluster scope"), "{}", s.message);

    // A binding to a role that does not exist says so in the reason.
    bind(
        &server,
        Some("ops"),
        "dangling",
        "Role",
        "missing",
        ("ops", "kapsel"),
    )
    .await;
    let r = as_token(&server, &token, "GET", "/api/v1/namespaces/ops/pods", None).await;
    assert_forbidden(
        &r,
        &format!(
            r#"pods is forbidden: User "{SA}" cannot list resource "pods" in API group "" in the namespace "ops": RBAC: role.rbac.authorization.k8s.io "missing" not found"#
        ),
    );
}

#[tokio::test]
async fn resource_names_limit_rules_to_named_objects() {
    let (server, admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    let cms: Api<ConfigMap> = Api::namespaced(admin, "ops");
    for name in ["mine", "theirs"] {
        cms.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    role(&server, Some("ops"), "one", json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["get", "patch", "list"]}])).await;
    bind(
        &server,
        Some("ops"),
        "one",
        "Role",
        "one",
        ("ops", "kapsel"),
    )
    .await;
    let client = client_with_token(&server, &token).await;
    let sa_cms: Api<ConfigMap> = Api::namespaced(client, "ops");
    sa_cms.get("mine").await.unwrap();
    sa_cms
        .patch(
            "mine",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await
        .unwrap();
    let s = status_of(sa_cms.get("theirs").await);
    assert!(
        s.message.starts_with(r#"configmaps "theirs" is forbidden"#),
        "{}",
        s.message
    );
    // A list names no object, unless a field selector names exactly one.
    assert_eq!(
        status_of(sa_cms.list(&ListParams::default()).await).code,
        403
    );
    let one = sa_cms
        .list(&ListParams::default().fields("metadata.name=mine"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
}

#[tokio::test]
async fn a_status_rule_allows_the_subresource_without_the_resource() {
    let (server, admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    let pods: Api<Pod> = Api::namespaced(admin, "ops");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    role(
        &server,
        Some("ops"),
        "status",
        json!([{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}]),
    )
    .await;
    bind(
        &server,
        Some("ops"),
        "status",
        "Role",
        "status",
        ("ops", "kapsel"),
    )
    .await;
    let client = client_with_token(&server, &token).await;
    let sa_pods: Api<Pod> = Api::namespaced(client, "ops");
    let patch = Patch::Merge(json!({"status": {"phase": "Running"}}));
    sa_pods
        .patch_status("p", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let s = status_of(
        sa_pods
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
            )
            .await,
    );
    assert_eq!(
        s.message,
        format!(
            r#"pods "p" is forbidden: User "{SA}" cannot patch resource "pods" in API group "" in the namespace "ops""#
        )
    );
    let s = status_of(sa_pods.get_status("p").await);
    assert_eq!(
        s.message,
        format!(
            r#"pods "p" is forbidden: User "{SA}" cannot get resource "pods/status" in API group "" in the namespace "ops""#
        )
    );
}

#[tokio::test]
async fn list_does_not_grant_watch_and_a_watch_sees_only_its_scope() {
    let (server, admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    admin_create(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "other"}}),
    )
    .await;
    role(
        &server,
        Some("ops"),
        "list",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
    )
    .await;
    bind(
        &server,
        Some("ops"),
        "list",
        "Role",
        "list",
        ("ops", "kapsel"),
    )
    .await;
    let client = client_with_token(&server, &token).await;
    let sa_cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ops");
    sa_cms.list(&ListParams::default()).await.unwrap();
    let s = status_of(sa_cms.watch(&WatchParams::default(), "0").await.map(|_| ()));
    assert_eq!(
        s.message,
        format!(
            r#"configmaps is forbidden: User "{SA}" cannot watch resource "configmaps" in API group "" in the namespace "ops""#
        )
    );

    role(
        &server,
        Some("ops"),
        "watch",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}]),
    )
    .await;
    bind(
        &server,
        Some("ops"),
        "watch",
        "Role",
        "watch",
        ("ops", "kapsel"),
    )
    .await;
    // Across namespaces: refused as a whole, not filtered.
    let all: Api<ConfigMap> = Api::all(client);
    let s = status_of(all.watch(&WatchParams::default(), "0").await.map(|_| ()));
    assert!(
        s.message.ends_with(
            "cannot watch resource \"configmaps\" in API group \"\" at the cluster scope"
        ),
        "{}",
        s.message
    );
    // In its namespace: the events of that namespace only.
    let rv = sa_cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = sa_cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    Api::<ConfigMap>::namespaced(admin.clone(), "other")
        .create(&PostParams::default(), &cm("hidden"))
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(admin, "ops")
        .create(&PostParams::default(), &cm("seen"))
        .await
        .unwrap();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Added(c)) => assert_eq!(c.metadata.name.as_deref(), Some("seen")),
        other => panic!("expected the ADDED of ops/seen, got {other:?}"),
    }
}

#[tokio::test]
async fn discovery_works_with_the_default_roles_only() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    let client = client_with_token(&server, &token).await;
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.groups().any(|g| g.name() == "apps"));
    client.apiserver_version().await.unwrap();
    for path in [
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/openapi/v2",
        "/openapi/v3",
        "/version",
        "/healthz",
    ] {
        let r = as_token(&server, &token, "GET", path, None).await;
        assert_eq!(r.code, 200, "{path}: {}", r.body);
    }
    // Not the root's list of paths, and no resource.
    let r = as_token(&server, &token, "GET", "/", None).await;
    assert_forbidden(
        &r,
        &format!(r#"forbidden: User "{SA}" cannot get path "/""#),
    );
    assert_eq!(r.json()["details"], json!({}));
    let r = as_token(&server, &token, "GET", "/api/v1/namespaces/ops/pods", None).await;
    assert_eq!(r.code, 403);

    // Anonymous requests: public information only.
    for path in ["/healthz", "/version", "/readyz", "/livez"] {
        assert_eq!(crate::get(&server, path).await.code, 200, "{path}");
    }
    let r = crate::get(&server, "/api").await;
    assert_forbidden(
        &r,
        r#"forbidden: User "system:anonymous" cannot get path "/api""#,
    );
    let r = crate::get(&server, "/api/v1/namespaces/default/configmaps").await;
    assert_forbidden(
        &r,
        r#"configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "default""#,
    );
}

#[tokio::test]
async fn aggregated_cluster_roles_hold_the_rules_they_select() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    admin_create(
        &server,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "bundle"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"bundle": "yes"}}]}, "rules": []}),
    )
    .await;
    bind(
        &server,
        Some("ops"),
        "bundle",
        "ClusterRole",
        "bundle",
        ("ops", "kapsel"),
    )
    .await;
    let r = as_token(
        &server,
        &token,
        "GET",
        "/api/v1/namespaces/ops/secrets",
        None,
    )
    .await;
    assert_eq!(r.code, 403);
    admin_create(
        &server,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "part", "labels": {"bundle": "yes"}}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}),
    )
    .await;
    let r = as_token(
        &server,
        &token,
        "GET",
        "/api/v1/namespaces/ops/secrets",
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
}

#[tokio::test]
async fn self_subject_access_reviews_answer_for_the_requester() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    role(
        &server,
        Some("ops"),
        "cm",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    )
    .await;
    bind(&server, Some("ops"), "cm", "Role", "cm", ("ops", "kapsel")).await;
    let review = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"namespace": "ops", "verb": verb, "resource": resource}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let r = as_token(
        &server,
        &token,
        "POST",
        path,
        Some(review("get", "configmaps")),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["status"]["allowed"], true);
    let r = as_token(
        &server,
        &token,
        "POST",
        path,
        Some(review("get", "secrets")),
    )
    .await;
    assert_eq!(r.json()["status"]["allowed"], false);
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    let admin = format!("Bearer {}", server.admin_token());
    let path = "/api/v1/namespaces/ops/configmaps";
    // The admin acting as the account has the account's rights (none here).
    let as_sa = [("Authorization", admin.as_str()), ("Impersonate-User", SA)];
    let r = crate::raw_with(&server, "GET", path, None, &as_sa, b"").await;
    assert_forbidden(
        &r,
        &format!(
            r#"configmaps is forbidden: User "{SA}" cannot list resource "configmaps" in API group "" in the namespace "ops""#
        ),
    );
    // The account may not act as anyone.
    let bearer = format!("Bearer {token}");
    let as_admin = [
        ("Authorization", bearer.as_str()),
        ("Impersonate-User", "kapsel-admin"),
        ("Impersonate-Group", "system:masters"),
    ];
    let r = crate::raw_with(&server, "GET", path, None, &as_admin, b"").await;
    assert_forbidden(
        &r,
        &format!(
            r#"users "kapsel-admin" is forbidden: User "{SA}" cannot impersonate resource "users" in API group "" at the cluster scope"#
        ),
    );
    // Granted `impersonate` on that user but not on the group: still refused.
    role(&server, None, "imp", json!([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["kapsel-admin"]}])).await;
    bind(
        &server,
        None,
        "imp",
        "ClusterRole",
        "imp",
        ("ops", "kapsel"),
    )
    .await;
    let r = crate::raw_with(&server, "GET", path, None, &as_admin, b"").await;
    assert_forbidden(
        &r,
        &format!(
            r#"groups "system:masters" is forbidden: User "{SA}" cannot impersonate resource "groups" in API group "" at the cluster scope"#
        ),
    );
    let as_user = [
        ("Authorization", bearer.as_str()),
        ("Impersonate-User", "kapsel-admin"),
    ];
    let r = crate::raw_with(&server, "GET", path, None, &as_user, b"").await;
    assert_forbidden(
        &r,
        r#"configmaps is forbidden: User "kapsel-admin" cannot list resource "configmaps" in API group "" in the namespace "ops""#,
    );
}
