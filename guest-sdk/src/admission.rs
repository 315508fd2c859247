//! Admission handlers' side of a call (Kopf's `on.validate`/`on.mutate` keyword arguments
//! and `kopf.AdmissionError`): the request being admitted ([`Request`], [`request`]),
//! warnings for the client ([`warn`]), and how a refusal's code reaches the host. The
//! host's `admission` interface is reached through a pointer the first
//! `#[kapsel::on::validate]` or `#[kapsel::on::mutate]` sets, so that a guest without
//! admission handlers imports none of it.
//!
//! ```
//! use kapsel::admission::{self, Operation};
//!
//! // Kopf: @kopf.on.validate('kopfexamples', operations=['CREATE', 'UPDATE'])
//! //       def check(spec, userinfo, warnings, **_): ...
//! #[kapsel::on::validate("kopfexamples", operations = ["CREATE", "UPDATE"])]
//! fn check_user(cause: &kapsel::Cause) -> kapsel::Result<()> {
//!     let Some(request) = cause.admission() else { return Ok(()) };
//!     if request.operation == Operation::Update && request.user_info.username == "intruder" {
//!         return Err(kapsel::AdmissionError::new("not you").code(403).into());
//!     }
//!     if cause.spec().get("size").is_none() {
//!         admission::warn("spec.size is not set: 1 is assumed");
//!     }
//!     Ok(())
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

pub use crate::error::AdmissionError;
use crate::host::{self, AdmissionDeclaration, AdmissionRequest};

/// What the admitted write does (the review's `operation`; Kopf's `operation` kwarg).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`.
    Connect,
}

impl Operation {
    /// Kubernetes' word: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }

    /// The operation Kubernetes' word names; `None` for any other word.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "CREATE" => Some(Self::Create),
            "UPDATE" => Some(Self::Update),
            "DELETE" => Some(Self::Delete),
            "CONNECT" => Some(Self::Connect),
            _ => None,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who writes (the review's `userInfo`; Kopf's `userinfo` kwarg).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct UserInfo {
    /// `system:serviceaccount:default:builder`, `alice`, ...
    pub username: String,
    /// The user's uid.
    pub uid: String,
    /// `system:authenticated`, ...
    pub groups: Vec<String>,
    /// What the authenticator adds (scopes, ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with this name and nothing else (mostly for tests).
    pub fn new(username: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            ..Self::default()
        }
    }

    /// With this uid.
    #[must_use]
    pub fn uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }

    /// With these groups.
    #[must_use]
    pub fn groups<S: Into<String>>(mut self, groups: impl IntoIterator<Item = S>) -> Self {
        self.groups = groups.into_iter().map(Into::into).collect();
        self
    }

    /// With this extra entry.
    #[must_use]
    pub fn extra<S: Into<String>>(
        mut self,
        key: impl Into<String>,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        self.extra
            .insert(key.into(), values.into_iter().map(Into::into).collect());
        self
    }
}

/// The admission request an admission handler answers (the review's `request`): what
/// Kopf hands over as the `operation`, `subresource`, `dryrun` and `userinfo` kwargs,
/// with the review's uid and the write's options.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Request {
    /// The review's uid.
    pub uid: String,
    /// What the write does.
    pub operation: Operation,
    /// The subresource written (`status`, `scale`); none for the object itself.
    pub subresource: Option<String>,
    /// The write is a dry run: a handler with side effects must not make them.
    pub dry_run: bool,
    /// Who writes.
    pub user_info: UserInfo,
    /// The write's options (`CreateOptions`, `UpdateOptions`, `DeleteOptions`) as JSON;
    /// none when the review has none.
    pub options: Option<Value>,
}

