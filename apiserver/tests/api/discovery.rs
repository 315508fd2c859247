//! Discovery documents, before and after CRDs come and go.

use super::*;
use serde_json::json;

#[tokio::test]
async fn version_and_core_discovery() {
    let (server, client) = start().await;
    let v = get(&server, "/version").await.json();
    assert_eq!(v["gitVersion"], "v1.32.0");
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("32"))
    );
    let api = get(&server, "/api").await.json();
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let core = get(&server, "/api/v1").await.json();
    assert_eq!(core["kind"], "APIResourceList");
    assert_eq!(core["groupVersion"], "v1");
    let find = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
    };
    let pods = find(&core, "pods").unwrap();
    assert_eq!(pods["kind"], "Pod");
    assert_eq!(pods["singularName"], "pod");
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["categories"], json!(["all"]));
    assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
    assert_eq!(
        find(&core, "pods/status").unwrap()["verbs"],
        json!(["get", "patch", "update"])
    );
    assert_eq!(find(&core, "namespaces").unwrap()["namespaced"], false);
    assert!(find(&core, "configmaps/status").is_none());
    let apis = get(&server, "/apis").await.json();
    assert_eq!(apis["kind"], "APIGroupList");
    let apps = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "apps")
        .unwrap()
        .clone();
    assert_eq!(
        apps["preferredVersion"],
        json!({"groupVersion": "apps/v1", "version": "v1"})
    );
    let group = get(&server, "/apis/coordination.k8s.io").await.json();
    assert_eq!(group["kind"], "APIGroup");
    let apps_v1 = get(&server, "/apis/apps/v1").await.json();
    assert_eq!(
        find(&apps_v1, "deployments").unwrap()["shortNames"],
        json!(["deploy"])
    );
    assert_status(
        &get(&server, "/apis/nope.example.com/v1").await,
        404,
        "NotFound",
    );
    assert_status(
        &get(&server, "/apis/nope.example.com").await,
        404,
        "NotFound",
    );
    assert_eq!(get(&server, "/openapi/v2").await.code, 200);
    assert_eq!(get(&server, "/openapi/v3").await.code, 200);
    // kube-rs discovery walks all of it.
    let d = kube::discovery::Discovery::new(client).run().await.unwrap();
    assert!(d.groups().any(|g| g.name() == "events.k8s.io"));
    let (ar, caps) = d.get("").unwrap().recommended_kind("Pod").unwrap();
    assert_eq!(ar.plural, "pods");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn crd_discovery_follows_the_crd() {
    let (server, client) = start().await;
    let r = post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        kopf_crd(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let crd = r.json();
    let conds = crd["status"]["conditions"].as_array().unwrap();
    for ty in ["Established", "NamesAccepted"] {
        assert!(
            conds
                .iter()
                .any(|c| c["type"] == ty && c["status"] == "True"),
            "{ty}"
        );
    }
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "KopfExample");
    assert_eq!(crd["spec"]["names"]["listKind"], "KopfExampleList");
    let list = get(&server, "/apis/kopf.dev/v1").await.json();
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kopfexamples", "kopfexamples/status"]);
    let res = &list["resources"][0];
    assert_eq!(
        res["shortNames"],
        json!(["kopfexes", "kopfex", "kexes", "kex"])
    );
    assert_eq!(res["singularName"], "kopfexample");
    assert_eq!(res["namespaced"], true);
    let apis = get(&server, "/apis").await.json();
    assert!(
        apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "kopf.dev" && g["preferredVersion"]["version"] == "v1")
    );
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "ex1"}, "spec": {"duration": "1m"}});
    assert_eq!(
        post(
            &server,
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
            obj
        )
        .await
        .code,
        201
    );
    let d = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    assert!(d.has_group("kopf.dev"));
    // Deleting the CRD removes its objects and stops serving it.
    let r = raw(
        &server,
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev",
        None,
        b"",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_status(&get(&server, "/apis/kopf.dev/v1").await, 404, "NotFound");
    assert_status(
        &get(&server, "/apis/kopf.dev/v1/namespaces/default/kopfexamples").await,
        404,
        "NotFound",
    );
    assert_status(
        &get(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev",
        )
        .await,
        404,
        "NotFound",
    );
    let d = kube::discovery::Discovery::new(client).run().await.unwrap();
    assert!(!d.has_group("kopf.dev"));
    // Re-creating it serves an empty resource.
    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            kopf_crd()
        )
        .await
        .code,
        201
    );
    let l = get(&server, "/apis/kopf.dev/v1/namespaces/default/kopfexamples")
        .await
        .json();
    assert_eq!(l["items"], json!([]));
    assert_eq!(l["kind"], "KopfExampleList");
}

