//! kubectl against a server with RBAC on: the admin kubeconfig, `kubectl create token`,
//! a ServiceAccount's token with `--token`, kube's 403 as kubectl prints it, `kubectl auth
//! can-i` and `kubectl auth whoami` (as the account, and as the admin impersonating it
//! with `--as`).

use crate::support::*;
use kapsel_apiserver::{ApiServer, Config};

#[tokio::test]
async fn kubectl_with_rbac() {
    let bin = find_kubectl();
    let server = ApiServer::start(Config::default().rbac(true))
        .await
        .expect("start the embedded API server");
    let k = Kubectl::new(bin, &server, "rbac");
    k.ok(&["create", "namespace", "ops"]).await;
    k.ok(&["create", "serviceaccount", "kapsel", "-n", "ops"])
        .await;
    k.ok(&[
        "create",
        "role",
        "cm",
        "--verb=get,list,watch",
        "--resource=configmaps",
        "-n",
        "ops",
    ])
    .await;
    k.ok(&[
        "create",
        "rolebinding",
        "cm",
        "--role=cm",
        "--serviceaccount=ops:kapsel",
        "-n",
        "ops",
    ])
    .await;
    k.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=a=1",
        "-n",
        "ops",
    ])
    .await;

    let token = k
        .ok(&["create", "token", "kapsel", "-n", "ops", "--duration=20m"])
        .await;
    let token = format!("--token={}", token.trim());
    let out = k
        .ok(&[&token, "get", "configmaps", "-n", "ops", "-o", "name"])
        .await;
    assert_eq!(out.trim(), "configmap/settings");

    let out = k.run(&[&token, "get", "secrets", "-n", "ops"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:ops:kapsel" cannot list resource "secrets" in API group "" in the namespace "ops""#),
        "{stderr}"
    );
    let out = k
        .run(&[&token, "delete", "configmap", "settings", "-n", "ops"])
        .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"configmaps "settings" is forbidden: User "system:serviceaccount:ops:kapsel" cannot delete resource "configmaps" in API group "" in the namespace "ops""#),
        "{stderr}"
    );

    // can-i, as the account itself and as the admin acting as it.
    let sa = "--as=system:serviceaccount:ops:kapsel";
    for who in [token.as_str(), sa] {
        let out = k
            .run(&[who, "auth", "can-i", "watch", "configmaps", "-n", "ops"])
            .await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "yes",
            "{who}: {out:?}"
        );
        let out = k
            .run(&[who, "auth", "can-i", "get", "secrets", "-n", "ops"])
            .await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "no",
            "{who}: {out:?}"
        );
        assert!(!out.status.success());
    }
    let out = k
        .ok(&[sa, "get", "configmaps", "-n", "ops", "-o", "name"])
        .await;
    assert_eq!(out.trim(), "configmap/settings");
    // The account may not act as anyone else.
    let out = k
        .run(&[&token, "--as=someone", "get", "configmaps", "-n", "ops"])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"users "someone" is forbidden: User "system:serviceaccount:ops:kapsel" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{stderr}"
    );

    // whoami (a SelfSubjectReview): the user as the server knows it, with its groups;
    // the admin acting as the account is the account.
    for who in [token.as_str(), sa] {
        let out = k.json(&[who, "auth", "whoami"]).await;
        assert_eq!(out["kind"], "SelfSubjectReview", "{out}");
        assert_eq!(out["apiVersion"], "authentication.k8s.io/v1");
        let user = &out["status"]["userInfo"];
        assert_eq!(
            user["username"], "system:serviceaccount:ops:kapsel",
            "{out}"
        );
        let groups = user["groups"].as_array().expect("groups");
        for group in [
            "system:serviceaccounts",
            "system:serviceaccounts:ops",
            "system:authenticated",
        ] {
            assert!(groups.iter().any(|g| g == group), "{group}: {out}");
        }
    }
    let out = k.ok(&["auth", "whoami"]).await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("Username") && l.ends_with("kapsel-admin")),
        "{out}"
    );
    assert!(out.contains("system:masters"), "{out}");

    // Once the account is deleted, its token is refused.
    k.ok(&["delete", "serviceaccount", "kapsel", "-n", "ops"])
        .await;
    let out = k.run(&[&token, "get", "configmaps", "-n", "ops"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Unauthorized"), "{stderr}");
    server.shutdown().await.expect("shutdown");
}

/// Without RBAC the server's kubeconfig has no credentials: `kubectl auth whoami` says the
/// caller is anonymous, as kube-apiserver does for a request without any.
#[tokio::test]
async fn kubectl_whoami_without_rbac_is_anonymous() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "whoami");
    let out = k.json(&["auth", "whoami"]).await;
    let user = &out["status"]["userInfo"];
    assert_eq!(user["username"], "system:anonymous", "{out}");
    assert_eq!(
        user["groups"],
        serde_json::json!(["system:unauthenticated"])
    );
    server.shutdown().await.expect("shutdown");
}
