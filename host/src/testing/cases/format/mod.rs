//! The case-file format of `kapsel test`: YAML written for humans.
//!
//! ```yaml
//! name: the create handler says hello      # optional; the file name otherwise
//! given:                                   # exists before the operator starts
//!   - file: ../../manifests/kopfexamples-crd.yaml   # relative to this file
//!   - apiVersion: kopf.dev/v1                     # or an object, inline
//!     kind: KopfExample
//!     metadata: {name: ex1, namespace: default}
//!     spec: {field: value}
//! steps:
//!   - expect:
//!       object: kopfexamples/ex1         # plural, kind, singular or short name / name
//!       matches: {status: {create_fn: {message: hello world}}}
//!   - patch: {object: kopfexamples/ex1, merge: {spec: {field: changed}}}
//!   - advance: 60s                       # handler time, instantly
//!   - expect: {called: update_fn, times: 1}
//!   - delete: kopfexamples/ex1
//!   - expect: {gone: kopfexamples/ex1}
//! ```
//!
//! Steps are single-key maps. Expectations wait (default 5 s, `within:` to change it)
//! before failing. `advance` first lets the operator settle (it has seen the case's
//! writes and has nothing left to do but wait for handler time), then moves handler time:
//! so `advance: 1s` after a handler asked for a retry in 1 s runs exactly that retry. Every error names the file, the line and column, and what is wrong:
//! the checks run while parsing, so the YAML parser can point at the node.

mod raw;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use raw::RawCase;

/// How long an expectation waits by default.
pub(crate) const DEFAULT_WITHIN: Duration = Duration::from_secs(5);

/// How long `not-called` watches by default: it can only pass at the end of its time.
pub(crate) const NOT_CALLED_WITHIN: Duration = Duration::from_millis(500);

/// One parsed case file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Case {
    /// The `name`, or the file name without its extension.
    pub(crate) name: String,
    /// The file it came from.
    pub(crate) path: PathBuf,
    /// Objects that exist before the operator starts.
    pub(crate) given: Vec<Source>,
    pub(crate) steps: Vec<Step>,
}

/// A case file could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CaseError {
    pub(crate) path: PathBuf,
    /// 1-based line and column, when the parser knows them.
    pub(crate) location: Option<(usize, usize)>,
    pub(crate) message: String,
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Some((line, column)) => write!(
                f,
                "{}:{line}:{column}: {}",
                self.path.display(),
                self.message
            ),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for CaseError {}

/// Where objects come from: a manifest file (one or more documents) or an inline object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    File(PathBuf),
    Object(Value),
}

/// One step of a case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Create the objects, or update them if they exist.
    Apply(Source),
    /// Merge-patch an object.
    Patch {
        target: Target,
        merge: Value,
    },
    /// Delete an object (it may linger while finalizers hold it).
    Delete(Target),
    /// Let the operator settle, then move handler time forward (retry delays, timers)
    /// without waiting.
    Advance(Duration),
    /// Wait in real time (rarely needed: expectations wait by themselves).
    Sleep(Duration),
    Expect(Expectation),
}

/// An object, as a case names it: `plural/name` (or kind, singular, short name),
/// optionally `group` qualified (`kopfexamples.kopf.dev/name`), in `namespace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The resource, as a Kopf selector names it.
    pub(crate) resource: String,
    pub(crate) name: String,
    /// As the case gave it; `default` for namespaced resources when not given, ignored
    /// for cluster-scoped ones.
    pub(crate) namespace: Option<String>,
}

impl Target {
    /// The namespace a namespaced resource's object is in.
    pub(crate) fn namespace_or_default(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
}

impl fmt::Display for Target {
    /// `resource/name`, and ` in namespace` when the case named one (a cluster-scoped
    /// object is in none; a namespaced one without is in `default`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.resource, self.name)?;
        match &self.namespace {
            Some(namespace) => write!(f, " in {namespace}"),
            None => Ok(()),
        }
    }
}

/// Something that must hold, within `within`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expectation {
    pub(crate) what: Expected,
    pub(crate) within: Duration,
}

