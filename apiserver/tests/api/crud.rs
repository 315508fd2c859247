//! Create, get, update, delete; conflicts; namespace checks; malformed requests.

use super::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"a": "1"}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

#[tokio::test]
async fn crud_with_kube_rs() {
    let (_server, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = api
        .create(&PostParams::default(), &cm("one"))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.as_ref().is_some_and(|u| u.len() == 36));
    let ts = serde_json::to_value(&meta.creation_timestamp).unwrap();
    assert!(
        ts.as_str().unwrap().ends_with('Z') && ts.as_str().unwrap().len() == 20,
        "{ts}"
    );
    // kube-apiserver keeps a generation only for types whose spec it tracks (Deployments,
    // Pods, custom resources, ...): a ConfigMap has none.
    assert_eq!(meta.generation, None);
    let rv1: u64 = meta.resource_version.as_ref().unwrap().parse().unwrap();
    // AlreadyExists.
    let err = api
        .create(&PostParams::default(), &cm("one"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );
    // Get and update; uid and creationTimestamp survive; rv grows.
    let mut got = api.get("one").await.unwrap();
    got.data = Some([("k".to_string(), "w".to_string())].into());
    got.metadata.uid = Some("forged".into());
    let updated = api
        .replace("one", &PostParams::default(), &got)
        .await
        .unwrap();
    assert_eq!(updated.metadata.uid, created.metadata.uid);
    assert_eq!(
        updated.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );
    assert!(
        updated
            .metadata
            .resource_version
            .as_ref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > rv1
    );
    assert_eq!(updated.metadata.generation, None);
    // Stale resourceVersion: 409 Conflict.
    let err = api
        .replace("one", &PostParams::default(), &got)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    // A no-op update is not a write.
    let same = api
        .replace("one", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        updated.metadata.resource_version
    );
    // generateName.
    let mut g = cm("");
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let gen_obj = api.create(&PostParams::default(), &g).await.unwrap();
    let n = gen_obj.metadata.name.unwrap();
    assert!(n.starts_with("gen-") && n.len() == 9, "{n}");
    // Delete.
    api.delete("one", &DeleteParams::default()).await.unwrap();
    let err = api.get("one").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404 && s.reason == "NotFound"),
        "{err:?}"
    );
    // The built-in namespaces exist.
    let nss: Api<Namespace> = Api::all(client);
    for ns in ["default", "kube-system", "kube-public"] {
        let n = nss.get(ns).await.unwrap();
        assert_eq!(n.status.unwrap().phase.as_deref(), Some("Active"));
    }
}

