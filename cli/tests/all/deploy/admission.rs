//! Deploying admission webhooks: `kubectl apply --server-side -k deploy/admission/` on an
//! API server that enforces RBAC, and the host run as its Deployment's container says,
//! with the RBAC `kapsel rbac` wrote and no more: it generates its certificate into a
//! Secret, writes the two webhook configurations pointing at the overlay's Service with
//! that certificate's CA bundle, and answers, under the Service's DNS name, as the API
//! server calling it through the Service would be answered; and, once the Service has
//! Endpoints naming the operator, kubectl's writes are admitted through it.

use serde_json::{Value, json};

use super::support::*;

/// The managed configurations' name (the Deployment's `--admission-managed`).
const MANAGED: &str = "kopfexamples.kapsel.dev";

#[tokio::test(flavor = "multi_thread")]
async fn the_admission_overlay_serves_its_webhooks_behind_its_service_on_its_rbac() {
    let cluster = Cluster::start("admission").await;
    let staged = stage_deploy(&cluster.scratch.0);
    let crd = kapsel_tests::workspace().join("examples/manifests/kopfexamples-crd.yaml");
    cluster
        .kubectl_ok(&["apply", "-f", &crd.display().to_string()])
        .await;
    let overlay = staged.join("admission");
    let applied = cluster
        .kubectl_ok(&[
            "apply",
            "--server-side",
            "-k",
            &overlay.display().to_string(),
        ])
        .await;

    // Its RBAC: the framework's, its configurations, and its Secret in its namespace.
    let rbac = "rbac.authorization.k8s.io/v1";
    let cluster_role = cluster.get(rbac, "clusterroles", None, "kapsel").await;
    let cluster_role = cluster_role.unwrap_or_else(|| panic!("{applied}"));
    assert_eq!(
        rules(&cluster_role),
        [
            ("", "events", "create"),
            (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
                "create"
            ),
            (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations:kopfexamples.kapsel.dev",
                "patch"
            ),
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                "create"
            ),
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations:kopfexamples.kapsel.dev",
                "patch"
            ),
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "list,watch"
            ),
        ]
        .map(|(g, r, v)| (g.to_owned(), r.to_owned(), v.to_owned()))
    );
    let role = cluster.get(rbac, "roles", Some("kapsel"), "kapsel").await;
    assert_eq!(
        rules(&role.expect("a Role in the operator's namespace")),
        [
            ("", "secrets", "create"),
            (
                "",
                "secrets:kopfexamples.kapsel.dev-admission-tls",
                "get,update"
            )
        ]
        .map(|(g, r, v)| (g.to_owned(), r.to_owned(), v.to_owned()))
    );

    // The Service: port 443 to the container's webhook port, on the operator's pods.
    let service = cluster
        .get("v1", "services", Some("kapsel"), "kapsel-admission")
        .await
        .unwrap_or_else(|| panic!("the Service: {applied}"));
    let deployment = cluster
        .get("apps/v1", "deployments", Some("kapsel"), "kapsel")
        .await
        .unwrap();
    let template = &deployment["spec"]["template"];
    let selector = service["spec"]["selector"].as_object().unwrap();
    assert!(!selector.is_empty());
    for (label, value) in selector {
        assert_eq!(&template["metadata"]["labels"][label], value, "{label}");
    }
    let port = &service["spec"]["ports"][0];
    assert_eq!(port["port"], 443);
    let container = &template["spec"]["containers"][0];
    let target = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port["targetPort"])
        .unwrap_or_else(|| panic!("no container port {}", port["targetPort"]));
    assert_eq!(target["containerPort"], 9443);

    let mut pod = Pod::start(&cluster, "kapsel", "kapsel").await;
    pod.wait_for_log("The operator is running").await;
    pod.wait_for_log("Serving admission webhooks on https://")
        .await;

    // The certificate, generated into its Secret in the operator's namespace.
    let secret = eventually("the certificate's Secret", || {
        let name = format!("{MANAGED}-admission-tls");
        let cluster = &cluster;
        async move { cluster.get("v1", "secrets", Some("kapsel"), &name).await }
    })
    .await;
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let ca = base64_decode(secret["data"]["ca.crt"].as_str().expect("ca.crt"));
    assert!(secret["data"]["tls.crt"].is_string() && secret["data"]["tls.key"].is_string());

    // The configurations: a webhook per handler, calling the Service with the CA bundle.
    let mut paths = Vec::new();
    for (plural, handler) in [
        ("validatingwebhookconfigurations", "check-field"),
        ("mutatingwebhookconfigurations", "mark-seen"),
    ] {
        let configuration = eventually(plural, || async {
            let found = cluster
                .get("admissionregistration.k8s.io/v1", plural, None, MANAGED)
                .await?;
            (found["webhooks"].as_array()?.len() == 1).then_some(found)
        })
        .await;
        let webhook = &configuration["webhooks"][0];
        assert_eq!(webhook["name"], format!("{handler}.{MANAGED}"));
        assert_eq!(webhook["rules"][0]["resources"], json!(["kopfexamples"]));
        let client = &webhook["clientConfig"];
        let service = &client["service"];
        assert_eq!(
            (&service["namespace"], &service["name"], &service["port"]),
            (&json!("kapsel"), &json!("kapsel-admission"), &json!(443)),
            "{webhook}"
        );
        assert!(client.get("url").is_none(), "{webhook}");
        let bundle = base64_decode(client["caBundle"].as_str().expect("a caBundle"));
        assert!(bundle == ca, "the caBundle is the Secret's ca.crt");
        paths.push(service["path"].as_str().unwrap().to_owned());
    }

    // What the API server would be answered through the Service: TLS under the Service's
    // DNS name, trusted by the CA bundle alone; the handlers' answers at the paths.
    let address = pod.admission.clone().expect("--admission-listen");
    let webhooks = through_the_service(&address, &ca).await;
    let refused = review(&webhooks, &paths[0], "forbidden").await;
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(refused["status"]["message"], "field must not be forbidden");
    assert_eq!(refused["status"]["code"], 422);
    let mutated = review(&webhooks, &paths[1], "value").await;
    assert_eq!(mutated["allowed"], true, "{mutated}");
    let patch = base64_decode(mutated["patch"].as_str().expect("a patch"));
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/labels",
                "value": {"admission.kapsel.dev/seen": "yes"}}])
    );

    // And through the Service itself, as a kubelet and the endpoints controller would
    // route it: its Endpoints name the pod (here, the host's listen address), and kubectl's
    // writes are admitted by the operator's handlers.
    let (_, listen_port) = address.rsplit_once(':').expect("HOST:PORT");
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kapsel-admission", "namespace": "kapsel"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                     "ports": [{"name": port["name"], "port": listen_port.parse::<u16>().unwrap()}]}],
    });
    let endpoints_file = cluster.scratch.0.join("endpoints.json");
    std::fs::write(&endpoints_file, endpoints.to_string()).unwrap();
    cluster
        .kubectl_ok(&["apply", "-f", &endpoints_file.display().to_string()])
        .await;
    let object = |name: &str, field: &str| {
        let file = cluster.scratch.0.join(format!("{name}.json"));
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                          "metadata": {"name": name, "namespace": "default"},
                          "spec": {"field": field}});
        std::fs::write(&file, body.to_string()).unwrap();
        file.display().to_string()
    };
    let refused = cluster
        .kubectl(&["apply", "-f", &object("bad", "forbidden")])
        .await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "admission webhook \"check-field.{MANAGED}\" denied the request: field must not be forbidden"
        )),
        "{stderr}"
    );
    cluster
        .kubectl_ok(&["apply", "-f", &object("good", "value")])
        .await;
    let good = cluster
        .get("kopf.dev/v1", "kopfexamples", Some("default"), "good")
        .await
        .expect("stored");
    assert_eq!(
        good["metadata"]["labels"]["admission.kapsel.dev/seen"],
        "yes"
    );

    // The handlers' own lines say "forbidden" (their message): not an RBAC refusal.
    let log = pod.stop().await;
    let operator_lines: String = log
        .lines()
        .filter(|line| !line.contains("kapsel.admission.dispatch"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!mentions_a_refusal(&operator_lines), "{log}");
}

