//! Embedding: an application with a main loop of its own runs a Kapsel operator in a
//! side thread (KOPF.md §11), and stops it through its handle when it is done.
//!
//! The application here is deliberately plain (no async main): it starts an in-memory
//! API server so that it runs anywhere, spawns the operator with the guests it is
//! given (e.g. the `seed` example, which logs every pod event), then creates a pod per
//! tick of its own loop and finally stops the operator and reports what the operator's
//! handlers did. Signals stay with the
//! application: the embedded operator never installs handlers for them.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kapsel_host::{Operator, Record};
use kube::api::{Api, ObjectMeta, PostParams};

/// What the application saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Pods the application created.
    pub created: usize,
    /// Handler calls the operator made meanwhile.
    pub handler_calls: usize,
}

/// Runs the application: `ticks` rounds of its main loop beside the operator.
///
/// # Errors
/// What went wrong, as a message: the API server, the operator, or a request.
pub fn run(guests: Vec<PathBuf>, ticks: usize) -> Result<Report, String> {
    // The application's own runtime, for its own work (here: the API server and requests).
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let server = runtime
        .block_on(kapsel_apiserver::ApiServer::start(
            kapsel_apiserver::Config::default(),
        ))
        .map_err(|e| format!("cannot start the API server: {e}"))?;
    let client = {
        let _entered = runtime.enter();
        let url = server.url();
        let uri = url.parse().map_err(|e| format!("bad URL {url}: {e}"))?;
        kapsel_host::kube_client(kube::Config::new(uri)).map_err(|e| e.to_string())?
    };

    let operator = Operator::new(guests)
        .all_namespaces()
        .standalone()
        .client(client.clone());
    let journal = operator.journal();
    let handle = operator.spawn().map_err(|e| e.to_string())?;
    if !handle.wait_ready(Duration::from_secs(30)) {
        let error = handle.stop().err().map(|e| e.to_string());
        return Err(format!(
            "the operator did not start: {}",
            error.unwrap_or_else(|| "it stopped".into())
        ));
    }

    // The application's main loop.
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut created = 0;
    for tick in 0..ticks {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(format!("tick-{tick}")),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("nginx".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        runtime
            .block_on(pods.create(&PostParams::default(), &pod))
            .map_err(|e| format!("creating tick-{tick}: {e}"))?;
        created += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    // Give the handlers a moment for the last pod, then stop the operator.
    let calls = |records: &[Record]| {
        records
            .iter()
            .filter(|r| matches!(r, Record::HandlerCalled { .. }))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls(&journal.records()) < created && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    handle
        .stop()
        .map_err(|e| format!("the operator failed: {e}"))?;
    runtime
        .block_on(server.shutdown())
        .map_err(|e| e.to_string())?;
    Ok(Report {
        created,
        handler_calls: calls(&journal.records()),
    })
}
