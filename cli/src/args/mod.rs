//! The `kapsel` command line as clap parses it: commands, their flags, the logging flags,
//! and every option's `KAPSEL_*` variable; `run`'s options are in `run`.

mod run;

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Arg, ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

pub(crate) use run::{RunArgs, RunPeeringArgs};

/// Kubernetes operators whose handlers are sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "kapsel", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    #[command(flatten)]
    pub(crate) logging: Logging,
}

impl Cli {
    /// The process's command line, with the `KAPSEL_*` variables ([`command`]); exits as
    /// clap does on a usage error (2) or on `--help`/`--version` (0).
    pub(crate) fn from_process() -> Cli {
        Cli::try_from_args(std::env::args_os()).unwrap_or_else(|error| error.exit())
    }

    /// A command line (its first item the program's name), with the `KAPSEL_*` variables.
    pub(crate) fn try_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut matches = command().try_get_matches_from(args)?;
        Cli::from_arg_matches_mut(&mut matches).map_err(|error| error.format(&mut command()))
    }
}

/// The command line, every option of which can also be given as an environment variable,
/// as Kopf's options can (click's `KOPF_<COMMAND>_<OPTION>`): `KAPSEL_<COMMAND>_<OPTION>`,
/// the command and the long option in capitals with `_` for `-` (`KAPSEL_RUN_PRIORITY`,
/// `KAPSEL_DEV_CLUSTER_PORT`, `KAPSEL_FREEZE_PEERING`); the options of every command
/// (logging) without a command (`KAPSEL_VERBOSE`, `KAPSEL_LOG_FORMAT`). A flag's
/// variable is true for `1`, `true`, `yes`, `on` (and `y`, `t`), false for `0`, `false`,
/// `no`, `off` (and `n`, `f`). A flag given on the command line wins over its variable.
/// `--help` shows each option's variable.
pub(crate) fn command() -> clap::Command {
    Cli::command()
        .mut_args(|arg| with_variable(arg, None))
        .mut_subcommands(|command| {
            let name = command.get_name().to_owned();
            command.mut_args(|arg| with_variable(arg, Some(&name)))
        })
}

/// The option with its environment variable (see [`command`]); positional arguments,
/// `--help` and `--version` have none.
fn with_variable(arg: Arg, command: Option<&str>) -> Arg {
    let Some(long) = arg.get_long() else {
        return arg;
    };
    if matches!(arg.get_action(), ArgAction::Help | ArgAction::Version) {
        return arg;
    }
    let name = command
        .into_iter()
        .chain([long])
        .map(|part| part.to_uppercase().replace('-', "_"))
        .collect::<Vec<_>>()
        .join("_");
    let arg = arg.env(format!("KAPSEL_{name}"));
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        arg.value_parser(BoolishValueParser::new())
    } else {
        arg
    }
}

/// Logging options, shared by every command (as in `kopf run`).
#[derive(Debug, Clone, Args)]
pub(crate) struct Logging {
    /// Show debug messages (the operator's, the API server's), not the libraries'.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    /// Show debug messages, the libraries' too (Kubernetes client, HTTP).
    #[arg(short, long, global = true)]
    pub(crate) debug: bool,
    /// Show only warnings and errors.
    #[arg(short, long, global = true, conflicts_with_all = ["verbose", "debug"])]
    pub(crate) quiet: bool,
    /// How log lines look.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Full)]
    pub(crate) log_format: LogFormat,
    /// Prefix a line about an object with `[namespace/name]` (the default, but in JSON).
    #[arg(long, global = true, overrides_with = "no_log_prefix")]
    pub(crate) log_prefix: bool,
    /// Do not prefix lines with the object (the default in JSON, where the reference is a key).
    #[arg(long, global = true, overrides_with = "log_prefix")]
    pub(crate) no_log_prefix: bool,
    /// The key of the object reference in JSON lines (default: `object`).
    #[arg(long, global = true, value_name = "KEY")]
    pub(crate) log_refkey: Option<String>,
    /// Only the command's own messages: set for commands whose output is a report
    /// (`kapsel test`) unless `-v`/`-d` asks for the operators' lines too.
    #[arg(skip)]
    pub(crate) report_only: bool,
}

impl Logging {
    /// Whether lines about an object start with `[namespace/name]`: as asked, else in the
    /// text formats only (Kopf's default).
    pub(crate) fn prefixed(&self) -> bool {
        if self.log_prefix {
            true
        } else if self.no_log_prefix {
            false
        } else {
            self.log_format != LogFormat::Json
        }
    }
}

