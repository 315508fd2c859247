//! kubectl's `create <kind>` generators: each sends a protobuf body through
//! kubectl's typed client; every object must be created and read back with
//! the fields the flags asked for.

use crate::support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators() {
    let (server, bin) = start().await;
    let k = Kubectl::new(bin, &server, "generators");

    // Workloads.
    k.ok(&[
        "create",
        "deployment",
        "gen",
        "--image=nginx:1.27",
        "--port=80",
        "--replicas=2",
    ])
    .await;
    let d = k.json(&["get", "deployment", "gen"]).await;
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(
        d["spec"]["selector"]["matchLabels"],
        json!({"app": "gen"}),
        "{d}"
    );
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "nginx:1.27", "{d}");
    assert_eq!(c["ports"][0]["containerPort"], 80, "{d}");
    // replicas is a pointer: an explicit 0 must survive the protobuf decoding.
    k.ok(&[
        "create",
        "deployment",
        "idle",
        "--image=nginx",
        "--replicas=0",
    ])
    .await;
    let out = k
        .ok(&[
            "get",
            "deployment",
            "idle",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    assert_eq!(out, "0");
    let out = k.ok(&["expose", "deployment", "gen", "--port=80"]).await;
    assert!(out.contains("service/gen exposed"), "{out}");

    k.ok(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ])
    .await;
    let j = k.json(&["get", "job", "once"]).await;
    let c = &j["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], json!(["echo", "hi"]), "{j}");
    assert_eq!(
        j["spec"]["template"]["spec"]["restartPolicy"], "Never",
        "{j}"
    );
    k.ok(&[
        "create",
        "cronjob",
        "nightly",
        "--image=busybox",
        "--schedule=0 3 * * *",
        "--",
        "date",
    ])
    .await;
    let cj = k.json(&["get", "cronjob", "nightly"]).await;
    assert_eq!(cj["spec"]["schedule"], "0 3 * * *", "{cj}");
    let pod = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["command"], json!(["date"]), "{cj}");
    // A job from the cron job: kubectl copies the stored template (whatever it holds).
    k.ok(&["create", "job", "manual", "--from=cronjob/nightly"])
        .await;
    let j = k.json(&["get", "job", "manual"]).await;
    assert_eq!(
        j["metadata"]["ownerReferences"][0]["kind"], "CronJob",
        "{j}"
    );
    assert_eq!(
        j["metadata"]["ownerReferences"][0]["uid"], cj["metadata"]["uid"],
        "{j}"
    );
    assert_eq!(
        j["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["date"]),
        "{j}"
    );

    // Services of every type.
    k.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
        .await;
    let s = k.json(&["get", "service", "web"]).await;
    assert_eq!(s["spec"]["type"], "ClusterIP", "{s}");
    assert_eq!(s["spec"]["ports"][0]["port"], 80, "{s}");
    assert_eq!(s["spec"]["ports"][0]["targetPort"], 8080, "{s}");
    assert_eq!(s["spec"]["selector"], json!({"app": "web"}), "{s}");
    k.ok(&[
        "create",
        "service",
        "nodeport",
        "np",
        "--tcp=80:http",
        "--node-port=30080",
    ])
    .await;
    let s = k.json(&["get", "service", "np"]).await;
    assert_eq!(s["spec"]["type"], "NodePort", "{s}");
    assert_eq!(s["spec"]["ports"][0]["nodePort"], 30080, "{s}");
    assert_eq!(s["spec"]["ports"][0]["targetPort"], "http", "{s}");
    k.ok(&["create", "service", "loadbalancer", "lb", "--tcp=443:8443"])
        .await;
    let out = k
        .ok(&["get", "service", "lb", "-o", "jsonpath={.spec.type}"])
        .await;
    assert_eq!(out, "LoadBalancer");
    k.ok(&[
        "create",
        "service",
        "externalname",
        "ext",
        "--external-name=db.example.com",
    ])
    .await;
    let out = k
        .ok(&[
            "get",
            "service",
            "ext",
            "-o",
            "jsonpath={.spec.externalName}",
        ])
        .await;
    assert_eq!(out, "db.example.com");

    // RBAC.
    k.ok(&["create", "serviceaccount", "robot"]).await;
    k.ok(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=pods,configmaps",
    ])
    .await;
    let r = k.json(&["get", "role", "reader"]).await;
    assert_eq!(r["rules"][0]["verbs"], json!(["get", "list"]), "{r}");
    assert_eq!(
        r["rules"][0]["resources"],
        json!(["pods", "configmaps"]),
        "{r}"
    );
    k.ok(&[
        "create",
        "rolebinding",
        "read",
        "--role=reader",
        "--user=alice",
        "--serviceaccount=default:robot",
    ])
    .await;
    let rb = k.json(&["get", "rolebinding", "read"]).await;
    assert_eq!(
        rb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}),
        "{rb}"
    );
    let kinds: Vec<&str> = rb["subjects"]
        .as_array()
        .expect("subjects")
        .iter()
        .filter_map(|s| s["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["User", "ServiceAccount"], "{rb}");
    k.ok(&[
        "create",
        "clusterrole",
        "node-reader",
        "--verb=get",
        "--resource=nodes",
        "--non-resource-url=/healthz",
    ])
    .await;
    let cr = k.json(&["get", "clusterrole", "node-reader"]).await;
    let rules = cr["rules"].as_array().expect("rules");
    assert!(
        rules.iter().any(|r| r["resources"] == json!(["nodes"])),
        "{cr}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r["nonResourceURLs"] == json!(["/healthz"])),
        "{cr}"
    );
    k.ok(&[
        "create",
        "clusterrolebinding",
        "nodes",
        "--clusterrole=node-reader",
        "--group=devs",
    ])
    .await;
    let crb = k.json(&["get", "clusterrolebinding", "nodes"]).await;
    assert_eq!(
        crb["subjects"][0],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}),
        "{crb}"
    );

    // Policy, scheduling, quota, networking.
    k.ok(&[
        "create",
        "priorityclass",
        "high",
        "--value=1000",
        "--description=important",
        "--preemption-policy=Never",
    ])
    .await;
    let pc = k.json(&["get", "priorityclass", "high"]).await;
    assert_eq!(
        (pc["value"].clone(), pc["description"].clone()),
        (json!(1000), json!("important")),
        "{pc}"
    );
    assert_eq!(pc["preemptionPolicy"], "Never", "{pc}");
    k.ok(&[
        "create",
        "poddisruptionbudget",
        "pdb",
        "--selector=app=web",
        "--min-available=50%",
    ])
    .await;
    let pdb = k.json(&["get", "pdb", "pdb"]).await;
    assert_eq!(pdb["spec"]["minAvailable"], "50%", "{pdb}");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        json!({"app": "web"}),
        "{pdb}"
    );
    k.ok(&[
        "create",
        "quota",
        "limits",
        "--hard=cpu=1,memory=1G,pods=2",
        "--scopes=BestEffort",
    ])
    .await;
    let q = k.json(&["get", "quota", "limits"]).await;
    assert_eq!(
        q["spec"]["hard"],
        json!({"cpu": "1", "memory": "1G", "pods": "2"}),
        "{q}"
    );
    assert_eq!(q["spec"]["scopes"], json!(["BestEffort"]), "{q}");
    k.ok(&[
        "create",
        "ingress",
        "site",
        "--class=default",
        "--rule=foo.example.com/bar*=svc1:8080",
    ])
    .await;
    let ing = k.json(&["get", "ingress", "site"]).await;
    assert_eq!(ing["spec"]["ingressClassName"], "default", "{ing}");
    let rule = &ing["spec"]["rules"][0];
    assert_eq!(rule["host"], "foo.example.com", "{ing}");
    let path = &rule["http"]["paths"][0];
    assert_eq!(
        (path["path"].clone(), path["pathType"].clone()),
        (json!("/bar"), json!("Prefix")),
        "{ing}"
    );
    assert_eq!(
        path["backend"]["service"],
        json!({"name": "svc1", "port": {"number": 8080}}),
        "{ing}"
    );

    // Secrets and config.
    k.ok(&["create", "secret", "generic", "plain", "--from-literal=a=b"])
        .await;
    let out = k
        .ok(&["get", "secret", "plain", "-o", "jsonpath={.data.a}"])
        .await;
    assert_eq!(out, "Yg==");
    k.ok(&[
        "create",
        "secret",
        "tls",
        "tls",
        &format!("--cert={}", kopf_file("tls.crt")),
        &format!("--key={}", kopf_file("tls.key")),
    ])
    .await;
    let s = k.json(&["get", "secret", "tls"]).await;
    assert_eq!(s["type"], "kubernetes.io/tls", "{s}");
    let crt = std::fs::read(kopf_file("tls.crt")).expect("read tls.crt");
    assert_eq!(s["data"]["tls.crt"], base64(&crt), "{s}");
    k.ok(&[
        "create",
        "secret",
        "docker-registry",
        "pull",
        "--docker-server=registry.example.com",
        "--docker-username=u",
        "--docker-password=p",
    ])
    .await;
    let s = k.json(&["get", "secret", "pull"]).await;
    assert_eq!(s["type"], "kubernetes.io/dockerconfigjson", "{s}");
    assert!(
        s["data"][".dockerconfigjson"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{s}"
    );
    k.ok(&["create", "configmap", "literal", "--from-literal=k=v"])
        .await;
    let out = k
        .ok(&["get", "cm", "literal", "-o", "jsonpath={.data.k}"])
        .await;
    assert_eq!(out, "v");
    k.ok(&["create", "namespace", "another"]).await;
    let out = k
        .ok(&[
            "get",
            "namespace",
            "another",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .await;
    assert_eq!(out, "Active");

    server.shutdown().await.expect("shutdown");
}

/// Standard base64 (what the server shows for a Secret's data).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(c.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(c.get(2).copied().unwrap_or(0));
        for i in 0..4 {
            out.push(if i <= c.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}
