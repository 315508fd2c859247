//! The `kapsel` command line: parsing and dispatch. `main.rs` only adds
//! logging and signals; tests run the same commands in-process.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Kubernetes operators whose handlers are sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "kapsel", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    #[command(flatten)]
    pub(crate) logging: Logging,
}

/// Logging options, shared by every command (as in `kopf run`).
#[derive(Debug, Clone, Args)]
pub struct Logging {
    /// Show the operator's debug messages.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Show debug messages, the libraries' too (Kubernetes client, HTTP).
    #[arg(short, long, global = true)]
    pub debug: bool,
    /// Show only warnings and errors.
    #[arg(short, long, global = true, conflicts_with_all = ["verbose", "debug"])]
    pub quiet: bool,
    /// How log lines look.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Full)]
    pub log_format: LogFormat,
    /// Only the command's own messages: set for commands whose output is a report
    /// (`kapsel test`) unless `-v`/`-d` asks for the operators' lines too.
    #[arg(skip)]
    pub report_only: bool,
}

/// Log line formats, as Kopf names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// The message only.
    Plain,
    /// Time, level, source and message.
    Full,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run an operator: serve the handlers of the given guests.
    Run(RunArgs),
    /// Print the handlers a guest declares, as JSON.
    Inspect {
        /// A .wasm file.
        guest: PathBuf,
    },
    /// Serve an in-memory Kubernetes API server on 127.0.0.1 (kubectl works with it).
    DevCluster(DevClusterArgs),
    /// Pause the operators of lower priority: write a peer record that lasts a while.
    Freeze(FreezeArgs),
    /// Remove the record `freeze` wrote, so that the paused operators resume.
    Resume(ResumeArgs),
    /// Test a guest against case files, each on a fresh embedded cluster, or replay recordings.
    Test(TestArgs),
    /// Print the RBAC manifests the guests need (resolved on the current cluster).
    Rbac(RbacArgs),
}

/// `kapsel rbac GUEST...`: a ServiceAccount, a ClusterRole and its binding, as YAML.
#[derive(Debug, Args)]
pub(crate) struct RbacArgs {
    /// Guests: .wasm files or directories of them.
    #[arg(required = true)]
    pub(crate) guests: Vec<PathBuf>,
    /// The ServiceAccount's name (also the role's and the binding's).
    #[arg(long, default_value = "kapsel")]
    pub(crate) service_account: String,
    /// The namespace the operator runs in.
    #[arg(long, default_value = "default")]
    pub(crate) namespace: String,
}

/// `kapsel test GUEST CASE...` and `kapsel test GUEST --replay FILE`: exit 0 when every
/// case and replay passes, 1 when one fails, 2 when the guest, a case file or a
/// recording is unusable.
#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// The guest: a .wasm file.
    pub(crate) guest: PathBuf,
    /// Case files (YAML), or directories of them.
    #[arg(required_unless_present = "replay")]
    pub(crate) cases: Vec<PathBuf>,
    /// Replay a recording made by `kapsel run --record` and report what the guest does
    /// differently (repeatable).
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: Vec<PathBuf>,
    /// Run only the cases whose name or path contains this.
    #[arg(long)]
    pub(crate) filter: Option<String>,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "PATH")]
    pub(crate) junit: Option<PathBuf>,
}

/// Peering options of `run` (Kopf's, KOPF.md §8.2, §8.4). Without `--standalone`
/// or `--peering`, the peering object `default` is used if it exists.
#[derive(Debug, Args)]
pub(crate) struct RunPeeringArgs {
    /// Run without peering: never pause for other operators.
    #[arg(long, conflicts_with = "peering")]
    pub(crate) standalone: bool,
    /// Peer through this peering object; paused until it exists and no peer blocks this operator.
    #[arg(short = 'P', long, value_name = "NAME", env = "KAPSEL_RUN_PEERING")]
    pub(crate) peering: Option<String>,
    /// Peering priority: operators pause while a live peer has a higher one (equal ones all pause).
    #[arg(short = 'p', long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) priority: i64,
    /// Priority 666, for a development operator that pauses the deployed ones.
    #[arg(long)]
    pub(crate) dev: bool,
}

