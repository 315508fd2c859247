//! `kapsel-bench` (`make bench`): Kapsel side by side with Kopf on the embedded API
//! server, each figure beside a baseline measured in the same run, against the targets
//! of the issue; floors (a bare kube-rs watcher, the API server's own cost); guest sizes
//! and start-up; admission reviews over HTTPS beside Kopf's webhook server. Prints a table and writes `target/bench/results.json`.
//!
//! Every run is one operator process on a fresh `kapsel dev-cluster` process, one after
//! the other. Every wait has a time limit that names the step and the operator; every
//! child process is killed on every way out; what was measured is written after each
//! run, so a failure or Ctrl-C keeps it.

mod cluster;
mod figures;
mod invocation;
mod operators;
mod procs;
mod report;
mod results;
mod reviews;
mod scenarios;
mod sizes;
mod stats;
mod workload;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Parser;

use operators::{Kind, Operators, Startup};
use results::{InProgress, Machine, Results, Settings};
use scenarios::Context;

/// Kapsel side by side with Kopf (and a bare watcher), on fresh in-memory clusters.
#[derive(Debug, Parser)]
#[command(name = "kapsel-bench")]
struct Args {
    /// A fast sanity run: N = 100, one start-up repetition.
    #[arg(long)]
    quick: bool,
    /// The workload sizes N (comma-separated); default 1000,10000 (100 with --quick).
    #[arg(long, value_delimiter = ',')]
    n: Vec<usize>,
    /// Start-up runs per operator (the median is reported); default 3 (1 with --quick).
    #[arg(long)]
    repeat: Option<usize>,
    /// Leave Kopf out (its columns stay empty).
    #[arg(long)]
    skip_kopf: bool,
    /// Which runs: startup, running, backlog, invocation, admission (comma-separated;
    /// default all).
    #[arg(long, value_delimiter = ',', value_parser = ["startup", "running", "backlog", "invocation", "admission"])]
    only: Vec<String>,
    /// More environment for Kapsel's process, KEY=VALUE (repeatable), for experiments
    /// (e.g. GLIBC_TUNABLES=glibc.malloc.arena_max=1); recorded in the results.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    kapsel_env: Vec<(String, String)>,
    /// How long to wait per object, beyond a fixed 120 s, for handling or deletion.
    #[arg(long, default_value_t = 100)]
    wait_per_object_ms: u64,
    /// The `kapsel` binary (default: beside this one).
    #[arg(long)]
    kapsel: Option<PathBuf>,
    /// The compiled guests (default: TARGET/guests/wasm32-wasip2/release).
    #[arg(long)]
    guests: Option<PathBuf>,
    /// Where the results, logs and Kopf's virtual environment go (default: TARGET/bench).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {text:?}"))
}

/// The repository (this crate's parent).
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// The target directory this binary was built into (`TARGET/release/kapsel-bench`).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_owned()))
        .unwrap_or_else(|| repository().join("target"))
}

