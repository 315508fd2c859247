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
    /// Show debug messages (same as --debug).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Show debug messages.
    #[arg(short, long, global = true)]
    pub debug: bool,
    /// Show only warnings and errors.
    #[arg(short, long, global = true, conflicts_with_all = ["verbose", "debug"])]
    pub quiet: bool,
    /// How log lines look.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Full)]
    pub log_format: LogFormat,
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
    /// Run without peering (this host version never peers yet; accepted for Kopf compatibility).
    #[arg(long)]
    pub(crate) standalone: bool,
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
}

#[derive(Debug, Args)]
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
    pub fn logging(&self) -> &Logging {
        &self.logging
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
        }
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
    if args.standalone {
        tracing::debug!("--standalone: peering is off.");
    }
    let mut operator = crate::Operator::new(args.guests)
        .call_deadline(Duration::from_millis(args.call_deadline_ms))
        .call_memory_mib(args.call_memory_mib);
    operator = if args.namespaces.is_empty() {
        operator.all_namespaces()
    } else {
        operator.namespaces(args.namespaces)
    };
    let server = if args.embedded {
        let server = start_server(&args.embedded_server, None).await?;
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