/// Which peer record `freeze` and `resume` write, and where.
#[derive(Debug, Args)]
pub(crate) struct PeerRecordArgs {
    /// The peering object.
    #[arg(short = 'P', long, value_name = "NAME")]
    pub(crate) peering: String,
    /// Freeze the operators of namespaces matching this pattern (repeatable): their KopfPeering objects.
    #[arg(short = 'n', long = "namespace", conflicts_with = "all_namespaces")]
    pub(crate) namespaces: Vec<String>,
    /// Freeze cluster-wide operators: the ClusterKopfPeering object.
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    /// The record's identity (default: env POD_ID, else user@host); resume needs the one freeze used.
    #[arg(short = 'i', long = "id", value_name = "ID")]
    pub(crate) id: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct FreezeArgs {
    #[command(flatten)]
    pub(crate) record: PeerRecordArgs,
    /// How long the freeze lasts unless `resume` ends it, in seconds.
    #[arg(short = 't', long, value_name = "SECONDS")]
    pub(crate) lifetime: u64,
    /// The record's priority: operators of lower priority pause.
    #[arg(
        short = 'p',
        long,
        default_value_t = 100,
        allow_negative_numbers = true
    )]
    pub(crate) priority: i64,
    /// Priority 666.
    #[arg(long)]
    pub(crate) dev: bool,
    /// Why (logged only, as in Kopf).
    #[arg(short = 'm', long)]
    pub(crate) message: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    pub(crate) record: PeerRecordArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Guests: .wasm files or directories of them (e.g. a mounted ConfigMap).
    #[arg(required = true)]
    pub(crate) guests: Vec<PathBuf>,
    /// Serve namespaces matching this pattern (repeatable; globs, `!` excludes).
    #[arg(short = 'n', long = "namespace", conflicts_with = "all_namespaces")]
    pub(crate) namespaces: Vec<String>,
    /// Serve all namespaces (cluster-wide).
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    #[command(flatten)]
    pub(crate) peering: RunPeeringArgs,
    /// Start an in-memory API server in this process and run the operator on it.
    #[arg(long)]
    pub(crate) embedded: bool,
    #[command(flatten)]
    pub(crate) embedded_server: EmbeddedArgs,
    /// The wall-clock budget of one handler call, in milliseconds, unless the handler declares one.
    #[arg(long, default_value_t = 5000)]
    pub(crate) call_deadline_ms: u64,
    /// The memory cap of one handler call, in MiB, unless the handler declares one.
    #[arg(long, default_value_t = 64)]
    pub(crate) call_memory_mib: u32,
    /// Serve liveness at this URL (e.g. http://0.0.0.0:8080/healthz), with the metrics at /metrics beside it.
    #[arg(short = 'L', long, value_name = "URL", value_parser = endpoint_url)]
    pub(crate) liveness: Option<String>,
    /// Serve the metrics (Prometheus text format) at this URL (e.g. http://0.0.0.0:9090/metrics).
    #[arg(long, value_name = "URL", value_parser = endpoint_url)]
    pub(crate) metrics: Option<String>,
    /// Record the watch events received, the patches sent and the guests' Kubernetes
    /// calls into this file (JSON Lines), for `kapsel test GUEST --replay FILE`.
    #[arg(long, value_name = "FILE")]
    pub(crate) record: Option<PathBuf>,
}

/// Rejects a URL the liveness or metrics endpoint cannot be served on, as a usage error.
fn endpoint_url(url: &str) -> Result<String, String> {
    crate::health::Endpoint::parse(url).map(|_| url.to_owned())
}

#[derive(Debug, Clone, Args)]
pub(crate) struct EmbeddedArgs {
    /// Port of the in-memory API server (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub(crate) port: u16,
    /// Where to write a kubeconfig for the in-memory API server.
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct DevClusterArgs {
    #[command(flatten)]
    pub(crate) server: EmbeddedArgs,
    /// Save the cluster's objects to this file and reload them at the next start.
    #[arg(long)]
    pub(crate) state: Option<PathBuf>,
}

/// A command's failure, with the exit code it should end the process with.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    message: String,
    code: u8,
}

