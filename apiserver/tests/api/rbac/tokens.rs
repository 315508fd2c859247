//! Authentication: the admin token of the server's kubeconfig, static tokens, and
//! ServiceAccount tokens from the TokenRequest API, valid only while their account lives;
//! 401 for tokens that are not valid.

use super::*;
use crate::assert_status;

const TOKEN_PATH: &str = "/api/v1/namespaces/ops/serviceaccounts/kapsel/token";

#[tokio::test]
async fn a_token_that_is_not_valid_gets_401() {
    let (server, admin) = start_rbac().await;
    // The kubeconfig's admin may do anything.
    admin.apiserver_version().await.unwrap();
    let r = as_token(
        &server,
        &server.admin_token(),
        "GET",
        "/api/v1/secrets",
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    for token in ["nope", "a.b.c", &format!("{}x", server.admin_token())] {
        let r = as_token(&server, token, "GET", "/healthz", None).await;
        assert_status(&r, 401, "Unauthorized");
        assert_eq!(r.json()["message"], "Unauthorized");
    }
}

#[tokio::test]
async fn token_requests_issue_tokens_for_the_api_server() {
    let (server, _admin) = start_rbac().await;
    service_account(&server, "ops", "kapsel").await;
    let admin = server.admin_token();
    let r = as_token(
        &server,
        &admin,
        "POST",
        TOKEN_PATH,
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let v = r.json();
    assert_eq!(v["kind"], "TokenRequest");
    assert_eq!(v["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        v["spec"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(v["metadata"]["namespace"], "ops");
    assert!(
        v["status"]["expirationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let token = v["status"]["token"].as_str().unwrap().to_string();
    // A JWT with kube's claims.
    let claims = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, claims).unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:ops:kapsel");
    assert_eq!(claims["kubernetes.io"]["serviceaccount"]["name"], "kapsel");
    let r = as_token(&server, &token, "GET", "/api", None).await;
    assert_eq!(r.code, 200, "{}", r.body);

    // Too short a life; another audience (issued, but not for this server).
    let r = as_token(
        &server,
        &admin,
        "POST",
        TOKEN_PATH,
        Some(json!({"spec": {"expirationSeconds": 60}})),
    )
    .await;
    assert_status(&r, 422, "Invalid");
    assert_eq!(
        r.json()["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
    );
    let r = as_token(
        &server,
        &admin,
        "POST",
        TOKEN_PATH,
        Some(json!({"spec": {"audiences": ["vault"]}})),
    )
    .await;
    let other = r.json()["status"]["token"].as_str().unwrap().to_string();
    assert_status(
        &as_token(&server, &other, "GET", "/api", None).await,
        401,
        "Unauthorized",
    );
    // No such account.
    let r = as_token(
        &server,
        &admin,
        "POST",
        "/api/v1/namespaces/ops/serviceaccounts/nobody/token",
        Some(json!({})),
    )
    .await;
    assert_status(&r, 404, "NotFound");
    // Asking for a token is itself authorized: an account may not mint another's.
    let r = as_token(&server, &token, "POST", TOKEN_PATH, Some(json!({}))).await;
    assert_forbidden(
        &r,
        r#"serviceaccounts "kapsel" is forbidden: User "system:serviceaccount:ops:kapsel" cannot create resource "serviceaccounts/token" in API group "" in the namespace "ops""#,
    );
}

#[tokio::test]
async fn a_deleted_or_recreated_account_s_token_stops_working() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    let admin = server.admin_token();
    assert_eq!(
        as_token(&server, &token, "GET", "/api", None).await.code,
        200
    );
    let r = as_token(
        &server,
        &admin,
        "DELETE",
        "/api/v1/namespaces/ops/serviceaccounts/kapsel",
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_status(
        &as_token(&server, &token, "GET", "/api", None).await,
        401,
        "Unauthorized",
    );
    // The same name again is another account (another uid): the old token stays dead.
    admin_create(
        &server,
        "/api/v1/namespaces/ops/serviceaccounts",
        json!({"metadata": {"name": "kapsel"}}),
    )
    .await;
    assert_status(
        &as_token(&server, &token, "GET", "/api", None).await,
        401,
        "Unauthorized",
    );
    let fresh = server
        .service_account_token("ops", "kapsel", Duration::from_secs(600))
        .unwrap();
    assert_eq!(
        as_token(&server, &fresh, "GET", "/api", None).await.code,
        200
    );
    assert!(
        server
            .service_account_token("ops", "nobody", Duration::from_secs(600))
            .is_err()
    );
}

#[tokio::test]
async fn static_tokens_name_users_and_groups() {
    let config = Config::default().static_token("alice-token", "alice", ["devs"]);
    let (server, _admin) = start_rbac_with(config).await;
    admin_create(
        &server,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"metadata": {"name": "devs"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]}),
    )
    .await;
    let r = as_token(&server, "alice-token", "GET", "/api/v1/secrets", None).await;
    assert_eq!(r.code, 200, "{}", r.body);
}

#[tokio::test]
async fn tokens_and_the_admin_token_outlive_a_restart_with_a_state_file() {
    let dir = std::env::temp_dir().join(format!(
        "kapsel-apiserver-{}-rbac-restart",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state");
    let _ = std::fs::remove_file(&path);
    let (server, _admin) = start_rbac_with(Config::default().state_file(&path)).await;
    let token = service_account(&server, "ops", "kapsel").await;
    let admin = server.admin_token();
    server.shutdown().await.unwrap();

    let (server, _admin) = start_rbac_with(Config::default().state_file(&path)).await;
    assert_eq!(server.admin_token(), admin);
    assert_eq!(
        as_token(&server, &token, "GET", "/api", None).await.code,
        200
    );
    // The default roles are not created twice.
    let r = as_token(
        &server,
        &admin,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    )
    .await;
    let names: Vec<String> = r.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "cluster-admin",
            "system:auth-delegator",
            "system:basic-user",
            "system:discovery",
            "system:public-info-viewer"
        ]
    );
    server.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn token_reviews_need_the_auth_delegator_role() {
    let (server, _client) = start_rbac().await;
    let proxy = service_account(&server, "proxy", "proxy").await;
    let reviewed = service_account(&server, "apps", "app").await;
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": reviewed}});
    let refused = as_token(&server, &proxy, "POST", path, Some(review.clone())).await;
    assert_forbidden(
        &refused,
        "tokenreviews.authentication.k8s.io is forbidden: User \"system:serviceaccount:proxy:proxy\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope",
    );
    bind(
        &server,
        None,
        "proxy-delegator",
        "ClusterRole",
        "system:auth-delegator",
        ("proxy", "proxy"),
    )
    .await;
    let answer = as_token(&server, &proxy, "POST", path, Some(review)).await;
    assert_eq!(answer.code, 201, "{}", answer.body);
    assert_eq!(
        answer.json()["status"]["user"]["username"],
        "system:serviceaccount:apps:app"
    );
}
