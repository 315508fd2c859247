//! Child processes and what `/proc` says about them: spawning with the output captured
//! to a log file (watched for marker lines), killing on every way out, and sampling
//! memory (`/proc/PID/status`, `smaps_rollup`) and CPU time (`/proc/PID/stat`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// Variables of the bench's own environment that no measured process inherits.
const DEBUGGING_ENV: [&str; 2] = ["RUST_BACKTRACE", "RUST_LIB_BACKTRACE"];

/// How many warning or error lines of a process's output are kept for the report.
const KEPT_PROBLEMS: usize = 12;

/// What to start: a program, its arguments and environment.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    /// Lines to note the first arrival of (a substring each), e.g. "The operator is running".
    pub(crate) marks: Vec<String>,
}

/// What a process's output said, as far as the report cares.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct OutputSummary {
    pub(crate) lines: u64,
    /// Lines that look like warnings (`WARN`, `WARNING`).
    pub(crate) warnings: u64,
    /// Lines that look like errors (`ERROR`, `panicked`, `Traceback`).
    pub(crate) errors: u64,
    /// The first few warning and error lines.
    pub(crate) examples: Vec<String>,
}

#[derive(Debug, Default)]
struct Output {
    summary: OutputSummary,
    marks: HashMap<String, Instant>,
}

/// A running child: killed (SIGKILL) when dropped, so every way out of the bench, an
/// error, a panic or a signal caught by `main`, leaves no process behind.
#[derive(Debug)]
pub(crate) struct Proc {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) spawned: Instant,
    pub(crate) log: PathBuf,
    child: Child,
    output: Arc<Mutex<Output>>,
    wanted: Vec<String>,
}

impl Proc {
    /// Starts `launch`, its stdout and stderr appended to `log`.
    pub(crate) async fn spawn(name: &str, launch: &Launch, log: &Path) -> Result<Proc, String> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let file = tokio::fs::File::create(log)
            .await
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let mut command = Command::new(&launch.program);
        command.args(&launch.args);
        // Measured as deployed: a developer's shell often sets these for debugging, and
        // they make Rust capture a backtrace for every error created, handled or not.
        for debugging in DEBUGGING_ENV {
            command.env_remove(debugging);
        }
        command
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let spawned = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {name} ({}): {e}", launch.program.display()))?;
        let pid = child
            .id()
            .ok_or_else(|| format!("{name} exited before it could be measured"))?;
        let output = Arc::new(Mutex::new(Output::default()));
        let file = Arc::new(tokio::sync::Mutex::new(file));
        let streams: [Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>; 2] = [
            child.stdout.take().map(|s| Box::new(s) as _),
            child.stderr.take().map(|s| Box::new(s) as _),
        ];
        for stream in streams.into_iter().flatten() {
            let (output, file, marks) = (output.clone(), file.clone(), launch.marks.clone());
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let now = Instant::now();
                    note_line(&output, &marks, &line, now);
                    let mut file = file.lock().await;
                    let _ = file.write_all(line.as_bytes()).await;
                    let _ = file.write_all(b"\n").await;
                }
                let _ = file.lock().await.flush().await;
            });
        }
        Ok(Proc {
            name: name.to_owned(),
            pid,
            spawned,
            log: log.to_owned(),
            child,
            output,
            wanted: launch.marks.clone(),
        })
    }

    /// When a line containing `mark` (one of the launch's marks) first arrived.
    pub(crate) fn mark(&self, mark: &str) -> Option<Instant> {
        debug_assert!(self.wanted.iter().any(|m| m == mark));
        self.lock().marks.get(mark).copied()
    }

    /// What the output said so far.
    pub(crate) fn output(&self) -> OutputSummary {
        self.lock().summary.clone()
    }

    /// An error if the process has exited (with its status and log), else `Ok`.
    pub(crate) fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} exited ({status}); see {}",
                self.name,
                self.log.display()
            )),
            Err(e) => Err(format!("cannot check on {}: {e}", self.name)),
        }
    }

    /// A sample of its memory and CPU time now (an error once it has exited).
    pub(crate) fn sample(&self) -> Result<Sample, String> {
        Sample::of(self.pid).map_err(|e| {
            format!(
                "cannot read /proc of {} (has it exited? see {}): {e}",
                self.name,
                self.log.display()
            )
        })
    }

    /// Its largest kinds of mapping by resident memory (empty if unreadable).
    pub(crate) fn mappings(&self) -> Vec<Mapping> {
        rss_by_mapping(self.pid, 10).unwrap_or_default()
    }

    /// Stops it as the kubelet does: SIGTERM, then SIGKILL after 10 s; and waits for it.
    /// A process that exits rather than dies writes what it writes at exit (the
    /// profile of `scripts/pgo-build`'s training run).
    pub(crate) async fn stop(mut self) {
        let terminated = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .is_ok_and(|status| status.success());
        if terminated
            && tokio::time::timeout(Duration::from_secs(10), self.child.wait())
                .await
                .is_ok()
        {
            return;
        }
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn note_line(output: &Mutex<Output>, marks: &[String], line: &str, now: Instant) {
    let mut output = output.lock().unwrap_or_else(PoisonError::into_inner);
    output.summary.lines += 1;
    for mark in marks {
        if line.contains(mark.as_str()) {
            output.marks.entry(mark.clone()).or_insert(now);
        }
    }
    let problem = match line_level(line) {
        Some(Level::Warning) => {
            output.summary.warnings += 1;
            true
        }
        Some(Level::Error) => {
            output.summary.errors += 1;
            true
        }
        None => false,
    };
    if problem && output.summary.examples.len() < KEPT_PROBLEMS {
        output
            .summary
            .examples
            .push(line.chars().take(400).collect());
    }
}

#[derive(Debug, PartialEq)]
enum Level {
    Warning,
    Error,
}

/// Whether a log line (Kapsel's or Kopf's format) is a warning or an error.
fn line_level(line: &str) -> Option<Level> {
    let words = || line.split(|c: char| !c.is_ascii_alphabetic());
    if words().any(|w| matches!(w, "ERROR" | "CRITICAL" | "Traceback" | "panicked")) {
        Some(Level::Error)
    } else if words().any(|w| matches!(w, "WARN" | "WARNING")) {
        Some(Level::Warning)
    } else {
        None
    }
}

/// Memory and CPU time of a process at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub(crate) struct Sample {
    /// VmRSS, KiB.
    pub(crate) rss_kib: u64,
    /// VmHWM (peak RSS), KiB.
    pub(crate) peak_rss_kib: u64,
    /// RssAnon: anonymous memory (heap, stacks), KiB.
    pub(crate) anon_kib: u64,
    /// RssFile: file-backed pages (the binary, libraries, mapped files), KiB.
    pub(crate) file_kib: u64,
    /// RssShmem, KiB.
    pub(crate) shmem_kib: u64,
    /// Pss from smaps_rollup (shared pages divided among their users), KiB.
    pub(crate) pss_kib: u64,
    /// Threads.
    pub(crate) threads: u64,
    /// utime + stime, seconds.
    pub(crate) cpu_s: f64,
}

