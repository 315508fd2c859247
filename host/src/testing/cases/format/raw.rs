//! How case files deserialize: YAML nodes into steps, sources, targets, durations and
//! expectations, each checked where the parser can still point at it.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::admission::{Refusal, Review, Write};
use super::{DEFAULT_WITHIN, Expectation, Expected, HandlerOutcome, Source, Step, Target};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCase {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) given: Vec<Source>,
    #[serde(default, with = "serde_yaml::with::singleton_map_recursive")]
    pub(super) steps: Vec<Step>,
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        enum RawStep {
            Apply(Source),
            Patch(RawPatch),
            Delete(RawDelete),
            Advance(Seconds),
            Sleep(Seconds),
            Expect(RawExpect),
            Review(Box<Review>),
            Refused(Refusal),
        }
        Ok(match RawStep::deserialize(deserializer)? {
            RawStep::Apply(source) => Step::Apply(source),
            RawStep::Patch(p) => {
                let (target, merge) = p.into_parts();
                Step::Patch { target, merge }
            }
            RawStep::Delete(d) => Step::Delete(d.0),
            RawStep::Advance(s) => Step::Advance(s.0),
            RawStep::Sleep(s) => Step::Sleep(s.0),
            RawStep::Expect(e) => Step::Expect(e.0),
            RawStep::Review(review) => Step::Review(review),
            RawStep::Refused(refusal) => Step::Refused(refusal),
        })
    }
}

/// `file: PATH`, or an inline Kubernetes object.
impl<'de> Deserialize<'de> for Source {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        if let Some(map) = value.as_object()
            && map.len() == 1
            && let Some(file) = map.get("file")
        {
            return match file.as_str() {
                Some(file) if !file.is_empty() => Ok(Source::File(PathBuf::from(file))),
                _ => Err(D::Error::custom("`file` must be a path")),
            };
        }
        let has = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if !value.is_object() || !has("/apiVersion") || !has("/kind") || !has("/metadata/name") {
            return Err(D::Error::custom(
                "expected `file: PATH` or a Kubernetes object with apiVersion, kind and metadata.name",
            ));
        }
        Ok(Source::Object(value))
    }
}

/// A duration: `90s`, `1.5s`, `500ms`, `2m`, `1h`, or a number of seconds.
struct Seconds(Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        let parsed = match &value {
            Value::Number(n) => n.as_f64().and_then(|s| duration(s, 1.0)),
            Value::String(text) => parse_duration(text),
            _ => None,
        };
        parsed.map(Seconds).ok_or_else(|| {
            D::Error::custom(format!(
                "expected a duration like 60s, 500ms, 2m or 1h, got {value}"
            ))
        })
    }
}

fn duration(amount: f64, unit_seconds: f64) -> Option<Duration> {
    let seconds = amount * unit_seconds;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::try_from_secs_f64(seconds).ok())
        .flatten()
}

pub(super) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let amount: f64 = number.parse().ok()?;
    let unit_seconds = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    duration(amount, unit_seconds)
}

/// `resource/name`, as a string.
struct RawTarget {
    resource: String,
    name: String,
}

impl RawTarget {
    fn into_target(self, namespace: Option<String>) -> Target {
        Target {
            resource: self.resource,
            name: self.name,
            namespace,
        }
    }
}

impl<'de> Deserialize<'de> for RawTarget {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let text = String::deserialize(deserializer)?;
        match text.split_once('/') {
            Some((resource, name))
                if !resource.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(RawTarget {
                    resource: resource.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(D::Error::custom(format!(
                "expected RESOURCE/NAME (like kopfexamples/ex1), got {text:?}"
            ))),
        }
    }
}

/// `delete: RESOURCE/NAME`, or `delete: {object: RESOURCE/NAME, namespace: NS}`.
struct RawDelete(Target);

impl<'de> Deserialize<'de> for RawDelete {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct InNamespace {
            object: RawTarget,
            namespace: Option<String>,
        }
        let value = Value::deserialize(deserializer)?;
        let target = if value.is_object() {
            let given: InNamespace = serde_json::from_value(value).map_err(D::Error::custom)?;
            given.object.into_target(given.namespace)
        } else {
            RawTarget::deserialize(value)
                .map_err(D::Error::custom)?
                .into_target(None)
        };
        Ok(RawDelete(target))
    }
}

/// `patch:`'s keys (also `refused`'s `patch`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPatch {
    object: RawTarget,
    namespace: Option<String>,
    merge: Value,
}

impl RawPatch {
    /// The object patched, and the merge patch.
    fn into_parts(self) -> (Target, Value) {
        (self.object.into_target(self.namespace), self.merge)
    }
}

/// An expectation: exactly one subject key, plus its options.
struct RawExpect(Expectation);

impl<'de> Deserialize<'de> for RawExpect {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // `expect: healthy` is a plain word; everything else a map. (Read as a value
        // first: an untagged enum would swallow the precise messages below.)
        let fields: ExpectFields = match Value::deserialize(deserializer)? {
            Value::String(word) if word == "healthy" => {
                return Ok(RawExpect(Expectation {
                    what: Expected::Healthy(true),
                    within: DEFAULT_WITHIN,
                }));
            }
            Value::String(word) => {
                return Err(D::Error::custom(format!(
                    "unknown expectation {word:?}: use `healthy`, or a map with one of object, gone, event, called, not-called, log, outcome"
                )));
            }
            map => serde_json::from_value(map).map_err(D::Error::custom)?,
        };
        fields
            .into_expectation()
            .map(RawExpect)
            .map_err(D::Error::custom)
    }
}

