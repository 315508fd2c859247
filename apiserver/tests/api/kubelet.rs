//! The simulated node and kubelet: scheduling (and cordoning), Pending → Running as watch
//! events, Jobs' pods completing, graceful deletion confirmed by the kubelet, pods'
//! subresources (binding, log, eviction, ephemeral containers, exec), and the server
//! without a kubelet.

use super::{get, post, raw, start, start_with};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kapsel_apiserver::Config;
use kube::api::{
    Api, DeleteParams, EvictParams, LogParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use serde_json::{Value, json};
use std::time::Duration;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], "terminationGracePeriodSeconds": 1},
    }))
    .expect("a pod")
}

/// The pod's events from now on, as JSON (ADDED, MODIFIED, DELETED with their object).
async fn events(
    pods: &Api<Pod>,
    name: &str,
) -> impl futures::Stream<Item = (String, Value)> + Unpin + use<> {
    let rv = pods
        .list(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let stream = pods.watch(&wp, &rv).await.expect("watch");
    Box::pin(
        stream
            .map_ok(|e| match e {
                WatchEvent::Added(p) => {
                    ("ADDED".to_string(), serde_json::to_value(p).expect("json"))
                }
                WatchEvent::Modified(p) => {
                    ("MODIFIED".into(), serde_json::to_value(p).expect("json"))
                }
                WatchEvent::Deleted(p) => {
                    ("DELETED".into(), serde_json::to_value(p).expect("json"))
                }
                other => ("OTHER".into(), json!(format!("{other:?}"))),
            })
            .map(|e| e.expect("a watch event")),
    )
}

/// The first event that `wanted` accepts (the deadline only guards against a hang).
async fn until(
    stream: &mut (impl futures::Stream<Item = (String, Value)> + Unpin),
    what: &str,
    wanted: impl Fn(&str, &Value) -> bool,
) -> Value {
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some((ty, pod)) = stream.next().await {
            if wanted(&ty, &pod) {
                return pod;
            }
        }
        panic!("the watch ended before {what}");
    });
    found.await.unwrap_or_else(|_| panic!("no event: {what}"))
}

fn condition<'a>(pod: &'a Value, ty: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == ty))
        .unwrap_or(&Value::Null)
}

fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_pod_is_scheduled_then_runs_as_a_kubelet_reports_it() {
    let (_server, client) = start().await;
    let node = Api::<Node>::all(client.clone())
        .get("kapsel-node")
        .await
        .unwrap();
    let node = serde_json::to_value(node).unwrap();
    assert_eq!(condition(&node, "Ready")["status"], "True");
    assert_eq!(node["status"]["allocatable"]["pods"], "110");
    assert_eq!(node["status"]["addresses"][0]["type"], "InternalIP");
    assert_eq!(node["status"]["nodeInfo"]["operatingSystem"], "linux");

    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "web").await;
    pods.create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let added = until(&mut seen, "ADDED", |ty, _| ty == "ADDED").await;
    assert_eq!(phase(&added), "Pending");
    assert!(added["spec"]["nodeName"].is_null());

    let bound = until(&mut seen, "the binding", |_, p| {
        !p["spec"]["nodeName"].is_null()
    })
    .await;
    assert_eq!(bound["spec"]["nodeName"], "kapsel-node");
    assert_eq!(condition(&bound, "PodScheduled")["status"], "True");
    assert!(
        bound["status"]["hostIP"].is_null(),
        "the binding alone: {bound}"
    );

    let creating = until(&mut seen, "containers being created", |_, p| {
        !p["status"]["hostIP"].is_null()
    })
    .await;
    assert_eq!(phase(&creating), "Pending");
    assert_eq!(creating["status"]["hostIP"], "172.18.0.2");
    assert!(creating["status"]["startTime"].is_string());
    let waiting = &creating["status"]["containerStatuses"][0];
    assert_eq!(waiting["state"]["waiting"]["reason"], "ContainerCreating");
    assert_eq!(waiting["ready"], false);
    assert_eq!(
        condition(&creating, "Ready")["reason"],
        "ContainersNotReady"
    );
    assert_eq!(
        condition(&creating, "ContainersReady")["message"],
        "containers with unready status: [app]"
    );
    assert_eq!(
        condition(&creating, "PodReadyToStartContainers")["status"],
        "False"
    );

    let running = until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    for ty in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(condition(&running, ty)["status"], "True", "{ty}: {running}");
    }
    let ip = running["status"]["podIP"].as_str().unwrap();
    assert!(ip.starts_with("10.244.0."), "{ip}");
    assert_eq!(running["status"]["podIPs"][0]["ip"], ip);
    let c = &running["status"]["containerStatuses"][0];
    assert_eq!(
        (
            c["name"].as_str(),
            c["ready"].as_bool(),
            c["started"].as_bool()
        ),
        (Some("app"), Some(true), Some(true))
    );
    assert_eq!(c["restartCount"], 0);
    assert_eq!(c["image"], "nginx:1.27");
    assert!(
        c["imageID"].as_str().unwrap().starts_with("nginx@sha256:"),
        "{c}"
    );
    assert!(
        c["containerID"]
            .as_str()
            .unwrap()
            .starts_with("containerd://"),
        "{c}"
    );
    assert!(c["state"]["running"]["startedAt"].is_string());
    // The kubelet's status writes are recorded as its own.
    let managers: Vec<&str> = running["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubelet"), "{managers:?}");
}

