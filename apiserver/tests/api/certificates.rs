//! CertificateSigningRequests (`certificates.k8s.io/v1`): stored, approved or denied
//! through `approval` (only the conditions change, checked as kube checks them), signed
//! through `status`.

use super::*;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

async fn create(server: &ApiServer, name: &str) -> Value {
    let created = post(
        server,
        CSRS,
        json!({"metadata": {"name": name}, "spec": {"request": "Zm9v", "signerName": "example.com/signer", "usages": ["client auth"]}}),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    created.json()
}

async fn put(server: &ApiServer, path: &str, body: &Value) -> Raw {
    raw(
        server,
        "PUT",
        path,
        Some("application/json"),
        body.to_string().as_bytes(),
    )
    .await
}

#[tokio::test]
async fn approval_changes_only_the_conditions() {
    let (server, _client) = start().await;
    let mut csr = create(&server, "a").await;
    csr["spec"]["signerName"] = json!("example.com/other");
    csr["status"] = json!({"certificate": "Zm9v", "conditions": [
        {"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]});
    let approval = format!("{CSRS}/a/approval");
    let answer = put(&server, &approval, &csr).await;
    assert_eq!(answer.code, 200, "{}", answer.body);
    let approved = answer.json();
    assert_eq!(approved["spec"]["signerName"], "example.com/signer");
    assert_eq!(approved["status"].get("certificate"), None);
    let condition = &approved["status"]["conditions"][0];
    assert_eq!(
        (&condition["type"], &condition["reason"]),
        (&json!("Approved"), &json!("Test"))
    );
    assert!(condition["lastUpdateTime"].is_string() && condition["lastTransitionTime"].is_string());
    // Denied beside Approved, and taking Approved back, are refused.
    let mut both = approved.clone();
    both["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(json!({"type": "Denied", "status": "True"}));
    let refused = put(&server, &approval, &both).await;
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.json()["message"],
        "CertificateSigningRequest.certificates.k8s.io \"a\" is invalid: status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
    );
    let mut none = approved.clone();
    none["status"]["conditions"] = json!([]);
    let refused = put(&server, &approval, &none).await;
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.json()["message"],
        "CertificateSigningRequest.certificates.k8s.io \"a\" is invalid: status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
    );
    // The signer writes the certificate through status.
    let mut signed = approved.clone();
    signed["status"]["certificate"] = json!("Y2VydA==");
    let answer = put(&server, &format!("{CSRS}/a/status"), &signed).await;
    assert_eq!(answer.code, 200, "{}", answer.body);
    let stored = get(&server, &format!("{CSRS}/a")).await.json();
    assert_eq!(stored["status"]["certificate"], "Y2VydA==");
    assert_eq!(stored["status"]["conditions"][0]["type"], "Approved");
}

#[tokio::test]
async fn a_denial_through_kube_rs_and_kubes_condition_checks() {
    let (server, client) = start().await;
    create(&server, "b").await;
    let api = Api::<CertificateSigningRequest>::all(client);
    let patch =
        json!({"status": {"conditions": [{"type": "Denied", "status": "True", "reason": "No"}]}});
    let denied = api
        .patch_approval("b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("a denial");
    let conditions = denied.status.and_then(|s| s.conditions).unwrap_or_default();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, "Denied");
    create(&server, "c").await;
    let mut csr = get(&server, &format!("{CSRS}/c")).await.json();
    csr["status"] =
        json!({"conditions": [{"type": "Approved", "status": "False"}, {"type": "Custom"}]});
    let refused = put(&server, &format!("{CSRS}/c/approval"), &csr).await;
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.json()["message"],
        "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\", status.conditions[1].status: Required value"
    );
    let discovered = get(&server, "/apis/certificates.k8s.io/v1").await.json();
    let names: Vec<&str> = discovered["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "certificatesigningrequests",
            "certificatesigningrequests/approval",
            "certificatesigningrequests/status"
        ]
    );
}

#[tokio::test]
async fn the_requester_is_who_sends_it_and_the_spec_stays() {
    let (server, client) = start_with(Config::default().rbac(true)).await;
    let api = Api::<CertificateSigningRequest>::all(client);
    let body: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"request": "Zm9v", "signerName": "example.com/signer", "username": "mallory", "groups": ["system:masters"]},
        "status": {"conditions": [{"type": "Approved", "status": "True"}]},
    }))
    .expect("a CSR");
    let created = api
        .create(&Default::default(), &body)
        .await
        .expect("created");
    let created = serde_json::to_value(created).expect("JSON");
    assert_eq!(created["spec"]["username"], "kapsel-admin");
    assert_eq!(
        created["spec"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(created.get("status"), None, "{created}");
    let mut changed: CertificateSigningRequest = serde_json::from_value(created).expect("a CSR");
    changed.spec.signer_name = "example.com/other".into();
    let replaced = api
        .replace("d", &Default::default(), &changed)
        .await
        .expect("replaced");
    assert_eq!(replaced.spec.signer_name, "example.com/signer");
    drop(server);
}

#[tokio::test]
async fn status_writes_the_certificate_but_not_the_approval() {
    let (server, _client) = start().await;
    let mut csr = create(&server, "e").await;
    csr["status"] =
        json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Test"}]});
    let approved = put(&server, &format!("{CSRS}/e/approval"), &csr)
        .await
        .json();
    let status = format!("{CSRS}/e/status");
    // A status update that rewrites the approval keeps the stored one.
    let mut rewritten = approved.clone();
    rewritten["status"]["conditions"][0]["reason"] = json!("Forged");
    rewritten["status"]["certificate"] = json!("Y2VydA==");
    let answer = put(&server, &status, &rewritten).await;
    assert_eq!(answer.code, 200, "{}", answer.body);
    let signed = answer.json();
    assert_eq!(signed["status"]["conditions"][0]["reason"], "Test");
    assert_eq!(signed["status"]["certificate"], "Y2VydA==");
    let mut denied = signed.clone();
    denied["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(json!({"type": "Denied", "status": "True"}));
    denied["status"]["certificate"] = json!("b3RoZXI=");
    let refused = put(&server, &status, &denied).await;
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.json()["message"],
        "CertificateSigningRequest.certificates.k8s.io \"e\" is invalid: status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive, status.conditions: Forbidden: updates may not add a condition of type \"Denied\", status.certificate: Forbidden: updates may not modify existing certificate content"
    );
}
