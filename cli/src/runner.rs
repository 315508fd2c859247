//! [`Runner`], Kopf's `KopfRunner`: a `kapsel run` command line run in-process, in the
//! background, on a fresh embedded cluster or on a cluster of the caller's, with its log
//! output captured.

use std::time::Duration;

use kapsel_host::testing::{Cluster, ClusterError};
use kapsel_host::{Error, Journal};
use tokio_util::sync::CancellationToken;

/// Why a [`Runner`] did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// The command line is not a `kapsel run` one (what `kapsel` would print; it
    /// would exit with 2).
    #[error("{0}")]
    Usage(String),
    /// The in-memory cluster did not start.
    #[error("the runner's cluster did not start")]
    Cluster(#[from] ClusterError),
    /// The runner's thread could not be started.
    #[error("cannot start the runner's thread")]
    Thread(#[source] std::io::Error),
}

/// Kopf's `KopfRunner`: a `kapsel run` command line, run in the background on a fresh
/// embedded cluster ([`Runner::start`]) or on an existing one, as `KopfRunner` runs on
/// the cluster of the current kubeconfig ([`Runner::start_on`]), with its log output
/// captured.
///
/// ```no_run
/// # async fn demo() -> Result<(), kapsel_cli::RunnerError> {
/// use kapsel_cli::Runner;
/// let runner = Runner::start(["run", "-A", "--standalone", "minimal.wasm"]).await?;
/// let client = runner.client();
/// // ... create objects with the client, wait on runner.journal(), then:
/// let result = runner.stop().await;
/// assert_eq!(result.exit_code, 0, "{}", result.output);
/// # Ok(()) }
/// ```
pub struct Runner {
    /// The cluster the runner started, if it started one (stopped with the runner).
    cluster: Option<Cluster>,
    client: kube::Client,
    journal: Journal,
    stop: CancellationToken,
    output: crate::capture::Output,
    thread: std::thread::JoinHandle<Result<(), Error>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("cluster", &self.cluster)
            .field("finished", &self.thread.is_finished())
            .finish_non_exhaustive()
    }
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
    pub async fn start<I, T>(args: I) -> Result<Runner, RunnerError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let operator = crate::commands::operator_from_args(args).map_err(RunnerError::Usage)?;
        let cluster = Cluster::start().await?;
        Runner::run(operator, cluster.client(), Some(cluster)).await
    }

    /// As [`Runner::start`], on an existing cluster that `client` reaches: a
    /// `kapsel dev-cluster`, or a real one (`kapsel_host::default_kube_client()` finds
    /// it as `kapsel run` does: in-cluster, `KUBECONFIG`, `~/.kube/config`). The cluster
    /// is left as it is when the runner stops; what the operator wrote stays in it.
    ///
    /// # Errors
    /// A usage error in the arguments (what `kapsel` would print, exit code 2).
    pub async fn start_on<I, T>(client: kube::Client, args: I) -> Result<Runner, RunnerError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let operator = crate::commands::operator_from_args(args).map_err(RunnerError::Usage)?;
        Runner::run(operator, client, None).await
    }

    /// Runs `operator` on `client`'s cluster in a thread of its own, and waits until it
    /// runs (or has ended).
    async fn run(
        operator: kapsel_host::Operator,
        client: kube::Client,
        cluster: Option<Cluster>,
    ) -> Result<Runner, RunnerError> {
        let operator = operator.client(client.clone());
        let journal = operator.journal();
        let mut ready = operator.readiness();
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
            .map_err(RunnerError::Thread)?;
        // Ends when the operator runs, or when it ended without running.
        let _ = tokio::time::timeout(RUNNER_READY_LIMIT, ready.wait()).await;
        Ok(Runner {
            cluster,
            client,
            journal,
            stop,
            output,
            thread,
        })
    }

    /// A client of the runner's cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The cluster the runner started (its URL, kubeconfig, fault injection); `None`
    /// when it runs on a cluster of the caller's ([`Runner::start_on`]).
    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_ref()
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

    /// Stops the operator gracefully, then the cluster if the runner started it; returns
    /// how the operator ended.
    pub async fn stop(self) -> RunResult {
        self.stop.cancel();
        let thread = self.thread;
        let ended = tokio::task::spawn_blocking(move || thread.join()).await;
        let result = match ended {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(Error::Operator("the operator's thread panicked".into())),
        };
        if let Some(cluster) = self.cluster {
            let _ = cluster.shutdown().await;
        }
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