#[tokio::test]
async fn crd_validation_and_versions() {
    let (server, _client) = start().await;
    let mut bad = kopf_crd();
    bad["metadata"]["name"] = json!("wrong.kopf.dev");
    assert_status(
        &post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            bad,
        )
        .await,
        422,
        "Invalid",
    );
    let mut nostorage = kopf_crd();
    nostorage["spec"]["versions"][0]["storage"] = json!(false);
    assert_status(
        &post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            nostorage,
        )
        .await,
        422,
        "Invalid",
    );
    // Peering CRDs (cluster-scoped and namespaced) from the reference files.
    let text = include_str!("data/peering-crds.yaml");
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v: Value = serde::Deserialize::deserialize(doc).unwrap();
        if v.is_null() || v["kind"] != "CustomResourceDefinition" {
            continue;
        }
        let r = post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            v,
        )
        .await;
        assert_eq!(r.code, 201, "{}", r.body);
    }
    let list = get(&server, "/apis/kopf.dev/v1").await.json();
    let cluster = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "clusterkopfpeerings")
        .unwrap()
        .clone();
    assert_eq!(cluster["namespaced"], false);
    // Two versions: v1 is preferred over v1beta1 (kube-aware order), both served.
    let mut two = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [
                    {"name": "v1beta1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    assert_eq!(
        post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            two.clone()
        )
        .await
        .code,
        201
    );
    let g = get(&server, "/apis/example.com").await.json();
    assert_eq!(g["preferredVersion"]["version"], "v1");
    assert_eq!(g["versions"].as_array().unwrap().len(), 2);
    let w = post(
        &server,
        "/apis/example.com/v1beta1/widgets",
        json!({"metadata": {"name": "w"}}),
    )
    .await;
    assert_eq!(w.code, 201, "{}", w.body);
    let as_v1 = get(&server, "/apis/example.com/v1/widgets/w").await.json();
    assert_eq!(as_v1["apiVersion"], "example.com/v1");
    assert_eq!(as_v1["kind"], "Widget");
    two["metadata"]["name"] = json!("gadgets.example.com");
    two["spec"]["versions"] = json!([]);
    assert_status(
        &post(
            &server,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            two,
        )
        .await,
        422,
        "Invalid",
    );
}