/// Log line formats, as Kopf names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// The message only.
    Plain,
    /// Time, level, source and message.
    Full,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start-up; the run flags (the guest limits) make it large"
)]
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
    /// Print the RBAC manifests the guests need (resolved on the current cluster, or offline with --crd).
    Rbac(RbacArgs),
    /// Make a new guest crate: a handler, its native test, a case file, a CRD, a README.
    New(NewArgs),
    /// The helper `run` compiles guests with: a component on stdin, its compilation on
    /// stdout (exit code 2 when it is invalid). Not for people.
    #[command(hide = true)]
    CompileGuest,
}

/// `kapsel new PATH`: a guest crate in a new folder, from the template.
#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// The folder to make (it may exist if empty); outside any cargo workspace.
    pub(crate) path: PathBuf,
    /// The crate's name (default: the folder's name).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// The folder of the SDK's crate to depend on (default: the guest-sdk of the Kapsel
    /// checkout this binary was built from).
    #[arg(long, value_name = "PATH", conflicts_with = "sdk_git")]
    pub(crate) sdk: Option<PathBuf>,
    /// A git repository of Kapsel to take the SDK from instead.
    #[arg(long, value_name = "URL")]
    pub(crate) sdk_git: Option<String>,
    /// The branch, tag or commit of --sdk-git.
    #[arg(long, value_name = "REV", requires = "sdk_git")]
    pub(crate) sdk_rev: Option<String>,
}

