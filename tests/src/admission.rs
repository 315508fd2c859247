//! What the admission tests share (ours and Kopf's interop): the webhook configurations'
//! resources, kopfexamples created through kube-rs or a raw request (to read its
//! `Warning:` headers), and a CA with a serving certificate for 127.0.0.1.

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::kopfexamples;

/// `ValidatingWebhookConfiguration`s, or `MutatingWebhookConfiguration`s.
pub fn webhook_configurations(mutating: bool) -> ApiResource {
    let (kind, plural) = if mutating {
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        )
    } else {
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        )
    };
    ApiResource {
        group: "admissionregistration.k8s.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "admissionregistration.k8s.io/v1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

/// A kopfexample in `default`.
pub fn kex(name: &str, labels: Value, spec: Value) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": spec,
    })
}

/// The kopfexamples of `default`.
pub fn kopfexamples_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &kopfexamples())
}

/// Creates through kube-rs: the stored object, or the refusal's status.
pub async fn try_create(client: &kube::Client, object: Value) -> Result<Value, kube::core::Status> {
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    match kopfexamples_api(client)
        .create(&PostParams::default(), &object)
        .await
    {
        Ok(created) => Ok(serde_json::to_value(created).expect("JSON")),
        Err(kube::Error::Api(status)) => Err(*status),
        Err(other) => panic!("not an answer of the API server: {other}"),
    }
}

/// Creates through a raw request (optionally a dry run): the status code, the warnings
/// (the `Warning:` headers' texts) and the body.
pub async fn create_raw(
    client: &kube::Client,
    object: &Value,
    dry_run: bool,
) -> (u16, Vec<String>, Value) {
    let query = if dry_run { "?dryRun=All" } else { "" };
    let request = http::Request::post(format!(
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples{query}"
    ))
    .header("content-type", "application/json")
    .body(kube::client::Body::from(object.to_string().into_bytes()))
    .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let code = response.status().as_u16();
    // `299 - "text"`: the text between the quotes.
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| {
            value
                .split_once('"')
                .map(|(_, text)| text.trim_end_matches('"').to_owned())
        })
        .collect();
    let body = response.into_body().collect_bytes().await.expect("a body");
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (code, warnings, body)
}

/// A CA and a serving certificate for 127.0.0.1 signed by it, PEM: the certificate, its
/// key and the CA.
pub fn signed_certificate() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("a key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "kapsel-test-ca");
    let ca = ca.self_signed(&ca_key).expect("a CA");
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
    leaf.distinguished_name
        .push(rcgen::DnType::CommonName, "127.0.0.1");
    let leaf = leaf.signed_by(&key, &ca, &ca_key).expect("a certificate");
    (leaf.pem(), key.serialize_pem(), ca.pem())
}