#[tokio::test]
async fn tables_for_kubectl_get() {
    let (server, _client) = start().await;
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        kopf_crd(),
    )
    .await;
    let obj = json!({"metadata": {"name": "ex"}, "spec": {"duration": "1m"}});
    post(
        &server,
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
        obj,
    )
    .await;
    let accept = [(
        "Accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )];
    let r = raw_with(
        &server,
        "GET",
        "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
        None,
        &accept,
        b"",
    )
    .await;
    let t = r.json();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Duration", "Children", "Message"]);
    assert_eq!(t["rows"][0]["cells"], json!(["ex", "1m", null, null]));
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let r = raw_with(&server, "GET", "/api/v1/namespaces", None, &accept, b"").await;
    let t = r.json();
    assert_eq!(t["rows"].as_array().unwrap().len(), 4);
    assert_eq!(t["rows"][0]["cells"][1], "Active");
    let r = raw_with(
        &server,
        "GET",
        "/api/v1/namespaces/default?includeObject=Object",
        None,
        &accept,
        b"",
    )
    .await;
    assert_eq!(r.json()["rows"][0]["object"]["kind"], "Namespace");
    let r = raw_with(
        &server,
        "GET",
        "/api/v1/namespaces?watch=1&timeoutSeconds=1",
        None,
        &accept,
        b"",
    )
    .await;
    let evs = r.events();
    assert_eq!(evs[0]["object"]["kind"], "Table");
    // Plain JSON otherwise, and protobuf-only Accept still gets JSON.
    let proto = [("Accept", "application/vnd.kubernetes.protobuf")];
    let r = raw_with(
        &server,
        "GET",
        "/api/v1/namespaces/default",
        None,
        &proto,
        b"",
    )
    .await;
    assert_eq!(r.json()["kind"], "Namespace");
}

#[tokio::test]
async fn protobuf_bodies_of_simple_kinds() {
    let (server, _client) = start().await;
    // What `kubectl create configmap c --from-literal=k=v` sends.
    fn field(num: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![(num << 3) | 2, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }
    let meta = field(1, b"c");
    let cm = [
        field(1, &meta),
        field(2, &[field(1, b"k"), field(2, b"v")].concat()),
    ]
    .concat();
    let body = [
        b"k8s\0".as_slice(),
        &field(1, &[field(1, b"v1"), field(2, b"ConfigMap")].concat()),
        &field(2, &cm),
    ]
    .concat();
    let ct = Some("application/vnd.kubernetes.protobuf");
    let r = raw(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        ct,
        &body,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["data"], json!({"k": "v"}));
    let pod = [
        b"k8s\0".as_slice(),
        &field(
            1,
            &[field(1, b"example.com/v1"), field(2, b"Widget")].concat(),
        ),
        &field(2, &meta),
    ]
    .concat();
    assert_status(
        &raw(&server, "POST", "/api/v1/namespaces/default/pods", ct, &pod).await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &raw(
            &server,
            "POST",
            "/api/v1/namespaces/default/pods",
            ct,
            b"garbage",
        )
        .await,
        415,
        "UnsupportedMediaType",
    );
}

#[tokio::test]
async fn documents_are_served_in_the_form_asked_for_or_406() {
    let (server, _client) = start().await;
    let get_as = |path: &'static str, accept: &'static str| {
        let server = &server;
        async move { raw_with(server, "GET", path, None, &[("Accept", accept)], b"").await }
    };
    // client-go's only request for OpenAPI v2: gnostic protobuf, under the dotted name Go
    // can parse; the document starts with `swagger: "2.0"` (field 1).
    let r = get_as(
        "/openapi/v2",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    );
    assert!(r.body.starts_with("\n\u{3}2.0"), "{:?}", &r.body[..20]);
    let r = get_as("/openapi/v2", "application/json").await;
    assert_eq!(r.json()["swagger"], "2.0");
    // Aggregated discovery is served for /api and /apis only (aggregated_discovery.rs); a
    // group-version's list or a protobuf OpenAPI v3 are not served in another form, so
    // 406 (clients then ask again for what the server offers).
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    for path in ["/apis/apps/v1", "/apis/apps"] {
        let r = get_as(path, aggregated).await;
        assert_status(&r, 406, "NotAcceptable");
        assert_eq!(
            r.json()["message"],
            "only the following media types are accepted: application/json"
        );
    }
    let r = get_as(
        "/openapi/v3/apis/apps/v1",
        "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
    )
    .await;
    assert_status(&r, 406, "NotAcceptable");
    // kubectl's own discovery Accept ends with plain JSON, which a group-version's list is
    // served as.
    let kubectl =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let r = get_as("/apis/apps/v1", kubectl).await;
    assert_eq!(
        (r.code, r.json()["kind"].clone()),
        (200, json!("APIResourceList"))
    );
}
