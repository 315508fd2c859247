//! The kubectl harness: a kubectl bound to one embedded server, and helpers to run it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use kapsel_apiserver::{ApiServer, Config};
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

/// How long any single kubectl call may take.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Kopf's reference manifests (copied from `shared/reference/kopf/`, so the
/// test needs nothing outside the repository).
pub(crate) fn kopf_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/data"))
}

/// The kubectl binary; a missing kubectl fails the test (a skip would pass
/// silently, since libtest hides the output of passing tests).
pub(crate) fn find_kubectl() -> PathBuf {
    let fixed = Path::new("/usr/bin/kubectl");
    if fixed.exists() {
        return fixed.to_path_buf();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "kubectl is not installed: these tests drive the real kubectl. Install kubectl \
                 1.32 or newer (`apt-get install kubectl` where the Kubernetes or Cloud SDK \
                 apt repository is set up) at /usr/bin/kubectl or on PATH"
            )
        })
}

/// A kubectl bound to one embedded server, with its own kubeconfig and
/// discovery/OpenAPI cache directory (removed on drop).
pub(crate) struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    pub(crate) fn new(bin: PathBuf, server: &ApiServer, name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kapsel-kubectl-{name}-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig()).expect("write kubeconfig");
        Self {
            bin,
            dir,
            kubeconfig,
        }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        // The global flag goes first: anything after a `--` is the container's command.
        c.arg(format!("--cache-dir={}", self.dir.join("cache").display()))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl to completion (with a timeout), feeding `stdin` if given.
    pub(crate) async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.command(args);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        match timeout(CALL_TIMEOUT, child.wait_with_output()).await {
            Ok(out) => out.expect("kubectl output"),
            Err(_) => panic!("kubectl {args:?} did not finish within {CALL_TIMEOUT:?}"),
        }
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None).await
    }

    /// Runs kubectl, asserts success, returns stdout.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        check(args, &out)
    }

    /// Like `ok`, with a manifest on stdin (`-f -`).
    pub(crate) async fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        let out = self.run_with(args, Some(input)).await;
        check(args, &out)
    }

    /// `kubectl get ... -o json`, parsed.
    pub(crate) async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.ok(&all).await;
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: bad JSON ({e}): {text}"))
    }

    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("spawn kubectl")
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

pub(crate) fn check(args: &[&str], out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    // kubectl prints this when our OpenAPI schemas could not drive its
    // strategic-merge-patch computation (it then falls back to Go types).
    assert!(
        !stderr.contains("error calculating patch from openapi"),
        "kubectl {args:?} could not use the OpenAPI schemas: {stderr}"
    );
    stdout
}

pub(crate) async fn start() -> (ApiServer, PathBuf) {
    let bin = find_kubectl();
    let server = ApiServer::start(Config::default().port(0))
        .await
        .expect("start the embedded API server");
    (server, bin)
}

pub(crate) fn kopf_file(name: &str) -> String {
    let path = kopf_dir().join(name);
    path.to_str().expect("utf-8 path").to_owned()
}

/// Retries `kubectl args` until it succeeds (for a CRD to become served).
pub(crate) async fn eventually_ok(k: &Kubectl, args: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let out = k.run(args).await;
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        if tokio::time::Instant::now() > deadline {
            return check(args, &out);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reads lines of a running kubectl until one contains `needle`.
pub(crate) async fn read_until(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    needle: &str,
) -> String {
    let read = async {
        let mut seen = Vec::new();
        loop {
            match lines.next_line().await.expect("read kubectl output") {
                Some(line) if line.contains(needle) => return line,
                Some(line) => seen.push(line),
                None => panic!("kubectl output ended before {needle:?}; saw: {seen:?}"),
            }
        }
    };
    timeout(CALL_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| panic!("no line with {needle:?} within {CALL_TIMEOUT:?}"))
}