#[tokio::test]
async fn create_checks() {
    let (server, _client) = start().await;
    let p = "/api/v1/namespaces/default/configmaps";
    assert_status(
        &post(
            &server,
            "/api/v1/namespaces/nope/configmaps",
            json!({"metadata": {"name": "a"}}),
        )
        .await,
        404,
        "NotFound",
    );
    assert_status(
        &post(
            &server,
            p,
            json!({"metadata": {"name": "a", "namespace": "other"}}),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &post(&server, p, json!({"metadata": {}})).await,
        422,
        "Invalid",
    );
    assert_status(
        &post(&server, p, json!({"metadata": {"name": "Not_Valid"}})).await,
        422,
        "Invalid",
    );
    assert_status(
        &post(
            &server,
            p,
            json!({"metadata": {"name": "a", "labels": {"-bad": "x"}}}),
        )
        .await,
        422,
        "Invalid",
    );
    assert_status(
        &post(
            &server,
            p,
            json!({"apiVersion": "v2", "metadata": {"name": "a"}}),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &post(
            &server,
            p,
            json!({"kind": "Secret", "metadata": {"name": "a"}}),
        )
        .await,
        400,
        "BadRequest",
    );
    // apiVersion and kind are filled in.
    let r = post(&server, p, json!({"metadata": {"name": "a"}})).await;
    assert_eq!(r.code, 201);
    assert_eq!(r.json()["kind"], "ConfigMap");
    assert_eq!(r.json()["apiVersion"], "v1");
    // Lists of built-ins omit kind/apiVersion on items, as kube does.
    let l = get(&server, p).await.json();
    assert_eq!(l["kind"], "ConfigMapList");
    assert!(l["items"][0].get("kind").is_none());
    // dryRun validates but does not store.
    let r = post(
        &server,
        &format!("{p}?dryRun=All"),
        json!({"metadata": {"name": "dry"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_status(&get(&server, &format!("{p}/dry")).await, 404, "NotFound");
    // Names and ConfigMap keys are refused with kube-apiserver's words (its RegexError).
    let r = post(
        &server,
        p,
        json!({"metadata": {"name": "Not_A_Name"}, "data": {"no/slash": "v", "..x": "v"}}),
    )
    .await;
    assert_status(&r, 422, "Invalid");
    let causes: Vec<(String, String)> = r.json()["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let key_rule = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    assert_eq!(
        causes,
        [
            ("metadata.name".to_string(), "Invalid value: \"Not_A_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string()),
            ("data[no/slash]".to_string(), format!("Invalid value: \"no/slash\": {key_rule}")),
            ("data[..x]".to_string(), "Invalid value: \"..x\": must not start with '..'".to_string()),
        ]
    );
    let r = post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "has.dots"}}),
    )
    .await;
    assert_eq!(
        r.json()["details"]["causes"][0]["message"],
        "Invalid value: \"has.dots\": must not contain dots"
    );
    // A body's media type is JSON (also when none is given), YAML or protobuf; any other
    // is 415, as kube-apiserver's negotiation answers.
    let plain = br#"{"metadata": {"name": "typed"}}"#;
    for ct in ["text/plain", "application/merge-patch+json", "text/yaml"] {
        let r = raw(&server, "POST", p, Some(ct), plain).await;
        assert_status(&r, 415, "UnsupportedMediaType");
        assert_eq!(
            r.json()["message"],
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
    }
    assert_eq!(raw(&server, "POST", p, None, plain).await.code, 201);
    // Neither name nor generateName: kube-apiserver's Status, a Required cause and no
    // name in its details.
    let r = post(&server, p, json!({"metadata": {}})).await;
    assert_status(&r, 422, "Invalid");
    assert_eq!(
        r.json()["details"],
        json!({"kind": "ConfigMap", "causes": [{"reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required", "field": "metadata.name"}]})
    );
    // Any other value: 422 of the write's options, as kube-apiserver validates them.
    let r = post(
        &server,
        &format!("{p}?dryRun=Bogus"),
        json!({"metadata": {"name": "dry"}}),
    )
    .await;
    assert_status(&r, 422, "Invalid");
    let message = "Unsupported value: [\"Bogus\"]: supported values: \"All\"";
    assert_eq!(
        r.json()["message"],
        format!("CreateOptions.meta.k8s.io \"\" is invalid: dryRun: {message}")
    );
    assert_eq!(
        r.json()["details"],
        json!({"group": "meta.k8s.io", "kind": "CreateOptions", "causes": [
            {"reason": "FieldValueNotSupported", "message": message, "field": "dryRun"}]})
    );
    let r = raw(&server, "DELETE", &format!("{p}/a?dryRun=All"), None, b"").await;
    assert_eq!(r.code, 200);
    // Answered as the delete would be: the Success Status of an object gone at once.
    assert_eq!(r.json()["kind"], "Status", "{}", r.body);
    assert_eq!(r.json()["details"]["name"], "a", "{}", r.body);
    assert_eq!(get(&server, &format!("{p}/a")).await.code, 200);
    // Cluster-scoped objects drop a namespace; namespaced ones need one.
    let r = post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "made"}}),
    )
    .await;
    assert_eq!(r.code, 201);
    assert_eq!(
        r.json()["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "made"
    );
    // Every namespace gets a `default` service account.
    assert_eq!(
        get(&server, "/api/v1/namespaces/made/serviceaccounts/default")
            .await
            .code,
        200
    );
    // Secrets fold write-only stringData into data; pods and services get kube's defaults.
    let s = post(
        &server,
        "/api/v1/namespaces/made/secrets",
        json!({"metadata": {"name": "s"}, "stringData": {"p": "q"}}),
    )
    .await
    .json();
    assert_eq!(s["data"], json!({"p": "cQ=="}));
    assert!(s.get("stringData").is_none());
    assert_eq!(s["type"], "Opaque");
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    let made = post(&server, "/api/v1/namespaces/made/pods", pod)
        .await
        .json();
    assert_eq!(made["spec"]["restartPolicy"], "Always");
    assert_eq!(
        made["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
    let s = post(&server, "/api/v1/namespaces/made/services", svc)
        .await
        .json();
    assert_eq!(s["spec"]["type"], "ClusterIP");
    assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
    assert_status(
        &post(
            &server,
            "/api/v1/configmaps",
            json!({"metadata": {"name": "x"}}),
        )
        .await,
        400,
        "BadRequest",
    );
    // Preconditions on delete.
    let r = raw(
        &server,
        "DELETE",
        &format!("{p}/a"),
        Some("application/json"),
        br#"{"preconditions": {"uid": "not-it"}}"#,
    )
    .await;
    assert_status(&r, 409, "Conflict");
    // Worded as kube-apiserver's BeforeDelete, about the Kind.
    let uid = get(&server, &format!("{p}/a")).await.json()["metadata"]["uid"].clone();
    assert_eq!(
        r.json()["message"],
        format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition (not-it) does not match the UID in record ({}). The object might have been deleted and then recreated",
            uid.as_str().unwrap()
        )
    );
    assert_eq!(
        r.json()["details"],
        json!({"name": "a", "kind": "ConfigMap"})
    );
    let r = raw(
        &server,
        "DELETE",
        &format!("{p}/a"),
        Some("application/json"),
        br#"{"preconditions": {"resourceVersion": "1"}}"#,
    )
    .await;
    assert_status(&r, 409, "Conflict");
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("Operation cannot be fulfilled on ConfigMap \"a\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (")
            && message.ends_with("). The object might have been modified"),
        "{message}"
    );
}

/// kube-apiserver's limit on a ConfigMap: 1 MiB of keys and values, `data` and
/// `binaryData` (counted decoded) together. Kapsel's guests are deployed in ConfigMaps.
#[tokio::test]
async fn a_configmap_holds_at_most_one_mib() {
    use base64::Engine as _;
    let (server, _client) = start().await;
    let p = "/api/v1/namespaces/default/configmaps";
    let mib = 1024 * 1024;
    let encode = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
    // Exactly the limit: key "k" (1 byte) + text "t" (1) + "b" (1) and its bytes.
    let at_limit = json!({"metadata": {"name": "fits"}, "data": {"k": "t"},
        "binaryData": {"b": encode(mib - 3)}});
    let r = post(&server, p, at_limit).await;
    assert_eq!(r.code, 201, "{}", r.body);
    // Base64 in lines (as kustomize writes it) is the same bytes, served in one line.
    let wrapped = encode(100)
        .as_bytes()
        .chunks(76)
        .map(|l| String::from_utf8_lossy(l))
        .collect::<Vec<_>>()
        .join("\n");
    let r = post(
        &server,
        p,
        json!({"metadata": {"name": "lines"}, "binaryData": {"b": wrapped}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["binaryData"]["b"], encode(100));
    // One byte more, in binaryData or in data.
    for (name, body) in [
        ("binary", json!({"binaryData": {"b": encode(mib)}})),
        ("text", json!({"data": {"k": "x".repeat(mib)}})),
    ] {
        let mut body = body;
        body["metadata"] = json!({"name": name});
        let r = post(&server, p, body).await;
        assert_status(&r, 422, "Invalid");
        assert!(
            r.body.contains("Too long: must have at most 1048576 bytes"),
            "{}",
            r.body
        );
    }
}

#[tokio::test]
async fn malformed_requests_get_status_errors() {
    let (server, _client) = start().await;
    let p = "/api/v1/namespaces/default/configmaps";
    let bodies: &[&[u8]] = &[
        b"not json",
        b"[1, 2]",
        b"42",
        b"",
        b"{\"metadata\": 5}",
        b"{\"metadata\": {\"name\": 7}}",
        b"{\"metadata\": {\"name\": \"a\", \"labels\": {\"x\": 1}}}",
        b"{\"metadata\": {\"name\": \"a\", \"finalizers\": \"x\"}}",
        b"{\"metadata\": {\"name\": \"a\"}, \"x\": 1e999}",
        b"{\"metadata\": {\"name\": \"a\"}",
        b"\xff\xfe\x00",
    ];
    for b in bodies {
        let r = raw(&server, "POST", p, Some("application/json"), b).await;
        assert_status(&r, 400, "BadRequest");
    }
    // A huge integer is a valid number to JSON; the object is stored as is.
    let r = raw(
        &server,
        "POST",
        p,
        Some("application/json"),
        b"{\"metadata\": {\"name\": \"big\"}, \"data\": {}, \"n\": 123456789012345678901234567890}",
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        post(&server, p, json!({"metadata": {"name": "ok"}}))
            .await
            .code,
        201
    );
    for b in bodies {
        let r = raw(
            &server,
            "PUT",
            &format!("{p}/ok"),
            Some("application/json"),
            b,
        )
        .await;
        assert_status(&r, 400, "BadRequest");
        let r = raw(
            &server,
            "PATCH",
            &format!("{p}/ok"),
            Some("application/merge-patch+json"),
            b,
        )
        .await;
        assert!(r.code == 400 || r.code == 422, "{}", r.body);
        assert_eq!(r.json()["kind"], "Status");
    }
    for path in [
        "/nope",
        "/api/v2",
        "/api/v1/nothings",
        "/apis/apps/v1/namespaces/default/nothings/x",
        "/api/v1/namespaces/default/configmaps/ok/scale",
        "/api/v1/namespaces/default/configmaps/ok/status",
        "/api/v1/nodes/x/y/z",
        "/apis//v1",
    ] {
        assert_status(&get(&server, path).await, 404, "NotFound");
    }
    assert_status(
        &raw(
            &server,
            "POST",
            "/api/v1/namespaces/default/configmaps/ok",
            Some("application/json"),
            b"{}",
        )
        .await,
        405,
        "MethodNotAllowed",
    );
    assert_status(
        &raw(
            &server,
            "PUT",
            "/api/v1/namespaces/default/configmaps",
            Some("application/json"),
            b"{}",
        )
        .await,
        405,
        "MethodNotAllowed",
    );
    assert_status(
        &raw(&server, "POST", "/apis", Some("application/json"), b"{}").await,
        405,
        "MethodNotAllowed",
    );
    assert_status(
        &get(&server, &format!("{p}?labelSelector=a%20in%20(")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &get(&server, &format!("{p}?fieldSelector=spec.x%3D1")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &get(&server, &format!("{p}?limit=abc")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &get(&server, &format!("{p}?limit=1&continue=zzz")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &get(&server, &format!("{p}?watch=true&resourceVersion=abc")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &raw(
            &server,
            "DELETE",
            &format!("{p}/ok"),
            Some("application/json"),
            b"{bad",
        )
        .await,
        400,
        "BadRequest",
    );
    // The server is still fine.
    assert_eq!(get(&server, &format!("{p}/ok")).await.code, 200);
}

/// kube writes a built-in's `kind` before its `apiVersion` (Go struct order) and a custom
/// resource's keys sorted (unstructured): clients see the order, e.g. in the column of a
/// decoding error kube-rs reports (its `fetch_fails` test).
#[tokio::test]
async fn type_members_come_first_in_kubes_order() {
    let (server, _client) = start().await;
    let cm = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        post(&server, cm, json!({"metadata": {"name": "c"}, "data": {}}))
            .await
            .code,
        201
    );
    let r = get(&server, &format!("{cm}/c")).await;
    assert!(
        r.body
            .starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","#),
        "{}",
        r.body
    );
    create_kopf_crd(&server).await;
    let kex = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";
    let obj = json!({"kind": "KopfExample", "apiVersion": "kopf.dev/v1", "metadata": {"name": "k"}, "spec": {}});
    let created = post(&server, kex, obj).await;
    assert_eq!(created.code, 201, "{}", created.body);
    for body in [created.body, get(&server, &format!("{kex}/k")).await.body] {
        assert!(
            body.starts_with(r#"{"apiVersion":"kopf.dev/v1","kind":"KopfExample","#),
            "{body}"
        );
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn empty_labels_annotations_and_finalizers_are_not_kept() {
    let (server, _client) = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "bare", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []}});
    let r = post(&server, path, body).await;
    assert_eq!(r.code, 201, "{}", r.body);
    // kube-apiserver writes ObjectMeta's maps and lists only when they hold something;
    // nor does a manager own them then.
    let meta = &r.json()["metadata"];
    for member in ["labels", "annotations", "finalizers", "ownerReferences"] {
        assert!(meta.get(member).is_none(), "{member}: {meta}");
    }
    assert!(meta["managedFields"].as_array().is_none(), "{meta}");
    // An update that empties them leaves none either.
    let labelled = raw(
        &server,
        "PATCH",
        &format!("{path}/bare"),
        Some("application/merge-patch+json"),
        br#"{"metadata":{"labels":{"a":"1"},"annotations":{"b":"2"}}}"#,
    )
    .await;
    assert_eq!(labelled.code, 200, "{}", labelled.body);
    let mut emptied = labelled.json();
    emptied["metadata"]["labels"] = json!({});
    emptied["metadata"]["annotations"] = json!({});
    let r = raw(
        &server,
        "PUT",
        &format!("{path}/bare"),
        Some("application/json"),
        emptied.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let meta = &r.json()["metadata"];
    assert!(
        meta.get("labels").is_none() && meta.get("annotations").is_none(),
        "{meta}"
    );
    server.shutdown().await.unwrap();
}
