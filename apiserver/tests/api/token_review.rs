//! TokenReviews (`authentication.k8s.io/v1`): a token reviewed by the server's own
//! authentication, as kube-apiserver answers webhook authenticators and proxies.

use super::*;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

async fn review(server: &ApiServer, spec: Value) -> Value {
    let answer = post(
        server,
        PATH,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}),
    )
    .await;
    assert_eq!(answer.code, 201, "{}", answer.body);
    answer.json()
}

#[tokio::test]
async fn a_service_account_token_is_its_account() {
    let (server, client) = start().await;
    let sa = post(
        &server,
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "robot"}}),
    )
    .await
    .json();
    let token = server
        .service_account_token("default", "robot", Duration::from_secs(3600))
        .expect("a token");
    // Through kube-rs's typed client.
    let reviewed = Api::<TokenReview>::all(client)
        .create(
            &PostParams::default(),
            &TokenReview {
                spec: TokenReviewSpec {
                    token: token.clone(),
                    audiences: None,
                },
                ..Default::default()
            },
        )
        .await
        .expect("a review");
    let status = serde_json::to_value(reviewed.status.expect("a status")).expect("JSON");
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!([ISSUER]));
    let user = &status["user"];
    assert_eq!(user["username"], "system:serviceaccount:default:robot");
    assert_eq!(user["uid"], sa["metadata"]["uid"]);
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let id = user["extra"]["authentication.kubernetes.io/credential-id"][0].as_str();
    assert!(id.is_some_and(|id| id.starts_with("JTI=")), "{user}");
    // Once the account is gone, so is the token.
    let gone = raw(
        &server,
        "DELETE",
        "/api/v1/namespaces/default/serviceaccounts/robot",
        None,
        b"",
    )
    .await;
    assert_eq!(gone.code, 200);
    let status = &review(&server, json!({"token": token})).await["status"];
    assert_eq!(
        status,
        &json!({"user": {}, "error": "serviceaccounts \"robot\" not found"})
    );
}

#[tokio::test]
async fn the_admins_token_is_the_admin_and_a_bad_one_is_nobody() {
    let (server, _client) = start().await;
    let status = &review(&server, json!({"token": server.admin_token()})).await["status"];
    assert_eq!(
        status,
        &json!({"authenticated": true, "audiences": [ISSUER],
                "user": {"username": "kapsel-admin", "groups": ["system:masters", "system:authenticated"]}})
    );
    let answer = review(&server, json!({"token": "not-a-token"})).await;
    assert_eq!(answer["kind"], "TokenReview");
    assert_eq!(answer["spec"]["token"], "not-a-token");
    assert_eq!(
        answer["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );
    // The admin's token is for the API server only.
    let status = &review(
        &server,
        json!({"token": server.admin_token(), "audiences": ["vault"]}),
    )
    .await["status"];
    assert_eq!(
        status,
        &json!({"user": {}, "error": "invalid bearer token"})
    );
}

#[tokio::test]
async fn a_token_is_reviewed_for_the_audiences_asked() {
    let (server, _client) = start().await;
    post(
        &server,
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "robot"}}),
    )
    .await;
    let issued = post(
        &server,
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        json!({"spec": {"audiences": ["vault", "other"]}}),
    )
    .await
    .json();
    let token = issued["status"]["token"].as_str().expect("a token");
    let status = &review(
        &server,
        json!({"token": token, "audiences": ["vault", "nats"]}),
    )
    .await["status"];
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["vault"]));
    let status = &review(&server, json!({"token": token})).await["status"];
    assert_eq!(
        status["error"],
        format!(
            "token audiences [\"vault\" \"other\"] is invalid for the target audiences [\"{ISSUER}\"]"
        )
    );
    assert_eq!(status.get("authenticated"), None);
}

#[tokio::test]
async fn a_review_without_a_token_is_refused_and_discovery_lists_reviews() {
    let (server, _client) = start().await;
    let answer = post(
        &server,
        PATH,
        json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "spec": {}}),
    )
    .await;
    assert_eq!(answer.code, 400);
    assert_eq!(
        answer.json()["message"],
        "token is required for TokenReview in authentication"
    );
    assert_eq!(get(&server, PATH).await.code, 405);
    let list = get(&server, "/apis/authentication.k8s.io/v1").await.json();
    let names: Vec<(&str, &Value)> = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| (r["name"].as_str().unwrap_or(""), &r["verbs"]))
        .collect();
    assert_eq!(
        names,
        [
            ("selfsubjectreviews", &json!(["create"])),
            ("tokenreviews", &json!(["create"]))
        ]
    );
}