impl Request {
    /// From the host's words and JSON; an error says what is wrong.
    fn from_host(raw: AdmissionRequest) -> Result<Self, String> {
        let operation = Operation::parse(&raw.operation)
            .ok_or_else(|| format!("unknown operation `{}`", raw.operation))?;
        let user_info: UserInfo = serde_json::from_str(&raw.user_info)
            .map_err(|e| format!("the user info is not a user's JSON: {e}"))?;
        let options = raw
            .options
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| format!("the options are not JSON: {e}"))?;
        Ok(Self {
            uid: raw.uid,
            operation,
            subresource: raw.subresource,
            dry_run: raw.dry_run,
            user_info,
            options,
        })
    }

    /// As the host hands it over (the fake host's input).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn to_host(&self) -> AdmissionRequest {
        let user_info = serde_json::json!({
            "username": self.user_info.username,
            "uid": self.user_info.uid,
            "groups": self.user_info.groups,
            "extra": self.user_info.extra,
        });
        AdmissionRequest {
            uid: self.uid.clone(),
            operation: self.operation.as_str().to_owned(),
            subresource: self.subresource.clone(),
            dry_run: self.dry_run,
            user_info: user_info.to_string(),
            options: self.options.as_ref().map(Value::to_string),
        }
    }

    /// A request of this operation by nobody in particular (mostly for tests).
    pub fn new(operation: Operation) -> Self {
        Self {
            uid: String::new(),
            operation,
            subresource: None,
            dry_run: false,
            user_info: UserInfo::default(),
            options: None,
        }
    }
}

/// The host's admission calls, set by the first admission attribute.
struct Calls {
    declare: fn(&[AdmissionDeclaration]),
    request: fn() -> Option<AdmissionRequest>,
    warn: fn(&str),
    reject: fn(u16),
}

static CALLS: OnceLock<Calls> = OnceLock::new();

/// Makes the host's admission calls reachable (through the registry's `enable_admission`,
/// which every admission attribute calls).
pub(crate) fn enable() {
    CALLS.get_or_init(|| Calls {
        declare: host::declare_admission,
        request: host::admission_request,
        warn: host::admission_warn,
        reject: host::admission_reject,
    });
}

fn calls() -> Option<&'static Calls> {
    // Natively the fake host is always there: a test may call a handler directly.
    #[cfg(not(target_arch = "wasm32"))]
    enable();
    CALLS.get()
}

/// During an admission call (an `on::validate` or `on::mutate` handler's): its request;
/// `None` in any other call. Also `Cause::admission` (not linked: the cause is above
/// this module).
pub fn request() -> Option<Request> {
    let raw = (calls()?.request)()?;
    match Request::from_host(raw) {
        Ok(request) => Some(request),
        Err(message) => {
            let message = format!("the host sent an invalid admission request: {message}");
            crate::log::log(crate::log::Level::Error, &message);
            None
        }
    }
}

/// During an admission call: a warning for the client, sent as a `Warning:` header of the
/// write's answer (Kopf's `warnings.append(...)`), whether it is allowed or refused.
/// Ignored in any other call.
pub fn warn(message: impl AsRef<str>) {
    if let Some(calls) = calls() {
        (calls.warn)(message.as_ref());
    }
}

/// The current admission call's failure refuses the request with this code (the WIT's
/// `admission.reject`); nothing in a guest without admission handlers.
pub(crate) fn reject(code: u16) {
    if let Some(calls) = calls() {
        (calls.reject)(code);
    }
}