impl CliError {
    fn new(message: impl Into<String>, code: u8) -> Self {
        CliError {
            message: message.into(),
            code,
        }
    }

    /// The process exit code: 1 for failures, 2 for usage and input errors.
    pub fn exit_code(&self) -> u8 {
        self.code
    }
}

impl Cli {
    /// The logging options, to set up logging before [`Cli::execute`].
    pub fn logging(&self) -> Logging {
        let mut logging = self.logging.clone();
        logging.report_only =
            matches!(self.command, Command::Test(_)) && !logging.verbose && !logging.debug;
        logging
    }

    /// Runs the command until it is done or `shutdown` completes.
    ///
    /// # Errors
    /// A [`CliError`] carrying the message to print and the exit code.
    pub async fn execute(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), CliError> {
        match self.command {
            Command::Run(args) => run(args, shutdown).await,
            Command::Inspect { guest } => {
                let json = crate::inspect(&guest)
                    .await
                    .map_err(|e| CliError::new(e, 2))?;
                let text = serde_json::to_string_pretty(&json)
                    .map_err(|e| CliError::new(e.to_string(), 1))?;
                println!("{text}");
                Ok(())
            }
            Command::DevCluster(args) => dev_cluster(args, shutdown).await,
            Command::Freeze(args) => {
                if let Some(message) = &args.message {
                    tracing::info!("Freezing: {message}");
                }
                let priority = if args.dev {
                    crate::peering::DEV_PRIORITY
                } else {
                    args.priority
                };
                freezer(args.record)
                    .priority(priority)
                    .freeze(Duration::from_secs(args.lifetime))
                    .await
                    .map_err(|e| CliError::new(error_chain(&e), 1))
            }
            Command::Resume(args) => freezer(args.record)
                .resume()
                .await
                .map_err(|e| CliError::new(error_chain(&e), 1)),
            Command::Rbac(args) => {
                let client = kube::Client::try_default().await.map_err(|e| {
                    CliError::new(
                        format!(
                            "kapsel rbac resolves the guests' selectors on a cluster, and none can be reached: {e}"
                        ),
                        1,
                    )
                })?;
                let text =
                    crate::rbac(&args.guests, client, &args.service_account, &args.namespace)
                        .await
                        .map_err(|e| {
                            // A guest that cannot be loaded is an input error.
                            let code = if matches!(e, crate::Error::NoGuests(_)) {
                                2
                            } else {
                                1
                            };
                            CliError::new(error_chain(&e), code)
                        })?;
                print!("{text}");
                Ok(())
            }
            Command::Test(args) => {
                let request = crate::cases::TestRequest {
                    guest: args.guest,
                    cases: args.cases,
                    replays: args.replay,
                    filter: args.filter,
                    // `-v` of the shared logging flags also shows what a failing case's operator did.
                    verbose: self.logging.verbose || self.logging.debug,
                    junit: args.junit,
                };
                let summary = crate::cases::run(&request, &mut std::io::stdout())
                    .await
                    .map_err(|e| CliError::new(e.to_string(), 2))?;
                if summary.failed > 0 {
                    return Err(CliError::new(
                        format!(
                            "{} of {} case(s) failed",
                            summary.failed,
                            summary.failed + summary.passed
                        ),
                        1,
                    ));
                }
                Ok(())
            }
        }
    }
}

/// The operator a `kapsel run` command line describes, for `testing::Runner`: the
/// arguments after `kapsel` (`["run", "-A", "guest.wasm"]`). `--embedded` is ignored:
/// the runner brings its own cluster.
///
/// # Errors
/// The usage error, as `kapsel` would print it.
pub(crate) fn operator_from_args<I, T>(args: I) -> Result<crate::Operator, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(
        std::iter::once("kapsel".into()).chain(args.into_iter().map(Into::into)),
    )
    .map_err(|e| e.to_string())?;
    match cli.command {
        Command::Run(args) => Ok(operator_for(args)),
        _ => Err("the runner runs `run` commands only".to_owned()),
    }
}

