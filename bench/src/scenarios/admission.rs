//! The `admission` run: the operator serves a validating handler over HTTPS (Kapsel:
//! `kapsel run --admission-listen` with examples/admission, a fresh sandboxed instance per
//! review; Kopf: its `WebhookServer` with the same handler in Python), with a certificate
//! the bench makes; the bench sends AdmissionReviews of a 4 KB object straight to it:
//! first at a fixed rate (latency), then as many as some connections carry (throughput,
//! and the server's CPU time per review).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Context;
use super::live::{Live, fresh_cluster};
use crate::operators::{KAPSEL_RUNNING, Kind};
use crate::procs::{Launch, Proc};
use crate::reviews::{self, Load, Server};
use crate::stats::percentile;

/// The reviews per second offered in the latency load.
pub(crate) const RATE: f64 = 200.0;
/// The connections the offered load is spread over (as an API server keeps several).
const OFFERED_CONNECTIONS: usize = 8;
/// The connections of the throughput load.
const SATURATING_CONNECTIONS: usize = 8;
/// The webhook's path: Kapsel's `<guest>/<handler id>`, Kopf's `<handler id>`.
fn path(kind: Kind) -> &'static str {
    match kind {
        Kind::Kapsel => "admission/check_field",
        _ => "check_field",
    }
}

/// One load's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LoadFigures {
    pub(crate) connections: usize,
    pub(crate) answered: u64,
    pub(crate) failed: u64,
    pub(crate) first_failure: Option<String>,
    pub(crate) reviews_per_s: f64,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    pub(crate) max_ms: Option<f64>,
    /// The server process's CPU time over the load.
    pub(crate) cpu_s: Option<f64>,
}

impl LoadFigures {
    fn of(load: &Load, connections: usize, cpu_s: Option<f64>) -> LoadFigures {
        LoadFigures {
            connections,
            answered: load.answered,
            failed: load.failed,
            first_failure: load.first_failure.clone(),
            reviews_per_s: load.answered as f64 / load.elapsed_s.max(1e-9),
            p50_ms: percentile(&load.latencies_ms, 50.0),
            p99_ms: percentile(&load.latencies_ms, 99.0),
            max_ms: load.latencies_ms.last().copied(),
            cpu_s,
        }
    }

    /// Reviews per second of the server's CPU time (per core).
    pub(crate) fn per_core(&self) -> Option<f64> {
        self.cpu_s
            .filter(|&cpu| cpu > 0.0)
            .map(|cpu| self.answered as f64 / cpu)
    }
}

/// One `admission` run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AdmissionRun {
    pub(crate) operator: Kind,
    pub(crate) review_bytes: usize,
    pub(crate) offered_rate: f64,
    pub(crate) offered: Option<LoadFigures>,
    pub(crate) saturated: Option<LoadFigures>,
    pub(crate) log: Option<PathBuf>,
    pub(crate) error: Option<String>,
}

/// Serves the handler with `kind` and measures both loads, each for its duration.
pub(crate) async fn admission(
    ctx: &Context,
    kind: Kind,
    offered_for: Duration,
    saturated_for: Duration,
) -> AdmissionRun {
    let body = Arc::new(reviews::review("value").to_string().into_bytes());
    let mut run = AdmissionRun {
        operator: kind,
        review_bytes: body.len(),
        offered_rate: RATE,
        offered: None,
        saturated: None,
        log: None,
        error: None,
    };
    let mut live = Live::default();
    let steps = steps(
        ctx,
        kind,
        body,
        (offered_for, saturated_for),
        &mut run,
        &mut live,
    );
    if let Err(e) = steps.await {
        run.error = Some(format!("{} admission: {e}", kind.name()));
    }
    (_, run.log) = live.stop().await;
    run
}