/// The keys of an expectation written as a map: its subject (exactly one of `object`
/// to `healthy`) and the options that go with it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ExpectFields {
    object: Option<RawTarget>,
    matches: Option<Value>,
    gone: Option<RawTarget>,
    event: Option<RawTarget>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    called: Option<String>,
    times: Option<usize>,
    not_called: Option<String>,
    log: Option<String>,
    outcome: Option<HandlerOutcome>,
    handler: Option<String>,
    namespace: Option<String>,
    healthy: Option<bool>,
    within: Option<Seconds>,
}

/// Why an expectation's keys do not make one expectation (the parser's message for it).
#[derive(Debug, thiserror::Error)]
enum KeysError {
    #[error(
        "an expectation needs exactly one of: object, gone, event, called, not-called, log, outcome, healthy"
    )]
    NotOneSubject,
    /// `key` is given without the subject (or any of the subjects) it goes with.
    #[error("`{key}` only goes with `{subject}`")]
    Misplaced {
        key: &'static str,
        subject: &'static str,
    },
    #[error("`object` needs `matches`: the partial document it must contain")]
    ObjectWithoutMatches,
    #[error("`outcome` needs `handler`: the handler whose attempts ended so")]
    OutcomeWithoutHandler,
}

impl ExpectFields {
    /// The expectation, once its keys are checked: one subject, each option with the
    /// subject it goes with.
    fn into_expectation(self) -> Result<Expectation, KeysError> {
        self.one_subject()?;
        self.options_placed()?;
        let within = self.within.as_ref().map_or(DEFAULT_WITHIN, |s| s.0);
        Ok(Expectation {
            what: self.into_expected()?,
            within,
        })
    }

    /// Exactly one subject is given.
    fn one_subject(&self) -> Result<(), KeysError> {
        let subjects = [
            self.object.is_some(),
            self.gone.is_some(),
            self.event.is_some(),
            self.called.is_some(),
            self.not_called.is_some(),
            self.log.is_some(),
            self.outcome.is_some(),
            self.healthy.is_some(),
        ];
        if subjects.iter().filter(|s| **s).count() != 1 {
            return Err(KeysError::NotOneSubject);
        }
        Ok(())
    }

    /// Each option given goes with the subject given.
    fn options_placed(&self) -> Result<(), KeysError> {
        let misplaced = |key, subject| Err(KeysError::Misplaced { key, subject });
        if self.matches.is_some() && self.object.is_none() {
            return misplaced("matches", "object");
        }
        if self.times.is_some() && self.called.is_none() && self.outcome.is_none() {
            return misplaced("times", "called` or `outcome");
        }
        if self.handler.is_some() && self.log.is_none() && self.outcome.is_none() {
            return misplaced("handler", "log` or `outcome");
        }
        if (self.event_type.is_some() || self.reason.is_some() || self.message.is_some())
            && self.event.is_none()
        {
            return misplaced("type/reason/message", "event");
        }
        Ok(())
    }

    /// What is expected, from the one subject and its options.
    fn into_expected(self) -> Result<Expected, KeysError> {
        let namespace = self.namespace;
        Ok(if let Some(object) = self.object {
            let Some(matches) = self.matches else {
                return Err(KeysError::ObjectWithoutMatches);
            };
            Expected::Object {
                target: object.into_target(namespace),
                matches,
            }
        } else if let Some(gone) = self.gone {
            Expected::Gone(gone.into_target(namespace))
        } else if let Some(about) = self.event {
            Expected::Event {
                about: about.into_target(namespace),
                event_type: self.event_type,
                reason: self.reason,
                message: self.message,
            }
        } else if let Some(handler) = self.called {
            Expected::Called {
                handler,
                times: self.times,
            }
        } else if let Some(handler) = self.not_called {
            Expected::NotCalled(handler)
        } else if let Some(text) = self.log {
            Expected::Log {
                text,
                handler: self.handler,
            }
        } else if let Some(outcome) = self.outcome {
            let Some(handler) = self.handler else {
                return Err(KeysError::OutcomeWithoutHandler);
            };
            Expected::Outcome {
                handler,
                outcome,
                times: self.times,
            }
        } else {
            Expected::Healthy(self.healthy.unwrap_or(true))
        })
    }
}

impl<'de> Deserialize<'de> for HandlerOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let word = String::deserialize(deserializer)?;
        HandlerOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == word)
            .ok_or_else(|| {
                let words: Vec<&str> = HandlerOutcome::ALL.iter().map(|o| o.as_str()).collect();
                D::Error::custom(format!(
                    "unknown outcome {word:?}: expected one of {}",
                    words.join(", ")
                ))
            })
    }
}

/// `refused:`: one write (`apply`, `patch` or `delete`), and how the cluster refuses it.
impl<'de> Deserialize<'de> for Refusal {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RawRefusal {
            apply: Option<Source>,
            patch: Option<RawPatch>,
            delete: Option<RawDelete>,
            message: Option<String>,
            code: Option<u16>,
        }
        let raw = RawRefusal::deserialize(deserializer)?;
        let write = match (raw.apply, raw.patch, raw.delete) {
            (Some(source), None, None) => Write::Apply(source),
            (None, Some(patch), None) => {
                let (target, merge) = patch.into_parts();
                Write::Patch { target, merge }
            }
            (None, None, Some(delete)) => Write::Delete(delete.0),
            _ => {
                return Err(D::Error::custom(
                    "`refused` needs exactly one write: `apply`, `patch` or `delete`",
                ));
            }
        };
        Ok(Refusal {
            write,
            message: raw.message,
            code: raw.code,
        })
    }
}