#[tokio::test]
async fn init_containers_complete_before_the_pod_runs() {
    let (_server, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "init").await;
    let mut p = pod("init");
    let spec = p.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![
        serde_json::from_value(json!({"name": "setup", "image": "busybox"})).unwrap(),
    ]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    let creating = until(&mut seen, "created", |_, p| {
        !p["status"]["hostIP"].is_null()
    })
    .await;
    assert_eq!(
        condition(&creating, "Initialized")["reason"],
        "ContainersNotInitialized"
    );
    assert_eq!(
        creating["status"]["initContainerStatuses"][0]["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    let running = until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    let init = &running["status"]["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["reason"], "Completed");
    assert_eq!(init["state"]["terminated"]["exitCode"], 0);
}

#[tokio::test]
async fn a_jobs_pod_and_an_annotated_pod_succeed() {
    let (server, client) =
        start_with(Config::default().job_pod_runtime(Duration::from_millis(50))).await;
    let job = post(
        &server,
        "/apis/batch/v1/namespaces/default/jobs",
        json!({"metadata": {"name": "once"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
    )
    .await
    .json();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "once-x").await;
    let mut p = pod("once-x");
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "name": "once", "uid": job["metadata"]["uid"], "controller": true
    })).unwrap()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    let done = until(&mut seen, "Succeeded", |_, p| phase(p) == "Succeeded").await;
    let c = &done["status"]["containerStatuses"][0];
    assert_eq!(c["state"]["terminated"]["reason"], "Completed");
    assert_eq!(c["state"]["terminated"]["exitCode"], 0);
    assert_eq!(c["ready"], false);
    assert_eq!(condition(&done, "Ready")["reason"], "PodCompleted");

    // Not a Job's, but annotated to finish.
    let mut seen = events(&pods, "batch").await;
    let mut p = pod("batch");
    p.spec.as_mut().unwrap().restart_policy = Some("OnFailure".into());
    p.metadata.annotations = Some(
        [(
            "kubelet.kapsel.dev/run-for-ms".to_string(),
            "30".to_string(),
        )]
        .into(),
    );
    pods.create(&PostParams::default(), &p).await.unwrap();
    until(&mut seen, "Succeeded", |_, p| phase(p) == "Succeeded").await;
}

#[tokio::test]
async fn graceful_deletion_waits_for_the_kubelet() {
    let (_server, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "slow").await;
    pods.create(&PostParams::default(), &pod("slow"))
        .await
        .unwrap();
    until(&mut seen, "Running", |_, p| phase(p) == "Running").await;

    // A grace period the request names, long enough that the writes below land within
    // it on a loaded machine.
    let grace = DeleteParams::default().grace_period(5);
    let deleting = pods.delete("slow", &grace).await.unwrap();
    let deleting = deleting.left().expect("the pod, still there");
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(5));
    assert!(deleting.metadata.deletion_timestamp.is_some());
    // Still there, until the kubelet confirms the deletion, whatever writes it meanwhile.
    let label = json!({"metadata": {"labels": {"touched": "yes"}}});
    let stored = pods
        .patch("slow", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    assert!(stored.metadata.deletion_timestamp.is_some());
    assert!(pods.get_opt("slow").await.unwrap().is_some());
    until(&mut seen, "the marked pod", |ty, p| {
        ty == "MODIFIED" && !p["metadata"]["deletionTimestamp"].is_null()
    })
    .await;
    let confirmed = until(&mut seen, "the kubelet's confirmation", |ty, p| {
        ty != "OTHER" && p["metadata"]["deletionGracePeriodSeconds"] != 5
    })
    .await;
    assert_eq!(
        confirmed["metadata"]["deletionGracePeriodSeconds"], 0,
        "{confirmed}"
    );
    until(&mut seen, "DELETED", |ty, _| ty == "DELETED").await;
    assert!(pods.get_opt("slow").await.unwrap().is_none());
}