/// A role's rules as `(group, resource[:the one name], verbs joined by commas)`.
fn rules(role: &Value) -> Vec<(String, String, String)> {
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            let mut resource = rule["resources"][0].as_str().unwrap().to_owned();
            if let Some(name) = rule["resourceNames"][0].as_str() {
                resource = format!("{resource}:{name}");
            }
            (
                rule["apiGroups"][0].as_str().unwrap().to_owned(),
                resource,
                strings_of(&rule["verbs"]).join(","),
            )
        })
        .collect()
}

/// A client of the webhook server at `address` that checks its certificate as the API
/// server does for the Service `kapsel/kapsel-admission`: for the name
/// `kapsel-admission.kapsel.svc`, trusting the PEM bundle `ca` alone.
async fn through_the_service(address: &str, ca: &[u8]) -> kube::Client {
    let mut config = kube::Config::new(format!("https://{address}").parse().unwrap());
    config.root_cert = Some(pem_certificates(ca));
    config.tls_server_name = Some("kapsel-admission.kapsel.svc".to_owned());
    kube::Client::try_from(config).expect("a client")
}

/// The DER of each certificate of a PEM bundle.
fn pem_certificates(pem: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8(pem.to_vec()).expect("PEM");
    text.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .map(|block| {
            let body = block.split("-----END CERTIFICATE-----").next().unwrap();
            base64_decode(&body.split_whitespace().collect::<String>())
        })
        .collect()
}

/// The `response` of an AdmissionReview of a kopfexample's creation with this
/// `spec.field`, posted at `path`.
async fn review(webhooks: &kube::Client, path: &str, field: &str) -> Value {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e911857d-c318-11e8-bbad-025000000001",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": "kopf-example-1", "namespace": "default"},
                "spec": {"field": field},
            },
            "oldObject": null,
            "dryRun": false,
        },
    });
    let request = kube::core::Request::new(path)
        .create(&Default::default(), review.to_string().into_bytes())
        .expect("a request");
    let answer = webhooks
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let answer: Value = serde_json::from_str(&answer).expect("an AdmissionReview");
    assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
    assert_eq!(answer["response"]["uid"], review["request"]["uid"]);
    answer["response"].clone()
}
