//! Handler errors, as Kopf's exception classes (KOPF.md §5.1).

use std::fmt;

/// The delay before a retry when a [`TemporaryError`] names none: 60 seconds, as
/// Kopf's hard-coded default.
pub const DEFAULT_RETRY_DELAY: f64 = 60.0;

/// Retry the handler later (Kopf's `kopf.TemporaryError`).
///
/// ```
/// fn check(ready: bool) -> kapsel::Result<()> {
///     if !ready {
///         return Err(kapsel::TemporaryError::new("not ready yet").with_delay(10.0).into());
///     }
///     Ok(())
/// }
/// # assert!(check(false).is_err());
/// ```
///
/// # Caveats
/// Like `anyhow::Error`, this type does not implement [`std::error::Error`], so
/// that any standard error converts into [`Error`] with `?`.
#[derive(Debug, Clone, PartialEq)]
pub struct TemporaryError {
    message: String,
    delay: f64,
}

impl TemporaryError {
    /// A temporary error retried after [`DEFAULT_RETRY_DELAY`] seconds.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            delay: DEFAULT_RETRY_DELAY,
        }
    }

    /// Retries after `seconds` instead (0: at once). Negative or non-finite
    /// values count as 0.
    #[must_use]
    pub fn with_delay(mut self, seconds: f64) -> Self {
        self.delay = if seconds.is_finite() && seconds > 0.0 {
            seconds
        } else {
            0.0
        };
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Seconds before the retry.
    pub fn delay(&self) -> f64 {
        self.delay
    }
}

impl fmt::Display for TemporaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Fail the handler for good, without retries (Kopf's `kopf.PermanentError`).
///
/// # Caveats
/// Does not implement [`std::error::Error`]; see [`TemporaryError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermanentError {
    message: String,
}

impl PermanentError {
    /// A permanent error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PermanentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Refuse an admission request (Kopf's `kopf.AdmissionError`): what an
/// `on::validate` or `on::mutate` handler returns to refuse the write, with the
/// message and the HTTP code the client sees (500 unless told otherwise, as in Kopf).
///
/// It is a permanent error (Kopf's is a `PermanentError`): in any other handler it fails
/// the handler for good, as [`PermanentError`] does.
///
/// ```
/// #[kapsel::on::validate("kopfexamples")]
/// fn refuse_forbidden(cause: &kapsel::Cause) -> kapsel::Result<()> {
///     if cause.spec().get("field").and_then(|f| f.as_str()) == Some("forbidden") {
///         return Err(kapsel::AdmissionError::new("field must not be forbidden").code(422).into());
///     }
///     Ok(())
/// }
/// ```
///
/// # Caveats
/// Does not implement [`std::error::Error`]; see [`TemporaryError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionError {
    message: String,
    code: u16,
}

impl AdmissionError {
    /// The code of an admission error that names none: 500, as Kopf's.
    pub const DEFAULT_CODE: u16 = 500;

    /// An admission error with this message and the code 500.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: Self::DEFAULT_CODE,
        }
    }

    /// The HTTP code of the refusal instead (Kopf's `code=`), e.g. 422 or 403.
    #[must_use]
    pub fn code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP code of the refusal.
    pub fn status_code(&self) -> u16 {
        self.code
    }
}

impl fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a handler may fail with: a [`TemporaryError`], a [`PermanentError`], or
/// any other error (from `?` on a [`std::error::Error`], or [`Error::msg`]), which
/// the handler's `errors` mode decides about (temporary by default, ignored for
/// `on::event` and `index`).
#[derive(Debug, Clone, PartialEq)]
pub struct Error(Repr);

#[derive(Debug, Clone, PartialEq)]
enum Repr {
    Temporary(TemporaryError),
    Permanent(PermanentError),
    /// A [`PermanentError`] to everyone but the admission handlers' host, which refuses
    /// the request with its code.
    Admission(AdmissionError),
    Other(String),
    /// Kopf's `HandlerChildrenRetry`: `kapsel::execute` found sub-handlers unfinished;
    /// retry after this many seconds. Public as a temporary error (its `kind()`), since
    /// [`ErrorKind`] cannot gain a variant without breaking guests that match on it.
    ChildrenRetry(f64),
}

