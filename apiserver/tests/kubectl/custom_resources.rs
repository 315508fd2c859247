//! kubectl on a CRD and its custom resources: apply, get, patch, status, explain, delete, watch.

use crate::support::*;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

/// The kopfexamples CRD and its object, driven like a user would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_custom_resources() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "crd");

    // Plain apply: kubectl validates (by asking the server to, per OpenAPI v3).
    let out = k
        .ok(&["apply", "-f", &kopf_file("kopfexamples-crd.yaml")])
        .await;
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/kopfexamples.kopf.dev created"),
        "{out}"
    );
    eventually_ok(&k, &["get", "kopfexamples"]).await;

    let out = k
        .ok(&["apply", "-f", &kopf_file("kopfexample-obj.yaml")])
        .await;
    assert!(
        out.contains("kopfexample.kopf.dev/kopf-example-1 created"),
        "{out}"
    );

    // Get by short name, and as JSON.
    let out = k.ok(&["get", "kex"]).await;
    assert!(out.contains("kopf-example-1"), "{out}");
    let list = k.json(&["get", "kopfexamples"]).await;
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["spec"]["duration"], "1m");
    assert_eq!(items[0]["metadata"]["labels"]["somelabel"], "somevalue");
    assert_eq!(items[0]["metadata"]["namespace"], "default");

    // Re-applying the unchanged object is a no-op; a changed one is a merge patch.
    let out = k
        .ok(&["apply", "-f", &kopf_file("kopfexample-obj.yaml")])
        .await;
    assert!(out.contains("kopf-example-1 unchanged"), "{out}");
    let changed = std::fs::read_to_string(kopf_file("kopfexample-obj.yaml"))
        .expect("read obj")
        .replace("duration: 1m", "duration: 2m");
    let out = k.ok_stdin(&["apply", "-f", "-"], &changed).await;
    assert!(out.contains("kopf-example-1 configured"), "{out}");
    let obj = k.json(&["get", "kex", "kopf-example-1"]).await;
    assert_eq!(obj["spec"]["duration"], "2m");
    assert_eq!(obj["spec"]["items"], serde_json::json!(["item1", "item2"]));

    // Merge patch of the main resource.
    let out = k
        .ok(&[
            "patch",
            "kex",
            "kopf-example-1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"field":"patched"}}"#,
        ])
        .await;
    assert!(
        out.contains("kopfexample.kopf.dev/kopf-example-1 patched"),
        "{out}"
    );
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.spec.field}",
        ])
        .await;
    assert_eq!(out, "patched");

    // The status subresource (the CRD declares it).
    let out = k
        .ok(&[
            "patch",
            "kex",
            "kopf-example-1",
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"create_fn":{"message":"hello","children":["a"]}}}"#,
        ])
        .await;
    assert!(out.contains("patched"), "{out}");
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.status.create_fn.message}",
        ])
        .await;
    assert_eq!(out, "hello");
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "--subresource=status",
            "-o",
            "jsonpath={.status.create_fn.message}",
        ])
        .await;
    assert_eq!(out, "hello");
    // With the subresource, the main resource ignores status changes.
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"create_fn":{"message":"ignored"}}}"#,
    ])
    .await;
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.status.create_fn.message}",
        ])
        .await;
    assert_eq!(out, "hello");

    // explain renders the CRD's schema from OpenAPI v3.
    let out = k.ok(&["explain", "kopfexamples"]).await;
    assert!(out.contains("KopfExample"), "{out}");
    assert!(out.contains("kopf.dev"), "{out}");
    assert!(out.contains("spec"), "{out}");
    assert!(out.contains("metadata"), "{out}");

    // A changed CRD schema shows up at once: the /openapi/v3 index hash
    // changes, so kubectl does not reuse its cached document.
    let described = std::fs::read_to_string(kopf_file("kopfexamples-crd.yaml"))
        .expect("read crd")
        .replacen(
            "            spec:\n              type: object\n",
            "            spec:\n              type: object\n              properties:\n                duration: {type: string, description: For how long the pod should sleep.}\n",
            1,
        );
    assert!(
        described.contains("duration: {type: string"),
        "the CRD file changed shape"
    );
    let out = k.ok_stdin(&["apply", "-f", "-"], &described).await;
    assert!(out.contains("kopfexamples.kopf.dev configured"), "{out}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let out = k.ok(&["explain", "kopfexamples.spec"]).await;
        if out.contains("For how long the pod should sleep.") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "explain never showed the new schema: {out}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Unknown fields: kubectl asks the server to validate (fieldValidation=Strict);
    // kube-apiserver answers 400 "strict decoding error: unknown field".
    let typo =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndata: {}\ndatta: {a: b}\n";
    let out = k.run_with(&["apply", "-f", "-"], Some(typo)).await;
    assert!(
        !out.status.success(),
        "an unknown field must be rejected: {out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown field \"datta\""),
        "{out:?}"
    );

    // api-resources lists the CRD's resource with its short names.
    let out = k.ok(&["api-resources"]).await;
    let line = out
        .lines()
        .find(|l| l.starts_with("kopfexamples "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("kex") && line.contains("kopf.dev/v1") && line.contains("KopfExample"),
        "{line}"
    );
    assert!(out.lines().any(|l| l.starts_with("deployments ")), "{out}");

    // Deletion waits for the finalizers: kubectl delete blocks until another
    // client removes the last one.
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["kapsel.test/hold"]}}"#,
    ])
    .await;
    let mut delete = k.spawn(&["delete", "kex", "kopf-example-1", "--timeout=25s"]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        delete.try_wait().expect("try_wait").is_none(),
        "kubectl delete returned while a finalizer holds the object"
    );
    let out = k
        .ok(&[
            "get",
            "kex",
            "kopf-example-1",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!out.is_empty(), "deletionTimestamp is set");
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let out = timeout(CALL_TIMEOUT, delete.wait_with_output())
        .await
        .expect("kubectl delete returns once the finalizer is gone")
        .expect("kubectl delete output");
    let stdout = check(&["delete"], &out);
    assert!(
        stdout.contains("kopfexample.kopf.dev \"kopf-example-1\" deleted"),
        "{stdout}"
    );
    let gone = k.run(&["get", "kex", "kopf-example-1"]).await;
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "{gone:?}"
    );

    // get -w streams the changes.
    let mut watch = k.spawn(&["get", "kex", "-w", "-o", "name"]);
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    tokio::time::sleep(Duration::from_millis(500)).await;
    k.ok(&["apply", "-f", &kopf_file("kopfexample-obj.yaml")])
        .await;
    read_until(&mut lines, "kopfexample.kopf.dev/kopf-example-1").await;
    k.ok(&[
        "patch",
        "kex",
        "kopf-example-1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"field":"watched"}}"#,
    ])
    .await;
    read_until(&mut lines, "kopfexample.kopf.dev/kopf-example-1").await;
    watch.kill().await.expect("kill kubectl get -w");

    server.shutdown().await.expect("shutdown");
}