async fn steps(
    ctx: &Context,
    kind: Kind,
    body: Arc<Vec<u8>>,
    (offered_for, saturated_for): (Duration, Duration),
    run: &mut AdmissionRun,
    live: &mut Live,
) -> Result<(), String> {
    let name = format!("admission-{}", kind.name());
    live.cluster = Some(
        fresh_cluster(ctx, &name)
            .await
            .map_err(|e| format!("cluster: {e}"))?,
    );
    let dir = ctx.dir.join(&name);
    let certificate = reviews::certificate()?;
    let write = |file: &str, text: &str| {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok::<_, String>(path.display().to_string())
    };
    let (cert, key) = (
        write("cert.pem", &certificate.cert)?,
        write("key.pem", &certificate.key)?,
    );
    let port = free_port()?;
    let launch = launch(ctx, kind, &live.cluster()?.kubeconfig, port, &cert, &key)?;
    let log = dir.join(format!("{}.log", kind.name()));
    live.operator = Some(Proc::spawn(kind.name(), &launch, &log).await?);
    let server = Arc::new(Server::new(
        ([127, 0, 0, 1], port).into(),
        path(kind),
        &certificate.ca,
    )?);
    ready(&server, live.operator()?).await?;
    eprintln!("  {RATE} reviews/s offered for {} s", offered_for.as_secs());
    let load = reviews::offered(
        server.clone(),
        body.clone(),
        RATE,
        offered_for,
        OFFERED_CONNECTIONS,
    )
    .await;
    run.offered = Some(LoadFigures::of(&load, OFFERED_CONNECTIONS, None));
    eprintln!(
        "  as many as {SATURATING_CONNECTIONS} connections carry, for {} s",
        saturated_for.as_secs()
    );
    let operator = live.operator()?;
    let before = operator.sample()?.cpu_s;
    let load = reviews::saturated(server, body, saturated_for, SATURATING_CONNECTIONS).await;
    let cpu = operator.sample()?.cpu_s - before;
    run.saturated = Some(LoadFigures::of(&load, SATURATING_CONNECTIONS, Some(cpu)));
    operator.check_alive()
}

/// The server's command: Kapsel with the admission example, or Kopf with the same
/// handler; both on the cluster (which they discover the resource from).
fn launch(
    ctx: &Context,
    kind: Kind,
    kubeconfig: &std::path::Path,
    port: u16,
    cert: &str,
    key: &str,
) -> Result<Launch, String> {
    let operators = &ctx.operators;
    let env = vec![("KUBECONFIG".to_owned(), kubeconfig.display().to_string())];
    Ok(match kind {
        Kind::Kapsel => Launch {
            program: operators.kapsel.clone(),
            args: vec![
                "run".into(),
                "--standalone".into(),
                "-A".into(),
                "--admission-listen".into(),
                format!("127.0.0.1:{port}"),
                "--admission-cert".into(),
                cert.into(),
                "--admission-key".into(),
                key.into(),
                operators.admission_guest.display().to_string(),
            ],
            env: [env, operators.kapsel_env.clone()].concat(),
            marks: vec![KAPSEL_RUNNING.to_owned()],
        },
        Kind::Kopf => Launch {
            program: operators.kopf.clone()?,
            args: vec![
                "run".into(),
                "--standalone".into(),
                "-A".into(),
                operators.kopf_admission_script.display().to_string(),
            ],
            env: [
                env,
                vec![
                    ("PYTHONUNBUFFERED".to_owned(), "1".to_owned()),
                    ("KOPF_ADMISSION_PORT".to_owned(), port.to_string()),
                    ("KOPF_ADMISSION_CERTFILE".to_owned(), cert.to_owned()),
                    ("KOPF_ADMISSION_PKEYFILE".to_owned(), key.to_owned()),
                ],
            ]
            .concat(),
            marks: vec![],
        },
        Kind::Watcher => return Err("the watcher serves no webhooks".to_owned()),
    })
}

/// Waits until the server answers, and checks that it does the handler's work: the
/// review allowed, and a forbidden field refused with the handler's message and code.
async fn ready(server: &Server, operator: &mut Proc) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let allowed = reviews::review("value").to_string().into_bytes();
    let answer = loop {
        operator.check_alive()?;
        match server.answer(&allowed).await {
            Ok(answer) => break answer,
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "the webhook server did not answer within 60 s: {e}; see {}",
                    operator.log.display()
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    if answer["allowed"] != true {
        return Err(format!("a review that passes was not allowed: {answer}"));
    }
    let refused = server
        .answer(reviews::review("forbidden").to_string().as_bytes())
        .await?;
    let status = &refused["status"];
    if refused["allowed"] != false
        || status["code"] != 422
        || status["message"] != "field must not be forbidden"
    {
        return Err(format!("not the handler's refusal: {refused}"));
    }
    Ok(())
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free port: {e}"))
}