#[tokio::test]
async fn a_finalizer_outlives_the_kubelets_confirmation() {
    let (_server, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "held").await;
    let mut p = pod("held");
    p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    until(&mut seen, "the confirmation", |_, p| {
        p["metadata"]["deletionGracePeriodSeconds"] == 0
    })
    .await;
    assert!(
        pods.get_opt("held").await.unwrap().is_some(),
        "the finalizer holds it"
    );
    let release = json!({"metadata": {"finalizers": null}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    until(&mut seen, "DELETED", |ty, _| ty == "DELETED").await;
}

#[tokio::test]
async fn unscheduled_pods_and_forced_deletes_go_at_once() {
    let (_server, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    // A pod for another scheduler is never bound: deleted at once.
    let mut p = pod("elsewhere");
    p.spec.as_mut().unwrap().scheduler_name = Some("my-scheduler".into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    assert!(
        pods.delete("elsewhere", &DeleteParams::default())
            .await
            .unwrap()
            .is_left()
    );
    assert!(pods.get_opt("elsewhere").await.unwrap().is_none());
    // `kubectl delete --force --grace-period=0` of a running pod.
    let mut seen = events(&pods, "forced").await;
    pods.create(&PostParams::default(), &pod("forced"))
        .await
        .unwrap();
    until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("forced", &dp).await.unwrap();
    assert!(pods.get_opt("forced").await.unwrap().is_none());
}

#[tokio::test]
async fn a_cordoned_node_keeps_new_pods_pending() {
    let (_server, client) = start().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = |on: bool| json!({"spec": {"unschedulable": on}});
    nodes
        .patch(
            "kapsel-node",
            &PatchParams::default(),
            &Patch::Merge(&cordon(true)),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "waits").await;
    pods.create(&PostParams::default(), &pod("waits"))
        .await
        .unwrap();
    let refused = until(&mut seen, "unschedulable", |_, p| {
        condition(p, "PodScheduled")["status"] == "False"
    })
    .await;
    let scheduled = condition(&refused, "PodScheduled");
    assert_eq!(scheduled["reason"], "Unschedulable");
    assert_eq!(
        scheduled["message"],
        "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    assert!(refused["spec"]["nodeName"].is_null());
    // Uncordoned, the pod is scheduled and runs.
    nodes
        .patch(
            "kapsel-node",
            &PatchParams::default(),
            &Patch::Merge(&cordon(false)),
        )
        .await
        .unwrap();
    let running = until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    assert_eq!(running["spec"]["nodeName"], "kapsel-node");
}

#[tokio::test]
async fn logs_evictions_and_ephemeral_containers() {
    let (server, client) = start_with(Config::default().pod_log("hello from kapsel")).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "talk").await;
    pods.create(&PostParams::default(), &pod("talk"))
        .await
        .unwrap();
    until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    assert_eq!(
        pods.logs("talk", &LogParams::default()).await.unwrap(),
        "hello from kapsel\n"
    );
    let raw_log = get(&server, &format!("{PODS}/talk/log")).await;
    assert_eq!(
        (raw_log.code, raw_log.header("content-type")),
        (200, Some("text/plain"))
    );
    let wrong = get(&server, &format!("{PODS}/talk/log?container=nope")).await;
    assert_eq!(wrong.code, 400);
    assert_eq!(
        wrong.json()["message"],
        "container nope is not valid for pod talk"
    );

    // Ephemeral containers are stored, and nothing else of the body.
    let mut with_debug = pods.get_ephemeral_containers("talk").await.unwrap();
    with_debug.spec.as_mut().unwrap().ephemeral_containers = Some(vec![
        serde_json::from_value(json!({"name": "debug", "image": "busybox"})).unwrap(),
    ]);
    with_debug.metadata.labels = Some([("ignored".to_string(), "yes".to_string())].into());
    let stored = pods
        .replace_ephemeral_containers("talk", &PostParams::default(), &with_debug)
        .await
        .unwrap();
    let debug = stored.spec.unwrap().ephemeral_containers.unwrap();
    assert_eq!(debug[0].name, "debug");
    assert!(
        stored
            .metadata
            .labels
            .is_none_or(|l| !l.contains_key("ignored"))
    );

    // An eviction deletes the pod gracefully.
    let status = pods.evict("talk", &EvictParams::default()).await.unwrap();
    assert_eq!(status.code, 201);
    until(&mut seen, "the eviction's mark", |_, p| {
        !p["metadata"]["deletionTimestamp"].is_null()
    })
    .await;
    until(&mut seen, "DELETED", |ty, _| ty == "DELETED").await;
    let mismatch = post(
        &server,
        &format!("{PODS}/other/eviction"),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "talk"}}),
    )
    .await;
    assert_eq!(mismatch.code, 400);
    assert_eq!(
        mismatch.json()["message"],
        "name in URL does not match name in Eviction object"
    );
}

#[tokio::test]
async fn exec_attach_and_portforward_cannot_reach_a_container() {
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "shell").await;
    pods.create(&PostParams::default(), &pod("shell"))
        .await
        .unwrap();
    until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    let dial = "error dialing backend: dial tcp 172.18.0.2:10250: connect: connection refused";
    for path in [
        "exec?command=ls&stdout=true",
        "attach?stdout=true",
        "portforward?ports=80",
    ] {
        let r = raw(&server, "POST", &format!("{PODS}/shell/{path}"), None, b"").await;
        assert_eq!(
            (r.code, r.json()["message"].as_str()),
            (500, Some(dial)),
            "{path}"
        );
        assert_eq!(r.json()["status"], "Failure");
    }
    let r = get(
        &server,
        &format!("{PODS}/shell/exec?command=ls&container=nope"),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].as_str()),
        (400, Some("container nope is not valid for pod shell"))
    );
}