/// An admission attribute's own options (what the WIT's `admission.declaration` has beside
/// the id and the webhook). Hidden: the attributes write it.
#[doc(hidden)]
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct AdmissionOptions {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`; empty: every operation.
    pub operations: Vec<String>,
    pub subresource: Option<String>,
    pub persistent: bool,
    pub side_effects: bool,
    pub ignore_failures: bool,
}

/// The declarations of the admission handlers among `handlers` (id, mutating, options),
/// one per id in order.
///
/// # Panics
/// When two attributes of one id declare different webhooks or options: the host cannot
/// tell which one the id means, so the guest refuses to load (the panic fails `describe`).
pub(crate) fn declarations<'a>(
    handlers: impl IntoIterator<Item = (&'a str, bool, &'a AdmissionOptions)>,
) -> Vec<AdmissionDeclaration> {
    let mut declarations: Vec<AdmissionDeclaration> = Vec::new();
    for (id, mutating, options) in handlers {
        let declaration = AdmissionDeclaration {
            id: id.to_owned(),
            mutating,
            operations: options.operations.clone(),
            subresource: options.subresource.clone(),
            persistent: options.persistent,
            side_effects: options.side_effects,
            ignore_failures: options.ignore_failures,
        };
        match declarations.iter().find(|d| d.id == id) {
            Some(earlier) => assert!(
                *earlier == declaration,
                "admission handler id `{id}` is declared twice with different webhooks or \
                 options: give one an `id = \"...\"`"
            ),
            None => declarations.push(declaration),
        }
    }
    declarations
}

/// Names the admission handlers to the host (during `describe`).
pub(crate) fn declare(declarations: &[AdmissionDeclaration]) {
    if let Some(calls) = CALLS.get() {
        (calls.declare)(declarations);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_are_typed_from_the_hosts_words_and_json() {
        let raw = AdmissionRequest {
            uid: "u-1".into(),
            operation: "UPDATE".into(),
            subresource: Some("status".into()),
            dry_run: true,
            user_info:
                r#"{"username":"alice","uid":"42","groups":["g"],"extra":{"scopes":["a","b"]}}"#
                    .into(),
            options: Some(r#"{"fieldManager":"kubectl"}"#.into()),
        };
        let request = Request::from_host(raw.clone()).expect("a valid request");
        assert_eq!(request.operation, Operation::Update);
        assert_eq!(
            request.user_info,
            UserInfo::new("alice")
                .uid("42")
                .groups(["g"])
                .extra("scopes", ["a", "b"])
        );
        assert_eq!(request.options, Some(json!({"fieldManager": "kubectl"})));
        assert_eq!(
            (
                request.uid.as_str(),
                request.subresource.as_deref(),
                request.dry_run
            ),
            ("u-1", Some("status"), true)
        );
        assert_eq!(Request::from_host(request.to_host()), Ok(request));
        let partial = AdmissionRequest {
            user_info: r#"{"username":"bob"}"#.into(),
            options: None,
            ..raw.clone()
        };
        assert_eq!(
            Request::from_host(partial).expect("valid").user_info,
            UserInfo::new("bob")
        );
        let unknown = AdmissionRequest {
            operation: "PATCH".into(),
            ..raw.clone()
        };
        assert!(Request::from_host(unknown).unwrap_err().contains("PATCH"));
        let broken = AdmissionRequest {
            user_info: "[".into(),
            ..raw
        };
        assert!(Request::from_host(broken).is_err());
    }

    #[test]
    fn operations_read_and_write_kubernetes_words() {
        for op in [
            Operation::Create,
            Operation::Update,
            Operation::Delete,
            Operation::Connect,
        ] {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        assert_eq!(Operation::parse("create"), None);
    }

    #[test]
    fn one_declaration_per_id_and_conflicts_refused() {
        let create = AdmissionOptions {
            operations: vec!["CREATE".into()],
            ..AdmissionOptions::default()
        };
        let every = AdmissionOptions::default();
        let declared = declarations([
            ("a", false, &create),
            ("b", true, &every),
            ("a", false, &create),
        ]);
        assert_eq!(
            declared
                .iter()
                .map(|d| (d.id.as_str(), d.mutating, d.operations.len()))
                .collect::<Vec<_>>(),
            [("a", false, 1), ("b", true, 0)]
        );
        let conflict = std::panic::catch_unwind(|| {
            declarations([("a", false, &create), ("a", true, &create)])
        });
        assert!(conflict.is_err());
        let options = std::panic::catch_unwind(|| {
            declarations([("a", false, &create), ("a", false, &every)])
        });
        assert!(options.is_err());
    }
}