// The sub-handlers are named without links here and in `Repr`: a link up to them would
// tie the two modules in a cycle (tests/all/architecture.rs).
/// How a handler's arbitrary errors (neither [`TemporaryError`] nor [`PermanentError`])
/// are treated: Kopf's `kopf.ErrorsMode`, the `errors` option of a handler or a
/// sub-handler (`kapsel::Subhandler::errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorsMode {
    /// Retry after the backoff, as for a [`TemporaryError`] (the default).
    Temporary,
    /// Fail for good, as for a [`PermanentError`].
    Permanent,
    /// Log the error and count the handler as done.
    Ignored,
}

/// What [`Error::kind`] tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A [`TemporaryError`].
    Temporary,
    /// A [`PermanentError`].
    Permanent,
    /// Any other error: the handler's `errors` mode decides.
    Arbitrary,
}

impl Error {
    /// An arbitrary error with this message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self(Repr::Other(message.to_string()))
    }

    /// Which of the three this is.
    pub fn kind(&self) -> ErrorKind {
        match &self.0 {
            Repr::Temporary(_) | Repr::ChildrenRetry(_) => ErrorKind::Temporary,
            Repr::Permanent(_) | Repr::Admission(_) => ErrorKind::Permanent,
            Repr::Other(_) => ErrorKind::Arbitrary,
        }
    }

    /// The retry delay of a temporary error.
    pub fn delay(&self) -> Option<f64> {
        match &self.0 {
            Repr::Temporary(t) => Some(t.delay),
            Repr::ChildrenRetry(delay) => Some(*delay),
            _ => None,
        }
    }

    /// Unfinished sub-handlers, the next one due in `delay` seconds (Kopf's
    /// `HandlerChildrenRetry`).
    pub(crate) fn children_retry(delay: f64) -> Self {
        Self(Repr::ChildrenRetry(delay))
    }

    /// The code of an [`AdmissionError`], `None` for any other error.
    pub fn admission_code(&self) -> Option<u16> {
        match &self.0 {
            Repr::Admission(error) => Some(error.code),
            _ => None,
        }
    }

    /// Whether this is [`Error::children_retry`].
    pub(crate) fn is_children_retry(&self) -> bool {
        matches!(self.0, Repr::ChildrenRetry(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Temporary(t) => t.fmt(f),
            Repr::Permanent(p) => p.fmt(f),
            Repr::Admission(a) => a.fmt(f),
            Repr::Other(message) => f.write_str(message),
            Repr::ChildrenRetry(_) => f.write_str("the sub-handlers are not finished yet"),
        }
    }
}

impl From<TemporaryError> for Error {
    fn from(error: TemporaryError) -> Self {
        Self(Repr::Temporary(error))
    }
}

impl From<PermanentError> for Error {
    fn from(error: PermanentError) -> Self {
        Self(Repr::Permanent(error))
    }
}

impl From<AdmissionError> for Error {
    fn from(error: AdmissionError) -> Self {
        Self(Repr::Admission(error))
    }
}

/// Any standard error is an arbitrary failure; its message includes the chain of
/// sources (`outer: inner: root`).
impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self(Repr::Other(message))
    }
}

/// `Result<T, kapsel::Error>`, what handlers usually return.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        let e: Error = TemporaryError::new("later").into();
        assert_eq!(e.kind(), ErrorKind::Temporary);
        assert_eq!(e.delay(), Some(DEFAULT_RETRY_DELAY));
        let e: Error = TemporaryError::new("soon").with_delay(-3.0).into();
        assert_eq!(e.delay(), Some(0.0));
        let e: Error = PermanentError::new("never").into();
        assert_eq!(
            (e.kind(), e.to_string().as_str()),
            (ErrorKind::Permanent, "never")
        );
        let parse = "x".parse::<u32>().unwrap_err();
        let e: Error = parse.into();
        assert_eq!(e.kind(), ErrorKind::Arbitrary);
        assert_eq!(e.to_string(), "invalid digit found in string");
        assert_eq!(e.admission_code(), None);
    }

    #[test]
    fn admission_errors_are_permanent_with_a_code() {
        let e: Error = AdmissionError::new("refused").into();
        assert_eq!(
            (e.kind(), e.to_string().as_str(), e.admission_code()),
            (ErrorKind::Permanent, "refused", Some(500))
        );
        let e: Error = AdmissionError::new("bad").code(422).into();
        assert_eq!(e.admission_code(), Some(422));
        let e: Error = PermanentError::new("p").into();
        assert_eq!(e.admission_code(), None);
    }
}
