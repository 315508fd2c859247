//! Run operators on a fresh in-memory cluster, for tests (Kopf's `KopfRunner`, and more).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use kapsel_host::{testing::Cluster, Operator};
//! let cluster = Cluster::start().await?;
//! let operator = cluster.start_operator(Operator::new(["seed.wasm"]));
//! // ... create objects with cluster.client(), then:
//! operator.journal().wait_for(std::time::Duration::from_secs(5), |records| !records.is_empty()).await.ok();
//! operator.stop().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use kapsel_apiserver::{ApiServer, Fault, Faults, RequestMatcher};

use crate::{Error, Journal, Operator};

/// A kube client for an API server at this URL (plain HTTP on loopback).
///
/// # Errors
/// The URL does not parse, or the client cannot be built.
pub fn client_for(url: &str) -> Result<kube::Client, String> {
    let uri = url
        .parse()
        .map_err(|e| format!("bad API server URL {url}: {e}"))?;
    let config = kube::Config::new(uri);
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client for {url}: {e}"))
}

/// A fresh in-memory cluster on a free loopback port.
pub struct Cluster {
    server: ApiServer,
    client: kube::Client,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.server.url())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts an empty cluster (namespaces `default`, `kube-system`, `kube-public`).
    ///
    /// # Errors
    /// The server cannot bind a port.
    pub async fn start() -> Result<Cluster, Box<dyn std::error::Error + Send + Sync>> {
        let server = ApiServer::start(kapsel_apiserver::Config::default()).await?;
        let client = client_for(&server.url())?;
        Ok(Cluster { server, client })
    }

    /// A client of this cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The API server, e.g. for its URL, kubeconfig and fault injection.
    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    /// Starts an operator on this cluster in the background.
    pub fn start_operator(&self, operator: Operator) -> RunningOperator {
        let operator = operator.client(self.client.clone());
        let journal = operator.journal();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(operator.run(async move { stopped.cancelled().await }));
        RunningOperator {
            journal,
            stop,
            task,
        }
    }

    /// Stops the server.
    ///
    /// # Errors
    /// The server did not stop cleanly (e.g. its state file could not be saved).
    pub async fn shutdown(self) -> Result<(), kapsel_apiserver::Error> {
        self.server.shutdown().await
    }
}

/// An operator running in the background.
#[derive(Debug)]
pub struct RunningOperator {
    journal: Journal,
    stop: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
}

impl RunningOperator {
    /// What the operator did so far.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Whether the operator has exited on its own (e.g. an error at start).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the operator gracefully and returns how it ended.
    ///
    /// # Errors
    /// The operator's own error; or, if it did not stop within 30 s, that.
    pub async fn stop(self) -> Result<(), Error> {
        self.stop.cancel();
        match tokio::time::timeout(Duration::from_secs(30), self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(Error::Operator(Box::new(join))),
            Err(_) => Err(Error::Operator(
                "the operator did not stop within 30 s".into(),
            )),
        }
    }
}

/// How a [`run_cases`] run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseSummary {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
}