/// `kapsel rbac GUEST...`: a ServiceAccount, a ClusterRole and its binding, and a Role
/// and its binding per namespace of `-n`, as YAML. The scope, peering and admission flags
/// are `kapsel run`'s: give the ones the operator runs with.
#[derive(Debug, Args)]
pub(crate) struct RbacArgs {
    /// Guests: .wasm files or directories of them.
    #[arg(required = true)]
    pub(crate) guests: Vec<PathBuf>,
    /// The ServiceAccount's name (also the roles' and the bindings').
    #[arg(long, default_value = "kapsel")]
    pub(crate) service_account: String,
    /// The namespace the operator runs in (its ServiceAccount's).
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub(crate) operator_namespace: String,
    /// The operator serves namespaces matching this pattern (repeatable): namespaces
    /// named plainly get a Role each.
    #[arg(short = 'n', long = "namespace", conflicts_with = "all_namespaces")]
    pub(crate) namespaces: Vec<String>,
    /// The operator serves all namespaces (the default).
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    /// The operator runs without peering: no peering resources are granted.
    #[arg(long, conflicts_with = "peering")]
    pub(crate) standalone: bool,
    /// The operator peers through this peering object (default: `default`).
    #[arg(short = 'P', long, value_name = "NAME")]
    pub(crate) peering: Option<String>,
    /// The operator manages the admission webhook configurations of this name (`kapsel
    /// run --admission-managed`): only they may be patched (without it: any).
    #[arg(long, value_name = "NAME")]
    pub(crate) admission_managed: Option<String>,
    /// The operator keeps a generated admission certificate in this Secret (`kapsel run
    /// --admission-secret`; default: `<managed name or kapsel>-admission-tls` in the
    /// operator's namespace).
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = run::secret)]
    pub(crate) admission_secret: Option<(String, String)>,
    /// Resolve the guests' selectors offline, on an in-process API server that serves
    /// the built-in resources and the CRDs of these files (repeatable; documents other
    /// than CustomResourceDefinitions are skipped), instead of on the current cluster.
    #[arg(long, value_name = "FILE")]
    pub(crate) crd: Vec<PathBuf>,
    /// Resolve offline even without --crd (guests of built-in resources only).
    #[arg(long)]
    pub(crate) offline: bool,
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
    /// Authenticate every request and authorize it with RBAC, as a real cluster does: the
    /// kubeconfig is the admin's (over https), ServiceAccounts get tokens from
    /// `kubectl create token`.
    #[arg(long)]
    pub(crate) rbac: bool,
    /// With --rbac: once the ServiceAccount NAMESPACE/NAME exists (`kubectl apply` of the
    /// operator's manifests), write a kubeconfig that acts as it, with a token as a pod's
    /// is (for a day), beside the admin's as `NAMESPACE-NAME.kubeconfig`: `kapsel run
    /// --kubeconfig` with it runs the host with the Deployment's rights. Written again
    /// when the account is re-created. Repeatable.
    #[arg(
        long = "service-account",
        value_name = "NAMESPACE/NAME",
        requires = "rbac"
    )]
    pub(crate) service_accounts: Vec<String>,
    /// Serve as a cluster without Kubernetes' `ShardedListAndWatch` feature gate: the
    /// `shardSelector` of lists and watches is ignored (every object is sent), where by
    /// default it selects one shard of the objects.
    #[arg(long)]
    pub(crate) no_sharded_list_and_watch: bool,
    /// Run no simulated node and kubelet: pods stay as stored (Pending, on no node) and
    /// are deleted at once, where by default they are scheduled to the node `kapsel-node`,
    /// run, and are deleted after their grace period.
    #[arg(long)]
    pub(crate) no_kubelet: bool,
    /// How long after a namespace starts terminating its content is deleted, in
    /// milliseconds, as kube's namespace controller waits (5 s): until then a client can
    /// still delete the namespace's objects one by one (`kubectl delete -k`). 0: at once.
    #[arg(long, value_name = "MILLISECONDS", default_value_t = 5000)]
    pub(crate) namespace_deletion_delay: u64,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kapsel_host::{
        AnnotationsProgress, DiffBaseStorage, Limits, Persistence, ProgressStorage, StatusDiffBase,
        StatusProgress,
    };

    use super::*;

    fn limits_of(flags: &[&str]) -> Limits {
        let args = ["kapsel", "run", "op.wasm"].iter().chain(flags);
        match Cli::try_from_args(args).expect("parsed").command {
            Command::Run(run) => run.limits.limits(),
            _ => unreachable!("a run command"),
        }
    }

    /// The variable of each option of a command (`None`: of the options of every command).
    fn variables(command_name: Option<&str>) -> Vec<(String, Option<String>)> {
        let cli = command();
        let command = match command_name {
            Some(name) => cli.find_subcommand(name).expect("a command").clone(),
            None => cli,
        };
        command
            .get_arguments()
            .filter(|arg| arg.get_long().is_some())
            .map(|arg| {
                let variable = arg.get_env().map(|v| v.to_string_lossy().into_owned());
                (arg.get_long().unwrap_or_default().to_owned(), variable)
            })
            .collect()
    }

    #[test]
    fn every_option_has_its_kapsel_variable_named_as_kopf_names_its() {
        let cli = command();
        let commands = cli.get_subcommands().map(|c| c.get_name().to_owned());
        for name in [None].into_iter().chain(commands.map(Some)) {
            for (long, variable) in variables(name.as_deref()) {
                if ["help", "version"].contains(&long.as_str()) {
                    assert_eq!(variable, None, "--{long}");
                    continue;
                }
                let command = name.as_deref().map(|n| format!("{n}_")).unwrap_or_default();
                let expected = format!("KAPSEL_{command}{long}")
                    .to_uppercase()
                    .replace('-', "_");
                assert_eq!(variable.as_deref(), Some(expected.as_str()), "--{long}");
            }
        }
        let run = variables(Some("run"));
        for (long, variable) in [
            ("peering", "KAPSEL_RUN_PEERING"),
            ("all-namespaces", "KAPSEL_RUN_ALL_NAMESPACES"),
            ("call-slots", "KAPSEL_RUN_CALL_SLOTS"),
        ] {
            assert!(
                run.contains(&(long.to_owned(), Some(variable.to_owned()))),
                "{long}"
            );
        }
        let logging = variables(None);
        assert!(logging.contains(&("verbose".to_owned(), Some("KAPSEL_VERBOSE".to_owned()))));
        let dev = variables(Some("dev-cluster"));
        assert!(dev.contains(&(
            "port".to_owned(),
            Some("KAPSEL_DEV_CLUSTER_PORT".to_owned())
        )));
    }

    #[test]
    fn the_limit_flags_default_to_the_hosts_limits_and_set_each_field() {
        assert_eq!(limits_of(&[]), Limits::default());
        let limits = limits_of(&[
            "--guest-threads=3",
            "--max-call-deadline-ms=1500",
            "--call-slots=6",
            "--guest-api-rate=2.5",
            "--min-timer-interval-ms=250",
            "--self-trigger-limit=4",
            "--max-subhandlers=7",
        ]);
        assert_eq!(limits.guest_threads, 3);
        assert_eq!(limits.max_call_deadline, Duration::from_millis(1500));
        assert_eq!(limits.call_slots, 6);
        assert!((limits.guest_api_rate - 2.5).abs() < f64::EPSILON);
        assert_eq!(limits.min_timer_interval, Duration::from_millis(250));
        assert_eq!(limits.self_trigger_limit, 4);
        assert_eq!(limits.max_subhandlers, 7);
    }

    fn persistence_of(flags: &[&str]) -> Result<Persistence, String> {
        let args = ["kapsel", "run", "op.wasm"].iter().chain(flags);
        match Cli::try_parse_from(args)
            .map_err(|e| e.to_string())?
            .command
        {
            Command::Run(run) => run.settings().map(|settings| settings.persistence),
            _ => unreachable!("a run command"),
        }
    }

    fn shard_selector_of(flags: &[&str]) -> Result<Option<String>, String> {
        let args = ["kapsel", "run", "op.wasm"].iter().chain(flags);
        match Cli::try_parse_from(args)
            .map_err(|e| e.to_string())?
            .command
        {
            Command::Run(run) => run
                .settings()
                .map(|settings| settings.watching.shard_selectors),
            _ => unreachable!("a run command"),
        }
    }

    /// `--shard INDEX/COUNT` is the shard selector of that equal part of the hash space.
    #[test]
    fn a_shard_flag_is_a_shard_selector() {
        assert_eq!(
            shard_selector_of(&["--shard", "1/2"]).unwrap().as_deref(),
            Some("shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')")
        );
        assert_eq!(
            shard_selector_of(&["--shard", "0/4", "--shard-by", "namespace"])
                .unwrap()
                .as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000')"
            )
        );
        assert_eq!(shard_selector_of(&[]).unwrap(), None);
        for (flags, says) in [
            (&["--shard", "3/3"][..], "must be below the count"),
            (&["--shard", "1"][..], "is not INDEX/COUNT"),
            (&["--shard", "a/3"][..], "the index is not a whole number"),
            (&["--shard-by", "uid"][..], "--shard"),
            (
                &["--shard", "0/2", "--setting", "watching.shard_selectors=x"][..],
                "give one of them",
            ),
        ] {
            let error = shard_selector_of(flags).unwrap_err();
            assert!(error.contains(says), "{flags:?}: {error}");
        }
    }

    #[test]
    fn persistence_settings_come_after_the_persistence_flags() {
        let set = persistence_of(&[
            "--prefix=example.com",
            "--finalizer=example.com/held",
            "--setting=persistence.finalizer=other.io/held",
            "--setting=persistence.progress_storage=status",
            "--setting=persistence.diffbase_storage={status: {ignored_fields: [spec.x]}}",
        ])
        .expect("accepted");
        assert_eq!(set.finalizer, "other.io/held");
        assert_eq!(
            set.progress_storage,
            ProgressStorage::Status(StatusProgress::default())
        );
        assert_eq!(
            set.diffbase_storage,
            DiffBaseStorage::Status(StatusDiffBase {
                ignored_fields: vec!["spec.x".into()],
                ..StatusDiffBase::default()
            })
        );
        let error = persistence_of(&["--setting=persistence.finalizer=a b"]).expect_err("refused");
        assert!(error.contains("the finalizer \"a b\""), "{error}");
    }

    #[test]
    fn the_persistence_flags_default_to_kopfs_and_combine_the_prefix_with_the_storages() {
        assert_eq!(persistence_of(&[]), Ok(Persistence::default()));
        let custom = persistence_of(&[
            "--prefix=example.com",
            "--finalizer=example.com/done",
            "--progress-storage=multi",
            "--diffbase-storage=status",
        ])
        .expect("parses");
        assert_eq!(custom.finalizer, "example.com/done");
        let annotations = AnnotationsProgress {
            prefix: "example.com".into(),
            ..AnnotationsProgress::default()
        };
        assert_eq!(
            custom.progress_storage,
            ProgressStorage::Multi(vec![
                ProgressStorage::Annotations(annotations),
                ProgressStorage::Status(StatusProgress::default()),
            ])
        );
        assert_eq!(
            custom.diffbase_storage,
            DiffBaseStorage::Status(StatusDiffBase::default())
        );
    }

    #[test]
    fn bad_persistence_values_are_usage_errors_that_say_why() {
        let error = persistence_of(&["--prefix=Not_A.Domain"]).expect_err("refused");
        assert!(error.contains("not a DNS subdomain"), "{error}");
        let error = persistence_of(&["--finalizer=a b"]).expect_err("refused");
        assert!(error.contains("not a qualified name"), "{error}");
        let error = persistence_of(&["--progress-storage=files"]).expect_err("refused");
        assert!(
            error.contains("annotations") && error.contains("smart"),
            "lists the values: {error}"
        );
    }
}
