//! `kapsel test`: case files run against a guest on a fresh embedded cluster, and
//! recordings replayed against it.
//!
//! `format` reads case files (with located errors); `runner` runs one case with the real
//! host machinery and a manual clock, serving the guest's admission webhooks to the
//! case's cluster when it has admission handlers (`admission`: their configuration
//! awaited, reviews sent to them, refused writes checked); `replay` runs a recording of `kapsel run --record`
//! the same way and compares; `matching` compares objects with the partial documents
//! cases expect; `report` prints the results and writes JUnit XML.

mod admission;
mod expecting;
mod format;
mod matching;
mod objects;
mod replay;
mod report;
mod runner;

use std::path::{Path, PathBuf};

use super::CaseSummary;

/// What `kapsel test` is asked to do: a guest, case files and recordings to replay.
#[derive(Debug, Clone)]
#[must_use]
pub struct TestRequest {
    guest: PathBuf,
    cases: Vec<PathBuf>,
    replays: Vec<PathBuf>,
    filter: Option<String>,
    verbose: bool,
    junit: Option<PathBuf>,
}

impl TestRequest {
    /// A request to test this guest (a `.wasm` file), with no case yet; the report shows
    /// what the operator did for failing cases.
    pub fn new(guest: impl Into<PathBuf>) -> TestRequest {
        TestRequest {
            guest: guest.into(),
            cases: Vec::new(),
            replays: Vec::new(),
            filter: None,
            verbose: true,
            junit: None,
        }
    }

    /// Case files (YAML), or directories of them.
    pub fn cases(mut self, cases: &[PathBuf]) -> TestRequest {
        self.cases.extend_from_slice(cases);
        self
    }

    /// Recordings of `kapsel run --record` to replay.
    pub fn replays(mut self, recordings: &[PathBuf]) -> TestRequest {
        self.replays.extend_from_slice(recordings);
        self
    }

    /// Only the cases whose name or path contains this.
    pub fn filter(mut self, filter: Option<String>) -> TestRequest {
        self.filter = filter;
        self
    }

    /// Whether the report shows what the operator did in a failing case.
    pub fn verbose(mut self, verbose: bool) -> TestRequest {
        self.verbose = verbose;
        self
    }

    /// Also write a JUnit XML report here.
    pub fn junit(mut self, path: Option<PathBuf>) -> TestRequest {
        self.junit = path;
        self
    }
}

/// Why `kapsel test` could not run at all (the command exits 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestError {
    /// The guest cannot be loaded.
    #[error("{0}")]
    Guest(String),
    /// Case files that cannot be read, each with its file, line and column.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Cases(Vec<String>),
    /// A recording that cannot be read, with its file and line.
    #[error("{0}")]
    Recording(String),
    /// No case or recording is left to run.
    #[error("no case matches the filter {0:?}")]
    NothingSelected(String),
    /// The JUnit report cannot be written.
    #[error("cannot write the JUnit report {path}: {error}")]
    Junit {
        /// The report's path.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Runs the cases; `Ok(summary)` tells how many passed.
pub(super) async fn run(
    request: &TestRequest,
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, TestError> {
    let (cases, errors): (Vec<_>, Vec<_>) = expand(&request.cases)
        .iter()
        .map(|path| format::load(path))
        .partition(Result::is_ok);
    let errors: Vec<String> = errors
        .into_iter()
        .filter_map(Result::err)
        .map(|e| e.to_string())
        .collect();
    if !errors.is_empty() {
        return Err(TestError::Cases(errors));
    }
    let cases: Vec<format::Case> = cases
        .into_iter()
        .filter_map(Result::ok)
        .filter(|case| {
            request
                .filter
                .as_deref()
                .is_none_or(|f| case.name.contains(f) || case.path.to_string_lossy().contains(f))
        })
        .collect();
    let recordings = request
        .replays
        .iter()
        .map(|path| crate::recording::read(path).map(|entries| (path, entries)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TestError::Recording(e.to_string()))?;
    if cases.is_empty() && recordings.is_empty() {
        return Err(TestError::NothingSelected(
            request.filter.clone().unwrap_or_default(),
        ));
    }
    // Compiled once for all cases; a guest that cannot load would fail every case the
    // same way: say it once.
    let runtime = crate::runtime::Runtime::new(crate::limits::Limits::default())
        .map_err(|e| TestError::Guest(crate::error_chain(&e)))?;
    let guest = runtime
        .load(&request.guest)
        .await
        .map_err(|e| TestError::Guest(e.to_string()))?;
    check_handlers(&guest, &cases)?;
    let mut runs = Vec::new();
    let _ = writeln!(
        out,
        "kapsel test: {} case(s){} of {}",
        cases.len(),
        match recordings.len() {
            0 => String::new(),
            n => format!(", {n} replay(s)"),
        },
        request.guest.display()
    );
    for case in &cases {
        let run = runner::run(&runtime, &guest, case).await;
        report::print_case(out, &run, request.verbose);
        runs.push(run);
    }
    for (path, entries) in &recordings {
        let run = replay::run(&runtime, &guest, path, entries).await;
        report::print_case(out, &run, request.verbose);
        runs.push(run);
    }
    let summary = report::Summary::of(&runs);
    report::print_summary(out, &summary);
    if let Some(path) = &request.junit {
        let xml = report::junit(&request.guest, &runs);
        std::fs::write(path, xml).map_err(|error| TestError::Junit {
            path: path.clone(),
            error,
        })?;
    }
    Ok(CaseSummary {
        passed: summary.passed,
        failed: summary.failed,
    })
}

/// An expectation about a handler the guest does not have is a typo (it would pass
/// `not-called` forever), as is a review for an admission handler it does not declare.
fn check_handlers(guest: &crate::runtime::Guest, cases: &[format::Case]) -> Result<(), TestError> {
    let declared: Vec<&str> = guest
        .describe()
        .handlers
        .iter()
        .map(|h| h.id.as_str())
        .collect();
    let admission: Vec<&str> = guest.admissions().iter().map(|d| d.id.as_str()).collect();
    let errors: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            case.check_handlers(&declared)
                .and_then(|()| case.check_admission(&admission))
                .err()
        })
        .map(|e| e.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(TestError::Cases(errors))
    }
}

/// Case arguments: files, or directories of `*.yaml`/`*.yml` files (sorted).
fn expand(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| is_case_file(p))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    files
}

fn is_case_file(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "yaml" || e == "yml")
}
