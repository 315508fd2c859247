//! The processes under test: Kapsel (`kapsel run` with the bench guest), Kopf (`kopf
//! run` with the same operator in Python, from a virtual environment the bench makes)
//! and the floor (a bare kube-rs watcher); how each is launched, and how Kopf is
//! installed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::procs::Launch;

/// The Kopf the issue compares with.
pub(crate) const KOPF_REQUIREMENT: &str = "kopf==1.45.*";

/// What Kapsel logs once its streams run.
pub(crate) const KAPSEL_RUNNING: &str = "The operator is running";

/// Which operator a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Kapsel,
    Kopf,
    /// The bare kube-rs watcher: the floor.
    Watcher,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Kapsel => "kapsel",
            Kind::Kopf => "kopf",
            Kind::Watcher => "watcher",
        }
    }
}

/// Where everything the operators need is.
#[derive(Debug, Clone)]
pub(crate) struct Operators {
    pub(crate) kapsel: PathBuf,
    pub(crate) guest: PathBuf,
    pub(crate) watcher: PathBuf,
    pub(crate) kopf_script: PathBuf,
    /// The admission run's guest (examples/admission) and Kopf's same handlers.
    pub(crate) admission_guest: PathBuf,
    pub(crate) kopf_admission_script: PathBuf,
    /// `kopf` in the virtual environment, or why Kopf cannot run.
    pub(crate) kopf: Result<PathBuf, String>,
    /// More environment for Kapsel's runs (`--kapsel-env`), e.g. allocator settings.
    pub(crate) kapsel_env: Vec<(String, String)>,
    /// The compiled-guest cache of the cached start-up (`--cache-dir`).
    pub(crate) cache_dir: PathBuf,
}

/// A variant of Kapsel's start-up: without a compiled-guest cache (the guest compiled at
/// every start), or with one that a warm-up start filled (`--cache-dir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Startup {
    NoCache,
    Cached,
}

impl Startup {
    /// Every variant measured.
    pub(crate) const ALL: &[Startup] = &[Startup::NoCache, Startup::Cached];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Startup::NoCache => "no compiled-guest cache",
            Startup::Cached => "compiled guests cached",
        }
    }

    fn extra_args(self, operators: &Operators) -> Vec<String> {
        match self {
            Startup::NoCache => Vec::new(),
            Startup::Cached => vec![
                "--cache-dir".to_owned(),
                operators.cache_dir.display().to_string(),
            ],
        }
    }
}

impl Operators {
    /// How to start `kind` on the cluster of `kubeconfig`; None when it cannot run
    /// (Kopf not installed).
    pub(crate) fn launch(
        &self,
        kind: Kind,
        kubeconfig: &Path,
        startup: Startup,
    ) -> Result<Launch, String> {
        let env = vec![("KUBECONFIG".to_owned(), kubeconfig.display().to_string())];
        Ok(match kind {
            Kind::Kapsel => {
                let mut args = vec!["run".to_owned(), "--standalone".to_owned(), "-A".to_owned()];
                args.extend(startup.extra_args(self));
                args.push(self.guest.display().to_string());
                Launch {
                    program: self.kapsel.clone(),
                    args,
                    env: [env, self.kapsel_env.clone()].concat(),
                    marks: vec![KAPSEL_RUNNING.to_owned()],
                }
            }
            Kind::Kopf => Launch {
                program: self.kopf.clone()?,
                args: vec![
                    "run".into(),
                    "--standalone".into(),
                    "-A".into(),
                    self.kopf_script.display().to_string(),
                ],
                // Python's output to a pipe is block-buffered: unbuffered, lines arrive as
                // they are written (as on a terminal).
                env: [env, vec![("PYTHONUNBUFFERED".to_owned(), "1".to_owned())]].concat(),
                marks: vec![],
            },
            Kind::Watcher => Launch {
                program: self.watcher.clone(),
                args: vec![],
                env,
                marks: vec![],
            },
        })
    }
}

/// Makes `venv` (unless it has Kopf 1.45 already) and installs Kopf into it from PyPI:
/// `kopf`'s path, or why it cannot be had.
pub(crate) async fn install_kopf(venv: &Path) -> Result<PathBuf, String> {
    let python = venv.join("bin").join("python");
    let kopf = venv.join("bin").join("kopf");
    if let Some(version) = kopf_version(&python).await
        && version.starts_with("1.45.")
        && kopf.exists()
    {
        return Ok(kopf);
    }
    eprintln!(
        "Installing {KOPF_REQUIREMENT} into {} (python3 -m venv, pip)...",
        venv.display()
    );
    run(
        "python3",
        &["-m".into(), "venv".into(), venv.display().to_string()],
        Duration::from_secs(120),
    )
    .await
    .map_err(|e| format!("cannot make a virtual environment: {e}"))?;
    run(
        &python.display().to_string(),
        &[
            "-m".into(),
            "pip".into(),
            "install".into(),
            "--quiet".into(),
            "--disable-pip-version-check".into(),
            KOPF_REQUIREMENT.into(),
        ],
        Duration::from_secs(600),
    )
    .await
    .map_err(|e| format!("cannot install {KOPF_REQUIREMENT} from PyPI: {e}"))?;
    match kopf_version(&python).await {
        Some(version) if kopf.exists() => {
            eprintln!("Installed Kopf {version}.");
            Ok(kopf)
        }
        _ => Err(format!(
            "{KOPF_REQUIREMENT} was installed but does not import"
        )),
    }
}

/// The Kopf version importable by `python`.
pub(crate) async fn kopf_version(python: &Path) -> Option<String> {
    let output = tokio::process::Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('kopf'))",
        ])
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Runs a command to completion within `limit`: its stderr's tail on failure.
async fn run(program: &str, args: &[String], limit: Duration) -> Result<(), String> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(limit, child)
        .await
        .map_err(|_| format!("`{program}` did not finish within {} s", limit.as_secs()))?
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(format!(
        "`{program}` failed ({}): {}",
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
    ))
}