/// Runs `kapsel test` in-process: `guest` against the case files (or directories of
/// them), each on a fresh embedded cluster; the report is written to `out`.
///
/// # Errors
/// A case file that cannot be parsed (the message names the file, line and problem),
/// a guest that cannot be loaded, or no case selected.
pub async fn run_cases(
    guest: &std::path::Path,
    cases: &[std::path::PathBuf],
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, String> {
    test(guest, cases, &[], out).await
}

/// Runs `kapsel test GUEST --replay FILE...` in-process: each recording of
/// `kapsel run --record` is replayed against `guest` on a fresh embedded cluster, and
/// what the guest did differently is reported to `out`.
///
/// # Errors
/// A recording that cannot be read (the message names the file and line), or a guest
/// that cannot be loaded.
pub async fn replay(
    guest: &std::path::Path,
    recordings: &[std::path::PathBuf],
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, String> {
    test(guest, &[], recordings, out).await
}

async fn test(
    guest: &std::path::Path,
    cases: &[std::path::PathBuf],
    replays: &[std::path::PathBuf],
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, String> {
    let request = crate::cases::TestRequest {
        guest: guest.to_path_buf(),
        cases: cases.to_vec(),
        replays: replays.to_vec(),
        filter: None,
        verbose: true,
        junit: None,
    };
    let summary = crate::cases::run(&request, out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(CaseSummary {
        passed: summary.passed,
        failed: summary.failed,
    })
}

/// Kopf's `KopfRunner`: a `kapsel run` command line, run in the background on a fresh
/// embedded cluster, with its log output captured.
///
/// ```no_run
/// # async fn demo() -> Result<(), String> {
/// use kapsel_host::testing::Runner;
/// let runner = Runner::start(["run", "-A", "--standalone", "minimal.wasm"]).await?;
/// let client = runner.client();
/// // ... create objects with the client, wait on runner.journal(), then:
/// let result = runner.stop().await;
/// assert_eq!(result.exit_code, 0, "{}", result.output);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Runner {
    cluster: Cluster,
    journal: Journal,
    stop: CancellationToken,
    output: crate::capture::Output,
    thread: std::thread::JoinHandle<Result<(), Error>>,
}

/// The longest [`Runner::start`] waits for its operator to be running.
const RUNNER_READY_LIMIT: Duration = Duration::from_secs(60);

/// How a [`Runner`]'s operator ended.
#[derive(Debug)]
pub struct RunResult {
    /// As the `kapsel` binary would exit: 0 when it stopped cleanly, 1 when it failed.
    pub exit_code: u8,
    /// Everything it logged (plain text, one line per message).
    pub output: String,
    /// Its error, if it failed.
    pub error: Option<Error>,
}

impl Runner {
    /// Starts a fresh cluster and, in a thread of its own, the operator that the
    /// arguments after `kapsel` describe (`["run", "-A", "guest.wasm"]`); returns once
    /// the operator is running (its guests loaded, startup handlers done, its watch
    /// streams started) or has exited, as Kopf's `KopfRunner` waits for its operator
    /// to be ready. (Bounded: after a minute it returns anyway.)
    ///
    /// # Errors
    /// A usage error in the arguments (what `kapsel` would print, exit code 2), or a
    /// cluster that cannot start.
    pub async fn start<I, T>(args: I) -> Result<Runner, String>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let operator = crate::cli::operator_from_args(args)?;
        let cluster = Cluster::start().await.map_err(|e| e.to_string())?;
        let operator = operator.client(cluster.client());
        let journal = operator.journal();
        let mut started = operator.settings.started.subscribe();
        let stop = CancellationToken::new();
        let output = crate::capture::Output::default();
        let (thread_stop, writer) = (stop.clone(), output.clone());
        let thread = std::thread::Builder::new()
            .name("kapsel-runner".into())
            .spawn(move || {
                // One thread runs everything of this operator: its lines are this
                // thread's.
                let _capture = crate::capture::this_thread(writer);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Error::Runtime(Box::new(e)))?;
                runtime.block_on(operator.run(async move { thread_stop.cancelled().await }))
            })
            .map_err(|e| format!("cannot start the runner's thread: {e}"))?;
        let deadline = tokio::time::Instant::now() + RUNNER_READY_LIMIT;
        while !*started.borrow_and_update()
            && !thread.is_finished()
            && tokio::time::Instant::now() < deadline
        {
            // Woken by the start; polled for an exit (the flag is never set then).
            let _ = tokio::time::timeout(Duration::from_millis(20), started.changed()).await;
        }
        Ok(Runner {
            cluster,
            journal,
            stop,
            output,
            thread,
        })
    }

    /// A client of the runner's cluster.
    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    /// The runner's cluster (its URL, kubeconfig, fault injection).
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// What the operator did so far (wait on it with [`Journal::wait_for`]).
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The log output so far.
    pub fn output(&self) -> String {
        self.output.text()
    }

    /// Whether the operator has exited on its own.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops the operator gracefully, then the cluster; returns how the operator ended.
    pub async fn stop(self) -> RunResult {
        self.stop.cancel();
        let thread = self.thread;
        let ended = tokio::task::spawn_blocking(move || thread.join()).await;
        let result = match ended {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(Error::Operator("the operator's thread panicked".into())),
        };
        let _ = self.cluster.shutdown().await;
        let output = self.output.text();
        match result {
            Ok(()) => RunResult {
                exit_code: 0,
                output,
                error: None,
            },
            Err(error) => RunResult {
                exit_code: 1,
                output,
                error: Some(error),
            },
        }
    }
}