impl Sample {
    /// Reads `/proc/PID/{status,stat,smaps_rollup}`.
    pub(crate) fn of(pid: u32) -> std::io::Result<Sample> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // smaps_rollup may be unreadable (old kernels): Pss is then 0.
        let rollup =
            std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let mut sample = parse_status(&status);
        sample.pss_kib = kib_field(&rollup, "Pss:").unwrap_or(0);
        let invalid =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        if matches!(parse_stat_state(&stat), Some('Z' | 'X') | None) {
            return Err(invalid("the process has exited"));
        }
        let ticks =
            parse_stat_cpu_ticks(&stat).ok_or_else(|| invalid("unexpected /proc/PID/stat"))?;
        sample.cpu_s = ticks as f64 / clock_ticks_per_second() as f64;
        Ok(sample)
    }
}

/// Resident memory of the mappings of one kind (a file's code or data, the heap,
/// anonymous mappings by permissions), from `/proc/PID/smaps`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Mapping {
    /// `kapsel r-xp` (a file's name and the permissions), `[heap]`, `[anon rw-p]`.
    pub(crate) what: String,
    pub(crate) rss_kib: u64,
    /// Of which anonymous (private copies of file pages included).
    pub(crate) anon_kib: u64,
}

/// The `top` largest kinds of mapping of a process by resident memory.
pub(crate) fn rss_by_mapping(pid: u32, top: usize) -> std::io::Result<Vec<Mapping>> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
    Ok(parse_smaps(&smaps, top))
}

/// `/proc/PID/smaps` grouped by kind of mapping, largest first.
pub(crate) fn parse_smaps(text: &str, top: usize) -> Vec<Mapping> {
    let mut by: HashMap<String, (u64, u64)> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            let perms = fields.next().unwrap_or("");
            let path = fields.nth(3).unwrap_or("");
            current = Some(match path {
                "" => format!("[anon {perms}]"),
                p if p.starts_with('[') => p.to_owned(),
                p => format!("{} {perms}", p.rsplit('/').next().unwrap_or(p)),
            });
        } else if let Some(what) = &current {
            let mut kib = || {
                fields
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            match first {
                "Rss:" => by.entry(what.clone()).or_default().0 += kib(),
                "Anonymous:" => by.entry(what.clone()).or_default().1 += kib(),
                _ => {}
            }
        }
    }
    let mut mappings: Vec<Mapping> = by
        .into_iter()
        .filter(|(_, (rss, _))| *rss > 0)
        .map(|(what, (rss_kib, anon_kib))| Mapping {
            what,
            rss_kib,
            anon_kib,
        })
        .collect();
    mappings.sort_by(|a, b| b.rss_kib.cmp(&a.rss_kib).then(a.what.cmp(&b.what)));
    mappings.truncate(top);
    mappings
}

/// The memory fields of `/proc/PID/status`.
pub(crate) fn parse_status(text: &str) -> Sample {
    let field = |name: &str| kib_field(text, name).unwrap_or(0);
    Sample {
        rss_kib: field("VmRSS:"),
        peak_rss_kib: field("VmHWM:"),
        anon_kib: field("RssAnon:"),
        file_kib: field("RssFile:"),
        shmem_kib: field("RssShmem:"),
        threads: field("Threads:"),
        ..Sample::default()
    }
}

