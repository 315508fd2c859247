//! Kopf's retries of API requests (KOPF.md §5.5): which failures are worth another
//! attempt, the pauses between attempts, and [`retried`], which runs a request with them.
//! It is the one place a request is retried (the HTTP client retries nothing): the
//! operator's patches and its Events go through it; the guests' own calls do not (the
//! guest decides what to do with a failure), nor do watches (kube-runtime's backoff
//! resumes them) or peering keep-alives (the next one, due within the lifetime, is the
//! retry).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A request failed for good (after retries, or a status that is not retried).
#[derive(Debug, thiserror::Error)]
#[error("{what} failed: {source}")]
pub(crate) struct RequestError {
    what: &'static str,
    #[source]
    pub(crate) source: kube::Error,
    /// Its sender knows the refusal to mean a lost race ([`RequestError::raced`]).
    raced: bool,
}

impl RequestError {
    /// The HTTP status the API server answered, if it answered.
    pub(crate) fn status(&self) -> Option<u16> {
        status_code(&self.source)
    }

    /// Whether the request lost a race with another write of its object: a 409
    /// Conflict ("the object has been modified"), or a refusal its sender marked as one
    /// ([`RequestError::raced`]). Expected wherever others write the same objects (a
    /// guest, another controller): the object has a newer version, and the write is
    /// made again at once, against it, as Kopf does in its next cycle. Not an error,
    /// and not retried as a request (KOPF.md §5.5): the caller decides what "again" is.
    pub(crate) fn lost_race(&self) -> bool {
        self.raced || self.status() == Some(409)
    }

    /// The same failure, known to its sender to mean a lost race: a JSON patch that
    /// tests the object's `resourceVersion` is refused with 422 when the test fails.
    pub(crate) fn raced(self) -> RequestError {
        RequestError {
            raced: true,
            ..self
        }
    }
}

/// How a request is retried: Kopf's `networking.error_backoffs` (one attempt more than
/// there are pauses) and `networking.enforce_retry_after`. Cheap to clone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Retries {
    backoffs: Arc<[Duration]>,
    enforce_retry_after: bool,
}

impl Retries {
    /// The retries the user's settings say.
    pub(crate) fn of(networking: &crate::settings::Networking) -> Retries {
        Retries {
            backoffs: networking
                .error_backoffs
                .iter()
                .copied()
                .map(crate::settings::seconds)
                .collect(),
            enforce_retry_after: networking.enforce_retry_after,
        }
    }

    /// The pause before retry number `retry` (0-based) of a failed API request, or `None`
    /// when the attempts are used up. A 429's `Retry-After` is honoured as a minimum
    /// (or always, with `enforce_retry_after`).
    pub(crate) fn backoff(&self, retry: usize, retry_after: Option<u64>) -> Option<Duration> {
        let ours = *self.backoffs.get(retry)?;
        Some(match retry_after.map(Duration::from_secs) {
            Some(server) if self.enforce_retry_after => server,
            Some(server) => server.max(ours),
            None => ours,
        })
    }
}

impl Default for Retries {
    /// Kopf's: up to 9 attempts.
    fn default() -> Self {
        Retries::of(&crate::settings::Networking::default())
    }
}

/// Which API failures are retried: connection errors and timeouts (`status: None`),
/// 5xx, 403 (seen during cluster upgrades) and 429.
pub(crate) fn is_retried(status: Option<u16>) -> bool {
    match status {
        None => true,
        Some(code) => code >= 500 || code == 403 || code == 429,
    }
}

/// The HTTP status of an API error; `None` when the server did not answer.
pub(crate) fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether a failure is worth another attempt, and the server's `retryAfterSeconds`.
fn retry_hint(error: &kube::Error) -> (bool, Option<u64>) {
    match error {
        kube::Error::Api(status) => {
            let retry_after = status
                .details
                .as_ref()
                .map(|d| u64::from(d.retry_after_seconds))
                .filter(|s| *s > 0);
            (is_retried(Some(status.code)), retry_after)
        }
        // Bodies we cannot read or send are not going to get better, nor a failed login.
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => (false, None),
        kube::Error::Service(error) if error.is::<super::LoginError>() => (false, None),
        // Connection errors, timeouts, TLS hiccups.
        _ => (is_retried(None), None),
    }
}

