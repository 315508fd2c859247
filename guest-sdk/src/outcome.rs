//! What a handler or sub-handler call ended with, as the host receives it (the WIT's
//! `outcome`), and how a handler's return value or error becomes one. Below the
//! registry and the sub-handlers, which both turn calls into outcomes.

use serde::Serialize;

use crate::{Error, ErrorKind};

/// WIT `outcome`, with results as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Success, with the result for `status.<id>` (none for `null`).
    Done(Option<String>),
    /// Retry after the delay in seconds.
    Temporary(String, f64),
    /// Fail for good.
    Permanent(String),
    /// An arbitrary error: the `errors` mode decides.
    Failed(String),
    /// An admission error (`kapsel::AdmissionError`): a permanent failure to the host,
    /// whose code the registry hands over (the WIT's `admission.reject`) in an admission
    /// call.
    Rejected(String, u16),
}

impl Outcome {
    /// As the host receives it: a rejection is a permanent failure (its code goes apart).
    pub(crate) fn into_host(self) -> Self {
        match self {
            Self::Rejected(message, _) => Self::Permanent(message),
            other => other,
        }
    }
}

/// The outcome of a handler that returned a value.
pub fn value_outcome<T: Serialize + ?Sized>(value: &T) -> Outcome {
    // Written out directly: through a `Value` first, a returned `Value` was copied whole.
    match serde_json::to_string(value) {
        Ok(json) if json == "null" => Outcome::Done(None),
        Ok(json) => Outcome::Done(Some(json)),
        Err(error) => Outcome::Failed(format!("the handler's result is not JSON: {error}")),
    }
}

/// The outcome of a handler that returned a `Result`.
pub fn result_outcome<T: Serialize, E: Into<Error>>(result: Result<T, E>) -> Outcome {
    match result {
        Ok(value) => value_outcome(&value),
        Err(error) => error_outcome(error.into()),
    }
}

/// The outcome the host receives for a handler's error.
pub(crate) fn error_outcome(error: Error) -> Outcome {
    // Unfinished sub-handlers (`kapsel::execute`'s error, Kopf's HandlerChildrenRetry)
    // are no failure: the host keeps the children's records, sees them unfinished and
    // calls the parent again when the next one is due, quietly, as Kopf does. A
    // temporary outcome would be logged and counted as a failed attempt; and the
    // parent's result is not stored until its children are done.
    if error.is_children_retry() {
        return Outcome::Done(None);
    }
    let message = error.to_string();
    if let Some(code) = error.admission_code() {
        return Outcome::Rejected(message, code);
    }
    match (error.kind(), error.delay()) {
        (ErrorKind::Temporary, Some(delay)) => Outcome::Temporary(message, delay),
        (ErrorKind::Permanent, _) => Outcome::Permanent(message),
        _ => Outcome::Failed(message),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn outcomes() {
        assert_eq!(value_outcome(&()), Outcome::Done(None));
        assert_eq!(value_outcome(&None::<u8>), Outcome::Done(None));
        assert_eq!(value_outcome(&f64::NAN), Outcome::Done(None));
        assert_eq!(
            value_outcome(&std::collections::BTreeMap::from([(1, "x")])),
            Outcome::Done(Some(r#"{"1":"x"}"#.into()))
        );
        let tuple_keys = std::collections::BTreeMap::from([((1, 2), "x")]);
        assert!(matches!(value_outcome(&tuple_keys), Outcome::Failed(_)));
        assert_eq!(
            value_outcome(&json!({"a": 1})),
            Outcome::Done(Some(r#"{"a":1}"#.into()))
        );
        let temporary: Result<(), _> = Err(crate::TemporaryError::new("t").with_delay(2.0));
        assert_eq!(
            result_outcome(temporary),
            Outcome::Temporary("t".into(), 2.0)
        );
        let arbitrary = "x".parse::<u8>();
        assert!(matches!(result_outcome(arbitrary), Outcome::Failed(_)));
        let refused: Result<(), _> = Err(crate::AdmissionError::new("no").code(403));
        let rejected = result_outcome(refused);
        assert_eq!(rejected, Outcome::Rejected("no".into(), 403));
        assert_eq!(rejected.into_host(), Outcome::Permanent("no".into()));
    }

    #[test]
    fn unfinished_children_are_a_quiet_done_though_a_temporary_error_to_the_parent() {
        let error = Error::children_retry(2.5);
        assert_eq!(
            (error.kind(), error.delay()),
            (ErrorKind::Temporary, Some(2.5))
        );
        assert_eq!(error_outcome(error), Outcome::Done(None));
    }
}
