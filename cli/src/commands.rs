//! What each `kapsel` command does, and the exit code it ends with.

use std::path::PathBuf;
use std::time::Duration;

use kapsel_host::{Freezer, Operator, error_chain};

use crate::args::{
    Cli, Command, DevClusterArgs, Logging, NewArgs, PeerRecordArgs, RbacArgs, RunArgs,
    RunPeeringArgs,
};
use crate::scaffold::{self, Sdk};

/// A command's failure, with the exit code it should end the process with.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct CliError {
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
    pub(crate) fn exit_code(&self) -> u8 {
        self.code
    }
}

impl Cli {
    /// The logging options, to set up logging before [`Cli::execute`].
    pub(crate) fn logging(&self) -> Logging {
        let mut logging = self.logging.clone();
        logging.report_only =
            matches!(self.command, Command::Test(_)) && !logging.verbose && !logging.debug;
        logging
    }

    /// Runs the command until it is done or `shutdown` completes.
    ///
    /// # Errors
    /// A [`CliError`] carrying the message to print and the exit code.
    pub(crate) async fn execute(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), CliError> {
        match self.command {
            Command::Run(args) => run(args, shutdown).await,
            Command::Inspect { guest } => {
                let json = kapsel_host::inspect(&guest)
                    .await
                    .map_err(|e| CliError::new(error_chain(&e), 2))?;
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
                let freezer = freezer(args.record).priority(args.priority);
                let freezer = if args.dev { freezer.dev() } else { freezer };
                freezer
                    .freeze(Duration::from_secs(args.lifetime))
                    .await
                    .map_err(|e| CliError::new(error_chain(&e), 1))
            }
            Command::Resume(args) => freezer(args.record)
                .resume()
                .await
                .map_err(|e| CliError::new(error_chain(&e), 1)),
            Command::Rbac(args) => rbac(args).await,
            Command::New(args) => new_guest(&args),
            Command::CompileGuest => compile_guest(),
            Command::Test(args) => {
                let request = kapsel_host::testing::TestRequest::new(args.guest)
                    .cases(&args.cases)
                    .replays(&args.replay)
                    .filter(args.filter)
                    // `-v` of the shared logging flags also shows what a failing case's operator did.
                    .verbose(self.logging.verbose || self.logging.debug)
                    .junit(args.junit);
                let summary = kapsel_host::testing::test(&request, &mut std::io::stdout())
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

/// The operator a `kapsel run` command line describes, for `Runner`: the
/// arguments after `kapsel` (`["run", "-A", "guest.wasm"]`). `--embedded` is ignored:
/// the runner brings its own cluster.
///
/// # Errors
/// The usage error, as `kapsel` would print it.
pub(crate) fn operator_from_args<I, T>(args: I) -> Result<Operator, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_from_args(
        std::iter::once("kapsel".into()).chain(args.into_iter().map(Into::into)),
    )
    .map_err(|e| e.to_string())?;
    match cli.command {
        Command::Run(args) => operator_for(args),
        _ => Err("the runner runs `run` commands only".to_owned()),
    }
}

/// The operator of `kapsel run`, everything but the connection; a usage error when the
/// settings do not fit together.
fn operator_for(args: RunArgs) -> Result<Operator, String> {
    let settings = args.settings()?;
    let mut operator = Operator::new(args.guests)
        .settings(settings)
        .limits(args.limits.limits())
        .reload_interval(Duration::from_millis(args.reload_interval_ms));
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
    if let Some(server) = args.admission.server() {
        operator = operator.admission(server);
    }
    if let Some(dir) = args.cache_dir {
        operator = operator.cache_dir(dir);
    }
    Ok(if args.namespaces.is_empty() {
        operator.all_namespaces()
    } else {
        operator.namespaces(args.namespaces)
    })
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
    let (embedded, port, kubeconfig) = (args.embedded, args.port, args.kubeconfig.clone());
    let mut operator = operator_for(args).map_err(|message| CliError::new(message, 2))?;
    // Guests are compiled by this binary in a helper process, so that the compiler's
    // code and memory never stay in the operator's (in-process runners compile here).
    match std::env::current_exe() {
        Ok(kapsel) => {
            operator =
                operator.compile_in(kapsel_host::CompileCommand::new(kapsel, ["compile-guest"]));
        }
        Err(error) => tracing::warn!(
            "Cannot find this program's file ({error}): guests are compiled in this process."
        ),
    }
    let server = if embedded {
        let config = kapsel_apiserver::Config::default().port(port);
        let server = start_server(config, kubeconfig.as_deref()).await?;
        let client = kapsel_host::testing::client_for(&server.url())
            .map_err(|e| CliError::new(error_chain(&e), 1))?;
        operator = operator.client(client);
        Some(server)
    } else {
        if let Some(path) = &kubeconfig {
            operator = operator.client(client_from_kubeconfig(path).await?);
        }
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
    result.map_err(|e| host_error(&e))
}

/// `kapsel compile-guest`: compiles the component on stdin for `kapsel run` (see
/// [`kapsel_host::CompileCommand`]) and writes the result on stdout.
/// An invalid component ends it with [`kapsel_host::INVALID_COMPONENT`].
pub(crate) fn compile_guest() -> Result<(), CliError> {
    use std::io::{Read as _, Write as _};
    let mut component = Vec::new();
    std::io::stdin()
        .read_to_end(&mut component)
        .map_err(|error| {
            CliError::new(format!("cannot read the component from stdin: {error}"), 1)
        })?;
    let invalid = u8::try_from(kapsel_host::INVALID_COMPONENT).unwrap_or(2);
    let compiled = kapsel_host::compile_guest(&component)
        .map_err(|reason| CliError::new(reason.to_string(), invalid))?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&compiled)
        .and_then(|()| stdout.flush())
        .map_err(|error| CliError::new(format!("cannot write the compiled guest: {error}"), 1))
}

/// A host error as the command reports it: a guest that cannot be loaded, or
/// persistence settings out of range, is an input error (exit 2), anything else a
/// failure (exit 1).
fn host_error(error: &kapsel_host::Error) -> CliError {
    let code = if matches!(
        error,
        kapsel_host::Error::NoGuests(_) | kapsel_host::Error::Persistence(_)
    ) {
        2
    } else {
        1
    };
    CliError::new(error_chain(error), code)
}

/// Applies `run`'s peering flags: `--dev` wins over `--priority`, as in Kopf.
fn peering(mut operator: Operator, args: &RunPeeringArgs) -> Operator {
    if args.standalone {
        operator = operator.standalone();
    }
    if let Some(name) = &args.peering {
        operator = operator.peering(name);
    }
    if args.dev {
        operator.dev()
    } else {
        operator.priority(args.priority)
    }
}

/// `kapsel rbac`: the manifests, resolved on the current cluster or, with `--crd` or
/// `--offline`, on an in-process one (the same resolution either way).
async fn rbac(args: RbacArgs) -> Result<(), CliError> {
    let mut request = kapsel_host::RbacRequest::new(args.guests)
        .service_account(args.service_account, args.operator_namespace)
        .namespaces(args.namespaces);
    if args.standalone {
        request = request.standalone();
    }
    if let Some(name) = args.peering {
        request = request.peering(name);
    }
    if let Some(name) = args.admission_managed {
        request = request.admission_managed(name);
    }
    if let Some((namespace, name)) = args.admission_secret {
        request = request.admission_secret(namespace, name);
    }
    let (offline, client) = if args.offline || !args.crd.is_empty() {
        let (server, client) = crate::offline::cluster(&args.crd).await.map_err(|e| {
            let code = if e.is_input_error() { 2 } else { 1 };
            CliError::new(e.to_string(), code)
        })?;
        (Some(server), client)
    } else {
        let client = kapsel_host::default_kube_client().await.map_err(|e| {
            CliError::new(
                format!(
                    "kapsel rbac resolves the guests' selectors on a cluster, and none can be reached \
                     (or resolve them offline: --crd FILE... with the CRDs they use): {e}"
                ),
                1,
            )
        })?;
        (None, client)
    };
    let result = kapsel_host::rbac(&request, client).await;
    if let Some(server) = offline {
        // Nothing of it is kept: a server that does not stop cleanly changes nothing.
        let _ = server.shutdown().await;
    }
    let text = result.map_err(|e| host_error(&e))?;
    print!("{text}");
    Ok(())
}

/// The [`Freezer`] that `freeze`/`resume` use.
fn freezer(args: PeerRecordArgs) -> Freezer {
    let mut freezer = Freezer::new(args.peering);
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
    let accounts = args
        .service_accounts
        .iter()
        .map(|a| crate::accounts::parse(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::new(e, 2))?;
    let kubeconfig = args
        .server
        .kubeconfig
        .unwrap_or_else(default_kubeconfig_path);
    let mut config = kapsel_apiserver::Config::default()
        .port(args.server.port)
        .rbac(args.rbac)
        .sharded_list_and_watch(!args.no_sharded_list_and_watch)
        .kubelet(!args.no_kubelet)
        .namespace_deletion_delay(Duration::from_millis(args.namespace_deletion_delay));
    if let Some(state) = args.state {
        config = config.state_file(state);
    }
    let server = start_server(config, Some(&kubeconfig)).await?;
    tokio::select! {
        () = shutdown => {}
        () = crate::accounts::write_when_they_exist(&server, &kubeconfig, &accounts),
            if !accounts.is_empty() => {}
    }
    tracing::info!("Stopping the API server.");
    server.shutdown().await.map_err(|e| {
        CliError::new(
            format!("the API server did not stop cleanly: {}", error_chain(&e)),
            1,
        )
    })
}

/// Starts the in-memory API server as `config` says and tells how to reach it (and, with
/// RBAC, how to act as a ServiceAccount).
async fn start_server(
    config: kapsel_apiserver::Config,
    kubeconfig: Option<&std::path::Path>,
) -> Result<kapsel_apiserver::ApiServer, CliError> {
    let rbac = config.rbac;
    let server = kapsel_apiserver::ApiServer::start(config)
        .await
        .map_err(|e| {
            CliError::new(
                format!("cannot start the API server: {}", error_chain(&e)),
                1,
            )
        })?;
    let path = kubeconfig.map_or_else(default_kubeconfig_path, std::path::Path::to_path_buf);
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
    // With RBAC, the kubeconfig's address: the port answers TLS, which tokens need.
    let url = if rbac {
        format!("https://{}", server.addr())
    } else {
        server.url()
    };
    tracing::info!(
        "The API server is serving on {url}. Use it with: export KUBECONFIG={}",
        path.display()
    );
    if rbac {
        tracing::info!(
            "RBAC is enforced: that kubeconfig is the admin's (over https). A ServiceAccount's \
             token: kubectl create token NAME -n NAMESPACE (e.g. for kapsel run --kubeconfig, \
             or kubectl --token TOKEN), or a kubeconfig of it with --service-account NS/NAME."
        );
    }
    Ok(server)
}

/// A client of the cluster a kubeconfig file names (its current context), as kubectl's
/// `--kubeconfig`.
async fn client_from_kubeconfig(path: &std::path::Path) -> Result<kube::Client, CliError> {
    let failed = |what: &str, error: &dyn std::error::Error| {
        let path = path.display();
        CliError::new(format!("{what} {path}: {}", error_chain(error)), 1)
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| failed("cannot read the kubeconfig", &e))?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| failed("cannot use the kubeconfig", &e))?;
    kapsel_host::kube_client(config).map_err(|e| failed("cannot connect with the kubeconfig", &e))
}

fn default_kubeconfig_path() -> PathBuf {
    PathBuf::from(".kapsel").join("kubeconfig")
}

/// `kapsel new`: makes the crate and says what to do next.
fn new_guest(args: &NewArgs) -> Result<(), CliError> {
    let name = match &args.name {
        Some(name) => name.clone(),
        None => std::path::absolute(&args.path)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default(),
    };
    let sdk = match (&args.sdk, &args.sdk_git) {
        (Some(path), _) => {
            let path = path.canonicalize().map_err(|e| {
                CliError::new(format!("--sdk {}: {e}", path.display()), 2)
            })?;
            if !path.join("Cargo.toml").is_file() {
                return Err(CliError::new(
                    format!("--sdk {}: no Cargo.toml there (the SDK is the guest-sdk folder of a Kapsel checkout)", path.display()),
                    2,
                ));
            }
            Sdk::Path(path)
        }
        (None, Some(url)) => Sdk::Git {
            url: url.clone(),
            rev: args.sdk_rev.clone(),
        },
        (None, None) => Sdk::built_from().ok_or_else(|| {
            CliError::new(
                "the SDK this kapsel was built from is gone: say where it is, with --sdk PATH (a Kapsel checkout's guest-sdk folder) or --sdk-git URL",
                2,
            )
        })?,
    };
    let written =
        scaffold::create(&args.path, &name, &sdk).map_err(|e| CliError::new(e.to_string(), 2))?;
    let folder = args.path.display();
    println!("Made the guest crate {name} in {folder}:");
    for path in &written {
        println!("  {}", path.display());
    }
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    );
    println!(
        "\nNext:\n  cd {folder}\n  cargo test\n  cargo build --release --target wasm32-wasip2\n  kapsel test {wasm} tests/cases/"
    );
    Ok(())
}