fn exe_beside(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

type Shared = Arc<Mutex<Results>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Results> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes what was measured so far (a failure to write is reported, not fatal).
fn save(shared: &Shared, json: &Path) {
    let results = lock(shared).clone();
    let sections = figures::sections(&results);
    if let Err(e) = report::write_json(json, &results, &sections) {
        eprintln!("{e}");
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let paths = Paths::of(&args);
    if let Some((what, path)) = paths.missing() {
        eprintln!(
            "{what} is missing: {} (`make bench` builds everything)",
            path.display()
        );
        return std::process::ExitCode::from(2);
    }
    let plan = Plan::of(&args, &paths);
    let settings = Settings {
        sizes: plan.sizes.clone(),
        startup_repetitions: plan.repetitions,
        quick: args.quick,
        kapsel: paths.kapsel.display().to_string(),
        guest: paths.guest.display().to_string(),
        kapsel_env: args
            .kapsel_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    };
    let shared: Shared = Arc::new(Mutex::new(Results::new(Machine::now(), settings)));
    let operators = Operators {
        kapsel: paths.kapsel.clone(),
        guest: paths.guest.clone(),
        watcher: paths.watcher.clone(),
        kopf_script: repository()
            .join("bench")
            .join("operator")
            .join("kopf_operator.py"),
        admission_guest: paths.guests.join("admission.wasm"),
        kopf_admission_script: repository()
            .join("bench")
            .join("operator")
            .join("kopf_admission.py"),
        kopf: Err("not installed".into()),
        kapsel_env: args.kapsel_env.clone(),
        cache_dir: paths.out.join("guest-cache"),
    };
    // Emptied, so that the cached start-up's warm-up is what fills it.
    let _ = std::fs::remove_dir_all(&operators.cache_dir);
    let ctx = Context {
        operators,
        dir: paths.out.join("runs"),
        wait_per_object: Duration::from_millis(args.wait_per_object_ms),
    };

    let interrupted = tokio::select! {
        () = bench(ctx, &plan, &shared) => false,
        () = interrupt() => true,
    };
    // The bench's future is dropped here: its processes are killed (kill_on_drop).
    finish(&shared, interrupted, &paths)
}

/// Where the bench finds what it runs, and where it writes.
struct Paths {
    /// The results, logs and Kopf's virtual environment.
    out: PathBuf,
    /// The compiled guests.
    guests: PathBuf,
    kapsel: PathBuf,
    /// The bench guest, among the guests.
    guest: PathBuf,
    /// `bench-watcher`, beside this binary.
    watcher: PathBuf,
    /// The results, as JSON.
    json: PathBuf,
}

impl Paths {
    fn of(args: &Args) -> Paths {
        let target = target_dir();
        let out = args.out.clone().unwrap_or_else(|| target.join("bench"));
        let guests = args
            .guests
            .clone()
            .unwrap_or_else(|| target.join("guests").join("wasm32-wasip2").join("release"));
        Paths {
            kapsel: args.kapsel.clone().unwrap_or_else(|| exe_beside("kapsel")),
            guest: guests.join("bench_operator.wasm"),
            watcher: exe_beside("bench-watcher"),
            json: out.join("results.json"),
            out,
            guests,
        }
    }

    /// The first of the binaries and the guest that does not exist: what it is, and
    /// where it was looked for.
    fn missing(&self) -> Option<(&'static str, &Path)> {
        [
            ("the kapsel binary", &self.kapsel),
            ("the bench guest (scripts/build-guests)", &self.guest),
            (
                "bench-watcher (cargo build --release -p kapsel-bench)",
                &self.watcher,
            ),
        ]
        .into_iter()
        .find(|(_, path)| !path.exists())
        .map(|(what, path)| (what, path.as_path()))
    }
}

/// Prints the report and writes the results, after the bench or its interruption; the
/// exit code (130 when interrupted).
fn finish(shared: &Shared, interrupted: bool, paths: &Paths) -> std::process::ExitCode {
    let mut results = lock(shared).clone();
    if interrupted {
        results.interrupt();
    }
    results.machine.load_at_end = results::load();
    let sections = figures::sections(&results);
    println!("{}", report::text(&results, &sections));
    match report::write_json(&paths.json, &results, &sections) {
        Ok(()) => println!(
            "Written: {} (logs under {})",
            paths.json.display(),
            paths.out.join("runs").display()
        ),
        Err(e) => eprintln!("{e}"),
    }
    if interrupted {
        std::process::ExitCode::from(130)
    } else {
        std::process::ExitCode::SUCCESS
    }
}

/// What to run.
struct Plan {
    startup: bool,
    running: bool,
    backlog: bool,
    /// One handler call of the bench guest beside native.
    invocation: bool,
    /// Admission reviews over HTTPS, Kapsel's webhook server beside Kopf's.
    admission: bool,
    quick: bool,
    sizes: Vec<usize>,
    repetitions: usize,
    skip_kopf: bool,
    venv: PathBuf,
    guests: PathBuf,
    json: PathBuf,
}

impl Plan {
    fn of(args: &Args, paths: &Paths) -> Plan {
        let only = |what: &str| args.only.is_empty() || args.only.iter().any(|o| o == what);
        Plan {
            startup: only("startup"),
            running: only("running"),
            backlog: only("backlog"),
            invocation: only("invocation"),
            admission: only("admission"),
            quick: args.quick,
            sizes: match (args.n.is_empty(), args.quick) {
                (false, _) => args.n.clone(),
                (true, true) => vec![100],
                (true, false) => vec![1000, 10_000],
            },
            repetitions: args.repeat.unwrap_or(if args.quick { 1 } else { 3 }).max(1),
            skip_kopf: args.skip_kopf,
            venv: paths.out.join("venv"),
            guests: paths.guests.clone(),
            json: paths.json.clone(),
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn interrupt() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    eprintln!("Interrupted: stopping the processes and writing what was measured.");
}

/// The start-up scenario, `plan.repetitions` times: Kapsel warmed up once, then each
/// operator's start-ups (Kapsel's with and without its compiled-guest cache).
async fn startups(ctx: &Context, plan: &Plan, shared: &Shared, operators: &[Kind]) {
    let repetitions = if plan.startup { plan.repetitions } else { 0 };
    if repetitions > 0 {
        eprintln!("start-up warm-up: kapsel (filling the compiled-guest cache)");
        let warm_up = scenarios::startup(ctx, Kind::Kapsel, Startup::Cached, usize::MAX).await;
        lock(shared).errors.extend(warm_up.error);
    }
    for repetition in 0..repetitions {
        for &kind in operators {
            let variants: &[Startup] = if kind == Kind::Kapsel {
                Startup::ALL
            } else {
                &[Startup::NoCache]
            };
            for &variant in variants {
                eprintln!(
                    "start-up {}/{}: {} ({})",
                    repetition + 1,
                    plan.repetitions,
                    kind.name(),
                    variant.label()
                );
                let run = scenarios::startup(ctx, kind, variant, repetition).await;
                let mut results = lock(shared);
                results.errors.extend(run.error.clone());
                results.startup.push(run);
            }
        }
        save(shared, &plan.json);
    }
}

/// The admission scenario: the same reviews to each operator's webhook server in turn.
async fn admission(ctx: &Context, plan: &Plan, shared: &Shared, operators: &[Kind]) {
    let (offered, saturated) = if plan.quick { (3, 2) } else { (10, 5) };
    for &kind in operators {
        eprintln!("admission: {}", kind.name());
        let run = scenarios::admission(
            ctx,
            kind,
            Duration::from_secs(offered),
            Duration::from_secs(saturated),
        )
        .await;
        if let Some(e) = &run.error {
            eprintln!("  {e}");
        }
        let mut results = lock(shared);
        results.errors.extend(run.error.clone());
        results.admission.push(run);
    }
    save(shared, &plan.json);
}

async fn bench(mut ctx: Context, plan: &Plan, shared: &Shared) {
    lock(shared).guest_sizes = sizes::guest_sizes(&plan.guests, &repository());
    if plan.invocation {
        // First, while nothing else runs: calls one after the other on this task.
        eprintln!("invocation: one handler call, fresh instance vs native");
        lock(shared).invocation = invocation::measure(&ctx.operators.guest).await;
    }

    let kopf = if plan.skip_kopf {
        Err("left out (--skip-kopf)".to_owned())
    } else {
        operators::install_kopf(&plan.venv).await
    };
    let version = match &kopf {
        Ok(_) => operators::kopf_version(&plan.venv.join("bin").join("python"))
            .await
            .ok_or_else(|| "Kopf does not import".to_owned()),
        Err(e) => Err(e.clone()),
    };
    if let Err(why) = &version {
        eprintln!("KOPF WILL NOT RUN: {why}. Going on with the rest.");
    }
    lock(shared).kopf = version.clone();
    ctx.operators.kopf = kopf;
    let mut operators = vec![Kind::Kapsel];
    if version.is_ok() {
        operators.push(Kind::Kopf);
    }
    save(shared, &plan.json);

    if plan.admission {
        // Before the long runs: the same reviews to each server, one after the other.
        admission(&ctx, plan, shared, &operators).await;
    }

    startups(&ctx, plan, shared, &operators).await;
    for &n in &plan.sizes {
        let running: &[Kind] = if plan.running { &operators } else { &[] };
        let floor: &[Kind] = if plan.running { &[Kind::Watcher] } else { &[] };
        for &kind in running.iter().chain(floor) {
            eprintln!("running, N={n}: {}", kind.name());
            let progress = |run: &scenarios::RunningRun| {
                lock(shared).in_progress = Some(InProgress::Running(Box::new(run.clone())));
            };
            let run = scenarios::running(&ctx, kind, n, &progress).await;
            if let Some(e) = &run.error {
                eprintln!("  {e}");
            }
            let mut results = lock(shared);
            results.errors.extend(run.error.clone());
            results.running.push(run);
            results.in_progress = None;
            drop(results);
            save(shared, &plan.json);
        }
        let backlog: &[Kind] = if plan.backlog { &operators } else { &[] };
        for &kind in backlog {
            eprintln!("backlog, N={n}: {}", kind.name());
            let progress = |run: &scenarios::BacklogRun| {
                lock(shared).in_progress = Some(InProgress::Backlog(Box::new(run.clone())));
            };
            let run = scenarios::backlog(&ctx, kind, n, &progress).await;
            if let Some(e) = &run.error {
                eprintln!("  {e}");
            }
            let mut results = lock(shared);
            results.errors.extend(run.error.clone());
            results.backlog.push(run);
            results.in_progress = None;
            drop(results);
            save(shared, &plan.json);
        }
    }
}