/// What an expectation checks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expected {
    /// The object exists and contains this partial document.
    Object { target: Target, matches: Value },
    /// The object does not exist.
    Gone(Target),
    /// A Kubernetes Event about the object was posted.
    Event {
        about: Target,
        event_type: Option<String>,
        reason: Option<String>,
        /// A substring of the message.
        message: Option<String>,
    },
    /// The handler was called: at least once, or exactly `times`.
    Called {
        handler: String,
        times: Option<usize>,
    },
    /// The handler was not called, over all of `within` (default 0.5 s).
    NotCalled(String),
    /// A guest log line containing `text` appeared (from `handler`, if given).
    Log {
        text: String,
        handler: Option<String>,
    },
    /// No handler failed unexpectedly and the operator still runs.
    Healthy,
}

/// Reads and parses a case file.
pub(crate) fn load(path: &Path) -> Result<Case, CaseError> {
    let text = std::fs::read_to_string(path).map_err(|e| CaseError {
        path: path.to_owned(),
        location: None,
        message: format!("cannot read the case file: {e}"),
    })?;
    parse(path, &text)
}

/// Parses a case file's text; `path` names it in errors and anchors relative files.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Case, CaseError> {
    let raw: RawCase = serde_yaml::from_str(text).map_err(|e| CaseError {
        path: path.to_owned(),
        location: e.location().map(|l| (l.line(), l.column())),
        message: strip_location(&e.to_string()),
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let anchor = |source: Source| match source {
        Source::File(file) if file.is_relative() => Source::File(base.join(file)),
        other => other,
    };
    let name = raw.name.unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    if raw.steps.is_empty() {
        return Err(CaseError {
            path: path.to_owned(),
            location: None,
            message: "the case has no steps: add at least one `expect`".into(),
        });
    }
    // A file the case names must be there: an input error, found before anything runs.
    let applied = raw.steps.iter().filter_map(|step| match step {
        Step::Apply(source) => Some(source),
        _ => None,
    });
    for source in raw.given.iter().chain(applied) {
        if let Source::File(file) = source
            && !base.join(file).is_file()
        {
            let written = file.to_string_lossy();
            return Err(CaseError {
                path: path.to_owned(),
                location: locate(text, &written),
                message: format!("the file {written} does not exist (relative to the case file)"),
            });
        }
    }
    Ok(Case {
        name,
        path: path.to_owned(),
        given: raw.given.into_iter().map(anchor).collect(),
        steps: raw
            .steps
            .into_iter()
            .map(|step| match step {
                Step::Apply(source) => Step::Apply(anchor(source)),
                other => other,
            })
            .collect(),
    })
}

/// The 1-based line and column where `needle` is first written in `text`.
fn locate(text: &str, needle: &str) -> Option<(usize, usize)> {
    text.lines().enumerate().find_map(|(n, line)| {
        line.find(needle)
            .map(|column| (n + 1, line[..column].chars().count() + 1))
    })
}

/// serde_yaml appends " at line L column C"; the location is reported separately.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::raw::parse_duration;
    use super::*;
    use serde_json::json;

    /// Where the cases below pretend to be: files they name resolve from there.
    fn hello() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/minimal/tests/cases/hello.yaml")
    }

    fn case(text: &str) -> Result<Case, CaseError> {
        parse(&hello(), text)
    }

    fn error(text: &str) -> String {
        let message = case(text).expect_err("must fail").to_string();
        let prefix = hello().display().to_string();
        message.replace(&prefix, "examples/minimal/tests/cases/hello.yaml")
    }

    #[test]
    fn a_full_case_parses() {
        let parsed = case(
            r#"
given:
  - file: ../../../manifests/kopfexamples-crd.yaml
  - apiVersion: kopf.dev/v1
    kind: KopfExample
    metadata: {name: ex1}
steps:
  - expect:
      object: kopfexamples/ex1
      matches: {status: {create_fn: {message: hello world}}}
  - patch: {object: kex/ex1, namespace: other, merge: {spec: {field: x}}}
  - advance: 60s
  - sleep: 250ms
  - expect: {called: update_fn, times: 1, within: 2s}
  - expect: {not-called: delete_fn}
  - expect: {log: hello, handler: create_fn}
  - expect: {event: kopfexamples/ex1, type: Normal, reason: Created}
  - delete: kopfexamples/ex1
  - expect: {gone: kopfexamples/ex1}
  - expect: healthy
"#,
        )
        .expect("parses");
        assert_eq!(parsed.name, "hello");
        assert_eq!(
            parsed.given[0],
            Source::File(
                hello()
                    .parent()
                    .expect("a folder")
                    .join("../../../manifests/kopfexamples-crd.yaml")
            )
        );
        assert_eq!(parsed.steps.len(), 11);
        assert_eq!(
            parsed.steps[1],
            Step::Patch {
                target: Target {
                    resource: "kex".into(),
                    name: "ex1".into(),
                    namespace: Some("other".into())
                },
                merge: json!({"spec": {"field": "x"}}),
            }
        );
        assert_eq!(parsed.steps[2], Step::Advance(Duration::from_secs(60)));
        assert_eq!(parsed.steps[3], Step::Sleep(Duration::from_millis(250)));
        assert_eq!(
            parsed.steps[4],
            Step::Expect(Expectation {
                what: Expected::Called {
                    handler: "update_fn".into(),
                    times: Some(1)
                },
                within: Duration::from_secs(2),
            })
        );
        assert!(matches!(
            &parsed.steps[0],
            Step::Expect(Expectation { what: Expected::Object { target, .. }, within })
                if target.namespace.is_none() && *within == DEFAULT_WITHIN
        ));
        assert!(matches!(
            &parsed.steps[10],
            Step::Expect(Expectation {
                what: Expected::Healthy,
                ..
            })
        ));
    }

    #[test]
    fn a_missing_file_is_an_input_error_at_its_place() {
        assert_eq!(
            error("given:\n  - file: ../nowhere.yaml\nsteps:\n  - expect: healthy\n"),
            "examples/minimal/tests/cases/hello.yaml:2:11: the file ../nowhere.yaml does not exist (relative to the case file)"
        );
        assert_eq!(
            error("steps:\n  - apply: {file: gone.yaml}\n"),
            "examples/minimal/tests/cases/hello.yaml:2:19: the file gone.yaml does not exist (relative to the case file)",
            "apply steps too"
        );
    }

    #[test]
    fn errors_name_the_file_line_and_problem() {
        let e = error("steps:\n  - advance: 60s\n  - aply: {file: x.yaml}\n");
        assert!(
            e.starts_with(
                "examples/minimal/tests/cases/hello.yaml:3:5: steps[1]: unknown variant `aply`"
            ),
            "{e}"
        );
        let e = error("steps:\n  - advance: 60 parsecs\n");
        assert!(
            e.contains(":2:5:") && e.contains("expected a duration"),
            "{e}"
        );
        let e = error("steps:\n  - delete: ex1\n");
        assert!(e.contains(":2:5:") && e.contains("RESOURCE/NAME"), "{e}");
        let e = error("steps:\n  - expect:\n      object: kex/a\n      gone: kex/b\n");
        assert!(e.contains(":2:5:") && e.contains("exactly one of"), "{e}");
        let e = error("steps:\n  - expect: {object: kex/a}\n");
        assert!(e.contains("needs `matches`"), "{e}");
        let e = error("steps:\n  - expect: {called: f, handler: g}\n");
        assert!(e.contains("`handler` only goes with `log`"), "{e}");
        let e = error("given:\n  - kind: Pod\nsteps:\n  - expect: healthy\n");
        assert!(
            e.contains(":2:3:") && e.contains("apiVersion, kind and metadata.name"),
            "{e}"
        );
        let e = error("steps: []\n");
        assert!(e.contains("no steps"), "{e}");
        let e = error("stepz: []\n");
        assert!(e.contains("unknown field `stepz`"), "{e}");
        let e = error("steps:\n  - expect: happy\n");
        assert!(e.contains("unknown expectation \"happy\""), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("s"), None);
        assert_eq!(parse_duration("5 days"), None);
    }
}
