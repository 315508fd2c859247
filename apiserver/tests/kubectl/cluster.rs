//! kubectl on what a cluster has from the start and its control plane's APIs: the
//! `kubernetes` Service, `get cs`, `certificate approve|deny`, and their discovery.

use crate::support::*;

const CSR: &str = r#"
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: NAME}
spec: {request: Zm9v, signerName: example.com/signer, usages: [client auth]}
"#;

#[tokio::test]
async fn kubectl_sees_the_control_planes_apis() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "cluster");
    let port = k
        .ok(&[
            "get",
            "service",
            "kubernetes",
            "-o",
            "jsonpath={.spec.ports[0].targetPort}",
        ])
        .await;
    assert_eq!(port, server.addr().port().to_string());
    let cs = k.run(&["get", "componentstatuses"]).await;
    let stdout = String::from_utf8_lossy(&cs.stdout);
    let stderr = String::from_utf8_lossy(&cs.stderr);
    assert!(cs.status.success(), "{stderr}");
    assert!(
        stderr.contains("v1 ComponentStatus is deprecated in v1.19+"),
        "{stderr}"
    );
    let etcd = stdout
        .lines()
        .find(|l| l.starts_with("etcd-0"))
        .expect("an etcd-0 row");
    assert_eq!(
        etcd.split_whitespace().collect::<Vec<_>>(),
        ["etcd-0", "Healthy", "ok"]
    );
    for name in ["approved", "denied"] {
        k.ok_stdin(&["create", "-f", "-"], &CSR.replace("NAME", name))
            .await;
    }
    let out = k.ok(&["certificate", "approve", "approved"]).await;
    assert!(out.contains("approved"), "{out}");
    k.ok(&["certificate", "deny", "denied"]).await;
    let conditions = k
        .json(&["get", "csr", "approved", "denied", "-o", "json"])
        .await;
    let types: Vec<&str> = conditions["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|c| {
            c.pointer("/status/conditions/0/type")
                .and_then(|t| t.as_str())
        })
        .collect();
    assert_eq!(types, ["Approved", "Denied"]);
    let resources = k.ok(&["api-resources", "-o", "name"]).await;
    for name in [
        "componentstatuses",
        "endpointslices.discovery.k8s.io",
        "tokenreviews.authentication.k8s.io",
        "certificatesigningrequests.certificates.k8s.io",
    ] {
        assert!(
            resources.lines().any(|l| l == name),
            "{name} in {resources}"
        );
    }
}