/// The operator of `kapsel run`, everything but the connection.
fn operator_for(args: RunArgs) -> crate::Operator {
    let mut operator = crate::Operator::new(args.guests)
        .call_deadline(Duration::from_millis(args.call_deadline_ms))
        .call_memory_mib(args.call_memory_mib);
    operator = peering(operator, &args.peering);
    if let Some(url) = args.liveness {
        operator = operator.liveness(url);
    }
    if let Some(url) = args.metrics {
        operator = operator.metrics(url);
    }
    if let Some(path) = args.record {
        operator = operator.record(path);
    }
    if args.namespaces.is_empty() {
        operator.all_namespaces()
    } else {
        operator.namespaces(args.namespaces)
    }
}

async fn run(
    args: RunArgs,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), CliError> {
    if args.namespaces.is_empty() && !args.all_namespaces {
        tracing::warn!(
            "Neither -n/--namespace nor -A/--all-namespaces is given: serving the whole cluster."
        );
    }
    let embedded = args.embedded;
    let embedded_server = args.embedded_server.clone();
    let mut operator = operator_for(args);
    let server = if embedded {
        let server = start_server(&embedded_server, None).await?;
        let client = crate::testing::client_for(&server.url()).map_err(|e| CliError::new(e, 1))?;
        operator = operator.client(client);
        Some(server)
    } else {
        None
    };
    let result = operator.run(shutdown).await;
    if let Some(server) = server
        && let Err(error) = server.shutdown().await
    {
        tracing::warn!(
            "The API server did not stop cleanly: {}",
            error_chain(&error)
        );
    }
    result.map_err(|e| CliError::new(error_chain(&e), 1))
}

/// Applies `run`'s peering flags: `--dev` wins over `--priority`, as in Kopf.
fn peering(mut operator: crate::Operator, args: &RunPeeringArgs) -> crate::Operator {
    if args.standalone {
        operator = operator.standalone();
    }
    if let Some(name) = &args.peering {
        operator = operator.peering(name);
    }
    operator.priority(if args.dev {
        crate::peering::DEV_PRIORITY
    } else {
        args.priority
    })
}

/// The [`crate::Freezer`] that `freeze`/`resume` use.
fn freezer(args: PeerRecordArgs) -> crate::Freezer {
    let mut freezer = crate::Freezer::new(args.peering);
    if args.namespaces.is_empty() {
        if !args.all_namespaces {
            tracing::warn!(
                "Neither -n/--namespace nor -A/--all-namespaces is given: using the cluster-wide peering."
            );
        }
    } else {
        freezer = freezer.namespaces(args.namespaces);
    }
    if let Some(id) = args.id {
        freezer = freezer.identity(id);
    }
    freezer
}

async fn dev_cluster(
    args: DevClusterArgs,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), CliError> {
    let server = start_server(&args.server, args.state).await?;
    shutdown.await;
    tracing::info!("Stopping the API server.");
    server.shutdown().await.map_err(|e| {
        CliError::new(
            format!("the API server did not stop cleanly: {}", error_chain(&e)),
            1,
        )
    })
}

/// Starts the in-memory API server and tells how to reach it.
async fn start_server(
    args: &EmbeddedArgs,
    state: Option<PathBuf>,
) -> Result<kapsel_apiserver::ApiServer, CliError> {
    let mut config = kapsel_apiserver::Config::default().port(args.port);
    if let Some(state) = state {
        config = config.state_file(state);
    }
    let server = kapsel_apiserver::ApiServer::start(config)
        .await
        .map_err(|e| {
            CliError::new(
                format!("cannot start the API server: {}", error_chain(&e)),
                1,
            )
        })?;
    let path = args
        .kubeconfig
        .clone()
        .unwrap_or_else(default_kubeconfig_path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display()), 1))?;
    }
    std::fs::write(&path, server.kubeconfig()).map_err(|e| {
        CliError::new(
            format!("cannot write the kubeconfig {}: {e}", path.display()),
            1,
        )
    })?;
    tracing::info!(
        "The API server is serving on {}. Use it with: export KUBECONFIG={}",
        server.url(),
        path.display()
    );
    Ok(server)
}

fn default_kubeconfig_path() -> PathBuf {
    PathBuf::from(".kapsel").join("kubeconfig")
}

/// An error and its sources on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