#[tokio::test]
async fn without_the_kubelet_pods_stay_as_stored() {
    let (server, client) = start_with(Config::default().kubelet(false)).await;
    assert!(
        Api::<Node>::all(client.clone())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("still"))
        .await
        .unwrap();
    // A binding, as a scheduler of the test's own would write it.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "still", "annotations": {"placed-by": "test"}}, "target": {"kind": "Node", "name": "n1"}});
    let bound = post(&server, &format!("{PODS}/still/binding"), binding.clone()).await;
    assert_eq!(
        (bound.code, bound.json()["status"].as_str()),
        (201, Some("Success"))
    );
    let again = post(&server, &format!("{PODS}/still/binding"), binding).await;
    assert_eq!(again.code, 409);
    assert_eq!(
        again.json()["message"],
        "Operation cannot be fulfilled on pods/binding \"still\": pod still is already assigned to node \"n1\""
    );
    let stored = pods.get("still").await.unwrap();
    assert_eq!(stored.metadata.annotations.unwrap()["placed-by"], "test");
    assert_eq!(stored.spec.unwrap().node_name.as_deref(), Some("n1"));
    let status = stored.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(status.host_ip.is_none() && status.container_statuses.is_none());
    // Nobody confirms a graceful deletion: it is immediate, as before.
    assert!(
        pods.delete("still", &DeleteParams::default())
            .await
            .unwrap()
            .is_left()
    );
    assert!(pods.get_opt("still").await.unwrap().is_none());
}

/// The kubelet's writes are the cluster's like any other: in the state file, and after a
/// restart (without the kubelet, so nothing moves) the pod is as it last was.
#[tokio::test]
async fn the_kubelets_writes_are_in_the_state_file() {
    let dir = std::env::temp_dir().join(format!("kapsel-kubelet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state.jsonl");
    let (server, client) = start_with(Config::default().state_file(&path)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut seen = events(&pods, "kept").await;
    pods.create(&PostParams::default(), &pod("kept"))
        .await
        .unwrap();
    let running = until(&mut seen, "Running", |_, p| phase(p) == "Running").await;
    server.shutdown().await.unwrap();

    let config = Config::default().state_file(&path).kubelet(false);
    let (_server, client) = start_with(config).await;
    let again = Api::<Pod>::namespaced(client.clone(), "default")
        .get("kept")
        .await
        .unwrap();
    let again = serde_json::to_value(again).unwrap();
    assert_eq!(again["status"], running["status"]);
    assert_eq!(again["spec"]["nodeName"], "kapsel-node");
    // The node it registered is kept too.
    assert!(
        Api::<Node>::all(client)
            .get_opt("kapsel-node")
            .await
            .unwrap()
            .is_some()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