/// Runs a request with Kopf's request retries (KOPF.md §5.5), as `retries` says.
pub(crate) async fn retried<T, F, Fut>(
    what: &'static str,
    retries: &Retries,
    mut request: F,
) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        match request().await {
            Ok(value) => return Ok(value),
            Err(error) => {
                let (retry, retry_after) = retry_hint(&error);
                let pause = if retry {
                    retries.backoff(attempt, retry_after)
                } else {
                    None
                };
                let Some(pause) = pause else {
                    return Err(RequestError {
                        what,
                        source: error,
                        raced: false,
                    });
                };
                tracing::debug!(
                    "{what} failed, retrying in {} s: {error}",
                    pause.as_secs_f64()
                );
                tokio::time::sleep(pause).await;
                attempt += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn api_error(code: u16, retry_after: Option<u32>) -> kube::Error {
        let mut status = kube::core::Status::failure("nope", "Reason").with_code(code);
        if let Some(secs) = retry_after {
            status.details = Some(kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: secs,
            });
        }
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn which_failures_are_retried() {
        assert_eq!(retry_hint(&api_error(500, None)), (true, None));
        assert_eq!(retry_hint(&api_error(429, Some(3))), (true, Some(3)));
        assert_eq!(retry_hint(&api_error(403, None)), (true, None));
        assert_eq!(retry_hint(&api_error(409, None)), (false, None));
        assert_eq!(retry_hint(&api_error(422, None)), (false, None));
        assert_eq!(retry_hint(&api_error(404, None)), (false, None));
        assert!(is_retried(None) && is_retried(Some(503)) && is_retried(Some(429)));
        // A failed login is final: the vault fails every request until the operator stops.
        let login = super::super::LoginError("the login handler failed".to_owned());
        assert_eq!(
            retry_hint(&kube::Error::Service(Box::new(login))),
            (false, None)
        );
        assert!(!is_retried(Some(404)) && !is_retried(Some(422)));
    }

    #[test]
    fn backoffs_are_kopfs_and_honour_retry_after() {
        let kopfs = Retries::default();
        assert_eq!(kopfs.backoff(0, None), Some(Duration::from_secs(1)));
        assert_eq!(kopfs.backoff(7, None), Some(Duration::from_secs(21)));
        assert_eq!(kopfs.backoff(8, None), None, "9 attempts in total");
        assert_eq!(kopfs.backoff(2, Some(10)), Some(Duration::from_secs(10)));
        assert_eq!(kopfs.backoff(5, Some(1)), Some(Duration::from_secs(8)));
        let mut networking = crate::settings::Networking {
            enforce_retry_after: true,
            ..Default::default()
        };
        let enforced = Retries::of(&networking);
        assert_eq!(enforced.backoff(5, Some(1)), Some(Duration::from_secs(1)));
        assert_eq!(enforced.backoff(8, Some(1)), None, "no attempt more");
        networking.error_backoffs = vec![0.5];
        let short = Retries::of(&networking);
        assert_eq!(short.backoff(0, None), Some(Duration::from_millis(500)));
        assert_eq!(short.backoff(1, None), None, "2 attempts in total");
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_retried_with_backoff_then_succeed() {
        let calls = AtomicUsize::new(0);
        let started = tokio::time::Instant::now();
        let result = retried("testing", &Retries::default(), || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(api_error(503, None))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some(2));
        // Kopf's first two backoffs: 1 s and 1 s.
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn client_errors_fail_at_once_and_retries_end() {
        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = retried("testing", &Retries::default(), || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(409, None)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = retried("testing", &Retries::default(), || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(500, None)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 9, "up to 9 attempts");
    }

    #[tokio::test]
    async fn a_conflict_or_a_refusal_its_sender_marks_is_a_lost_race() {
        let failed = |code| async move {
            let result: Result<(), _> = retried("testing", &Retries::default(), || async move {
                Err(api_error(code, None))
            })
            .await;
            result.expect_err("it fails")
        };
        assert!(failed(409).await.lost_race());
        let invalid = failed(422).await;
        assert!(
            !invalid.lost_race(),
            "a 422 says nothing of a race by itself"
        );
        assert!(invalid.raced().lost_race(), "after a version test, it does");
        assert!(!failed(404).await.lost_race());
    }
}
