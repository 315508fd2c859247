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

mod admission;
mod raw;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use raw::RawCase;

pub(crate) use admission::{Answer, Refusal, Review, Write};

/// How long an expectation waits by default.
pub(crate) const DEFAULT_WITHIN: Duration = Duration::from_secs(5);

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
    /// The file's text, to locate later findings in.
    text: String,
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
    /// Send an admission review to the guest's admission handlers; check their answer.
    Review(Box<Review>),
    /// A write the cluster must refuse (its admission webhooks, or its own checks).
    Refused(Refusal),
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
    /// The handler was called: at least once, or exactly `times` (once the operator has
    /// settled).
    Called {
        handler: String,
        times: Option<usize>,
    },
    /// The handler was not called, once the operator has settled.
    NotCalled(String),
    /// A guest log line, or the operator's line about a handler (`Handler 'x' failed
    /// temporarily: ...`), containing `text` appeared (about `handler`, if given).
    Log {
        text: String,
        handler: Option<String>,
    },
    /// Attempts of the handler ended so: at least once, or exactly `times` (once the
    /// operator has settled).
    Outcome {
        handler: String,
        outcome: HandlerOutcome,
        times: Option<usize>,
    },
    /// The operator runs and what its liveness endpoint answers is a success (its loops
    /// live, its probes succeed): `healthy`, `{healthy: true}`; or, with `{healthy:
    /// false}`, a failure.
    Healthy(bool),
}

/// How one attempt of a handler ended, as a case names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandlerOutcome {
    /// `succeeded`
    Succeeded,
    /// `failed-temporarily`: it will be retried.
    FailedTemporarily,
    /// `failed-permanently`: it will not be retried (an error that is not to be retried,
    /// or the handler's timeout or retry limit reached).
    FailedPermanently,
    /// `ignored`: it failed, and its `errors` mode is `ignore`.
    Ignored,
}

impl HandlerOutcome {
    pub(crate) const ALL: [HandlerOutcome; 4] = [
        HandlerOutcome::Succeeded,
        HandlerOutcome::FailedTemporarily,
        HandlerOutcome::FailedPermanently,
        HandlerOutcome::Ignored,
    ];

    /// The word a case writes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HandlerOutcome::Succeeded => "succeeded",
            HandlerOutcome::FailedTemporarily => "failed-temporarily",
            HandlerOutcome::FailedPermanently => "failed-permanently",
            HandlerOutcome::Ignored => "ignored",
        }
    }
}

impl fmt::Display for HandlerOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Expected {
    /// Whether the expectation says something did not happen (more often): `not-called`,
    /// and `times` of `called` and `outcome`. Such a thing can still happen while the
    /// operator works, so these hold only once it has settled.
    pub(crate) fn denies_more(&self) -> bool {
        matches!(
            self,
            Expected::NotCalled(_)
                | Expected::Called { times: Some(_), .. }
                | Expected::Outcome { times: Some(_), .. }
        )
    }

    /// The handler the expectation names, if any.
    pub(crate) fn handler(&self) -> Option<&str> {
        match self {
            Expected::Called { handler, .. }
            | Expected::NotCalled(handler)
            | Expected::Outcome { handler, .. } => Some(handler),
            Expected::Log { handler, .. } => handler.as_deref(),
            Expected::Object { .. }
            | Expected::Gone(_)
            | Expected::Event { .. }
            | Expected::Healthy(_) => None,
        }
    }
}

impl Case {
    /// An input error if an expectation names a handler the guest does not declare
    /// (`declared`): a typo would otherwise pass `not-called` forever.
    pub(crate) fn check_handlers(&self, declared: &[&str]) -> Result<(), CaseError> {
        let named = self.steps.iter().filter_map(|step| match step {
            Step::Expect(expectation) => expectation.what.handler(),
            _ => None,
        });
        for handler in named {
            if !declared.contains(&handler) {
                let mut known = declared.to_vec();
                known.sort_unstable();
                return Err(CaseError {
                    path: self.path.clone(),
                    location: locate_value(
                        &self.text,
                        &["called", "not-called", "handler"],
                        handler,
                    ),
                    message: format!(
                        "the guest declares no handler {handler:?} (it declares: {})",
                        known.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    /// An input error if a `review` is sent to a guest without admission handlers, or
    /// names a handler that is none of its admission handlers (`admission`).
    pub(crate) fn check_admission(&self, admission: &[&str]) -> Result<(), CaseError> {
        for step in &self.steps {
            let Step::Review(review) = step else { continue };
            let error = |location, message| CaseError {
                path: self.path.clone(),
                location,
                message,
            };
            if admission.is_empty() {
                return Err(error(
                    locate(&self.text, "review:"),
                    "the guest declares no admission handlers (on::validate, on::mutate): \
                     no review can be answered"
                        .to_owned(),
                ));
            }
            if let Some(handler) = &review.handler
                && !admission.contains(&handler.as_str())
            {
                let mut known = admission.to_vec();
                known.sort_unstable();
                return Err(error(
                    locate_value(&self.text, &["handler"], handler),
                    format!(
                        "the guest declares no admission handler {handler:?} (it declares: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
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
    let applied = raw.steps.iter().flat_map(|step| -> Vec<&Source> {
        match step {
            Step::Apply(source)
            | Step::Refused(Refusal {
                write: Write::Apply(source),
                ..
            }) => vec![source],
            Step::Review(review) => review.sources().collect(),
            _ => Vec::new(),
        }
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
                Step::Refused(Refusal {
                    write: Write::Apply(source),
                    message,
                    code,
                }) => Step::Refused(Refusal {
                    write: Write::Apply(anchor(source)),
                    message,
                    code,
                }),
                Step::Review(review) => Step::Review(Box::new(review.anchored(anchor))),
                other => other,
            })
            .collect(),
        text: text.to_owned(),
    })
}

/// The 1-based line and column where `needle` is first written in `text`.
fn locate(text: &str, needle: &str) -> Option<(usize, usize)> {
    text.lines().enumerate().find_map(|(n, line)| {
        line.find(needle)
            .map(|column| (n + 1, line[..column].chars().count() + 1))
    })
}

/// The 1-based line and column of `value` where it is first written as the value of
/// one of `keys` (`called: update_fn`, `handler: "update_fn"`).
fn locate_value(text: &str, keys: &[&str], value: &str) -> Option<(usize, usize)> {
    text.lines().enumerate().find_map(|(n, line)| {
        keys.iter().find_map(|key| {
            let mut from = 0;
            while let Some(found) = line[from..].find(&format!("{key}:")) {
                let start = from + found;
                from = start + key.len() + 1;
                // `not-called:` must not be found as `called:`.
                let preceded = line[..start]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
                let rest = &line[from..];
                let value_at = from + (rest.len() - rest.trim_start().len());
                let written = line[value_at..].trim_start_matches(['"', '\'']);
                let quote = line[value_at..].len() - written.len();
                let whole = written.strip_prefix(value).is_some_and(|after| {
                    after
                        .chars()
                        .next()
                        .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'))
                });
                if !preceded && whole {
                    let column = line[..value_at + quote].chars().count() + 1;
                    return Some((n + 1, column));
                }
            }
            None
        })
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
mod tests;