/// One file holding a CRD and objects of it, applied with kubectl's default
/// validation. kubectl validates objects whose kind the server does not serve
/// yet against `/openapi/v2`, which it reads only as protobuf. As against a
/// real cluster, the first apply creates the CRD and cannot map the objects
/// yet ("ensure CRDs are installed first"); the second creates them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_crd_and_objects_in_one_file() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "one-file");
    let crd = std::fs::read_to_string(kopf_file("kopfexamples-crd.yaml")).expect("read crd");
    let obj = std::fs::read_to_string(kopf_file("kopfexample-obj.yaml")).expect("read obj");
    let second = obj.replace("kopf-example-1", "kopf-example-2");
    let file = format!("{crd}\n---\n{obj}\n---\n{second}");

    let out = k.run_with(&["apply", "-f", "-"], Some(&file)).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains(
            "customresourcedefinition.apiextensions.k8s.io/kopfexamples.kopf.dev created"
        ),
        "{stdout}\n{stderr}"
    );
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            line.contains("no matches for kind \"KopfExample\"")
                || line.contains("ensure CRDs are installed first"),
            "unexpected complaint from kubectl: {stderr}"
        );
    }
    eventually_ok(&k, &["get", "kopfexamples"]).await;

    let out = k.run_with(&["apply", "-f", "-"], Some(&file)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl apply failed: {stderr}");
    assert!(stderr.trim().is_empty(), "kubectl complained: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in ["kopf-example-1", "kopf-example-2"] {
        assert!(
            stdout.contains(&format!("kopfexample.kopf.dev/{name} created")),
            "{stdout}"
        );
    }
    let list = k.json(&["get", "kopfexamples"]).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
    server.shutdown().await.expect("shutdown");
}
