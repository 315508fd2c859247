//! The admission steps of case files: `review` (an AdmissionReview sent to the guest's
//! admission handlers, and what their answer must be), read with its checks so that the
//! parser points at a malformed one, and `refused` (a write the cluster must refuse, its
//! webhooks or its own checks; read in `raw`, beside the writes).

use serde::Deserialize;
use serde_json::Value;

use super::{Source, Target};

/// The operations an admission review can be about (kube's, in its words).
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// An admission review sent to the guest's admission handlers (all of them, as the root of
/// its webhook server answers, or one `handler`), and what the answer must be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Review {
    /// One of [`OPERATIONS`].
    pub(crate) operation: String,
    /// The object written (absent for a DELETE).
    pub(crate) object: Option<Source>,
    /// The object before an UPDATE, or the one a DELETE deletes.
    pub(crate) old_object: Option<Source>,
    /// `userInfo` as kube sends it: username, uid, groups, extra.
    pub(crate) user_info: Value,
    pub(crate) dry_run: bool,
    pub(crate) subresource: Option<String>,
    /// Only this handler's webhook is asked (its id); every handler otherwise.
    pub(crate) handler: Option<String>,
    pub(crate) answer: Answer,
}

impl Review {
    /// The sources of its objects, for the checks of files.
    pub(crate) fn sources(&self) -> impl Iterator<Item = &Source> {
        self.object.iter().chain(self.old_object.iter())
    }

    /// The same review, its sources passed through `anchor` (files made relative to the
    /// case file).
    pub(crate) fn anchored(self, anchor: impl Fn(Source) -> Source) -> Review {
        Review {
            object: self.object.map(&anchor),
            old_object: self.old_object.map(&anchor),
            ..self
        }
    }
}

/// What a review's answer must say; what is not given is not checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    /// A part of the refusal's message.
    pub(crate) message: Option<String>,
    /// The refusal's HTTP code.
    pub(crate) code: Option<u16>,
    /// Exactly these warnings, in order.
    pub(crate) warnings: Option<Vec<String>>,
    /// The object, once the answer's patch is applied to it, contains this partial
    /// document.
    pub(crate) patched: Option<Value>,
    /// Exactly these JSONPatch operations (`[]`: none).
    pub(crate) patch: Option<Vec<Value>>,
}

/// A write the cluster must refuse, and how.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) write: Write,
    /// A part of the API server's message.
    pub(crate) message: Option<String>,
    /// The HTTP code of the refusal.
    pub(crate) code: Option<u16>,
}

/// A write, as `apply`, `patch` and `delete` steps make it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Write {
    Apply(Source),
    Patch { target: Target, merge: Value },
    Delete(Target),
}

/// `review:`'s keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawReview {
    operation: String,
    object: Option<Source>,
    old_object: Option<Source>,
    user_info: Option<UserInfo>,
    #[serde(default)]
    dry_run: bool,
    subresource: Option<String>,
    handler: Option<String>,
    expect: Option<RawAnswer>,
}

/// kube's `userInfo`: a typo in a key is an error, not a user without groups.
#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct UserInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

/// `expect:`'s keys in a review.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    allowed: Option<bool>,
    message: Option<String>,
    code: Option<u16>,
    warnings: Option<Vec<String>>,
    patched: Option<Value>,
    patch: Option<Vec<Value>>,
}

impl<'de> Deserialize<'de> for Review {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = RawReview::deserialize(deserializer)?;
        let operation = raw.operation;
        if !OPERATIONS.contains(&operation.as_str()) {
            return Err(D::Error::custom(format!(
                "unknown operation {operation:?}: expected one of {}",
                OPERATIONS.join(", ")
            )));
        }
        let article = if operation == "UPDATE" { "an" } else { "a" };
        let needs = |what: &str, why: &str| {
            D::Error::custom(format!(
                "{article} {operation} review needs `{what}`: {why}"
            ))
        };
        match operation.as_str() {
            "DELETE" if raw.object.is_some() => {
                return Err(D::Error::custom(
                    "a DELETE review has no `object`: kube sends the deleted object as `old-object`",
                ));
            }
            "DELETE" if raw.old_object.is_none() => {
                return Err(needs("old-object", "the object deleted"));
            }
            "UPDATE" if raw.old_object.is_none() => {
                return Err(needs("old-object", "the object before the update"));
            }
            "CREATE" | "CONNECT" if raw.old_object.is_some() => {
                return Err(D::Error::custom(format!(
                    "a {operation} review has no `old-object`: only UPDATE and DELETE have one"
                )));
            }
            "DELETE" => {}
            _ if raw.object.is_none() => return Err(needs("object", "the object written")),
            _ => {}
        }
        let Some(answer) = raw.expect else {
            return Err(D::Error::custom(
                "a review needs `expect`: what its answer must be (at least `allowed`)",
            ));
        };
        let user_info = match raw.user_info {
            Some(user) => serde_json::to_value(user).map_err(D::Error::custom)?,
            None => Value::Object(serde_json::Map::new()),
        };
        Ok(Review {
            operation,
            object: raw.object,
            old_object: raw.old_object,
            user_info,
            dry_run: raw.dry_run,
            subresource: raw.subresource.filter(|s| !s.is_empty()),
            handler: raw.handler,
            answer: answer.checked().map_err(D::Error::custom)?,
        })
    }
}

impl RawAnswer {
    /// The answer, once its keys agree: a refusal has no patch, an allowance no message.
    fn checked(self) -> Result<Answer, &'static str> {
        let Some(allowed) = self.allowed else {
            return Err("a review's `expect` needs `allowed: true` or `allowed: false`");
        };
        if allowed && (self.message.is_some() || self.code.is_some()) {
            return Err("`message` and `code` describe a refusal: they go with `allowed: false`");
        }
        if !allowed && (self.patched.is_some() || self.patch.is_some()) {
            return Err(
                "a refused review has no patch: `patched` and `patch` go with `allowed: true`",
            );
        }
        Ok(Answer {
            allowed,
            message: self.message,
            code: self.code,
            warnings: self.warnings,
            patched: self.patched,
            patch: self.patch,
        })
    }
}