/// The number after `name` on its line (`VmRSS:   1234 kB` → 1234).
fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// utime + stime from `/proc/PID/stat`, in clock ticks. The command name (field 2) may
/// hold spaces and parentheses: fields are counted after its last `)`.
pub(crate) fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// The state letter of `/proc/PID/stat` (`R`, `S`, `Z`...).
pub(crate) fn parse_stat_state(text: &str) -> Option<char> {
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// `sysconf(_SC_CLK_TCK)`, asked of `getconf` once (100 on every usual Linux).
pub(crate) fn clock_ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// How a wait for quiet ended.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Settled {
    /// Whether the process went quiet before the limit.
    pub(crate) quiet: bool,
    /// How long the wait took, seconds.
    pub(crate) waited_s: f64,
}

/// Waits until the process has used at most `quiet_cpu` of one core over the last
/// `window` (it has settled: start-up done, queues drained), for at most `limit`.
pub(crate) async fn settle(
    proc: &Proc,
    window: Duration,
    quiet_cpu: f64,
    limit: Duration,
) -> Result<Settled, String> {
    let start = Instant::now();
    let step = Duration::from_millis(250);
    let mut history: Vec<(Instant, f64)> = Vec::new();
    loop {
        let now = Instant::now();
        history.push((now, proc.sample()?.cpu_s));
        history.retain(|(t, _)| now.duration_since(*t) <= window + step);
        if let (Some(first), Some(last)) = (history.first(), history.last())
            && last.0.duration_since(first.0) >= window
        {
            let used = (last.1 - first.1) / last.0.duration_since(first.0).as_secs_f64();
            if used <= quiet_cpu {
                return Ok(Settled {
                    quiet: true,
                    waited_s: start.elapsed().as_secs_f64(),
                });
            }
        }
        if start.elapsed() >= limit {
            return Ok(Settled {
                quiet: false,
                waited_s: start.elapsed().as_secs_f64(),
            });
        }
        tokio::time::sleep(step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_the_memory_split() {
        let text = "Name:\tkapsel\nVmHWM:\t   20480 kB\nVmRSS:\t   18432 kB\n\
                    RssAnon:\t    6144 kB\nRssFile:\t   12288 kB\nRssShmem:\t       0 kB\n\
                    Threads:\t5\n";
        let sample = parse_status(text);
        assert_eq!(
            (
                sample.rss_kib,
                sample.peak_rss_kib,
                sample.anon_kib,
                sample.file_kib
            ),
            (18432, 20480, 6144, 12288)
        );
        assert_eq!(sample.threads, 5);
    }

    #[test]
    fn stat_cpu_is_utime_plus_stime_after_the_name() {
        // A name with a space and a parenthesis, as a process may choose.
        let text = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                    250 37 0 0 20 0 9 0 12345 100000000 4500 18446744073709551615";
        assert_eq!(parse_stat_cpu_ticks(text), Some(287));
        assert_eq!(parse_stat_state(text), Some('S'));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn smaps_grouped_by_kind_of_mapping() {
        let smaps = "5577b4914000-5577b5087000 r--p 00000000 fe:00 5721766    /x/release/kapsel\n\
                     Rss:                2096 kB\nAnonymous:             0 kB\n\
                     5577b5087000-5577b6bb0000 r-xp 00772000 fe:00 5721766    /x/release/kapsel\n\
                     Rss:                4092 kB\nAnonymous:             0 kB\n\
                     7f0000000000-7f0000100000 rw-p 00000000 00:00 0\n\
                     Rss:                1000 kB\nAnonymous:          1000 kB\n\
                     7f0000200000-7f0000300000 rw-p 00000000 00:00 0\n\
                     Rss:                 500 kB\nAnonymous:           500 kB\n\
                     55770000-55780000 rw-p 00000000 00:00 0      [heap]\n\
                     Rss:                 300 kB\nAnonymous:           300 kB\n";
        let mappings = parse_smaps(smaps, 3);
        let what: Vec<(&str, u64, u64)> = mappings
            .iter()
            .map(|m| (m.what.as_str(), m.rss_kib, m.anon_kib))
            .collect();
        assert_eq!(
            what,
            [
                ("kapsel r-xp", 4092, 0),
                ("kapsel r--p", 2096, 0),
                ("[anon rw-p]", 1500, 1500)
            ]
        );
    }

    #[test]
    fn log_levels_of_kapsel_and_kopf_lines() {
        assert_eq!(
            line_level("[2025-01-01 10:00:00,000] kopf.objects [ERROR ] Handler failed"),
            Some(Level::Error)
        );
        assert_eq!(
            line_level("2025-01-01T10:00:00Z  WARN kapsel: retrying"),
            Some(Level::Warning)
        );
        assert_eq!(line_level("Handler 'create_fn' succeeded."), None);
        assert_eq!(line_level("ERRORS are not errors"), None);
    }
}
