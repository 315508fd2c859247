//! Sending a cycle's patch to the API server (KOPF.md §4.7, §5.5).
//!
//! One merge-patch of the object, one of `/status` when the resource has a status
//! subresource, then the finalizer change as a JSON patch guarded by a
//! `resourceVersion` test against the freshest body (the merge-patch's response).
//! Every request is retried on connection errors, 5xx, 403 and 429 (honouring the
//! server's `retryAfterSeconds`) with Kopf's backoffs; a 404 means the object is gone.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch as KubePatch, PatchParams};
use serde_json::Value;

use super::changes::{Patch, inconsistencies, request_backoff, request_is_retried};
use super::discovery::Resource;
use crate::recording::Recorder;

/// Which object a patch is for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) resource: &'a Resource,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
}

impl Target<'_> {
    fn api(&self, client: &Client) -> Api<DynamicObject> {
        let ar = self.resource.api_resource();
        match self.namespace {
            Some(ns) if self.resource.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
            _ => Api::all_with(client.clone(), &ar),
        }
    }
}

/// How sending a cycle's patch went.
#[derive(Debug)]
pub(crate) enum Applied {
    /// Every part was applied; the freshest body the server answered with, if any was sent.
    Done(Option<Value>),
    /// The object is gone (404): nothing more to do for it.
    Gone,
    /// The merge-patches were applied but the finalizer change was refused (422: the
    /// object changed meanwhile); it should be retried in the next cycle.
    FinalizerRefused(Option<Value>),
}

/// A request failed for good (after retries, or a non-retried status).
#[derive(Debug, thiserror::Error)]
#[error("{what} failed: {source}")]
pub(crate) struct PatchError {
    what: &'static str,
    #[source]
    source: kube::Error,
}

/// Sends the patch: object merge-patch, `/status` merge-patch, finalizer JSON patch.
pub(crate) async fn apply(
    client: &Client,
    target: Target<'_>,
    body: &Value,
    patch: &Patch,
    recorder: &Recorder,
) -> Result<Applied, PatchError> {
    let record = |part: &str, response: &Value| {
        recorder.write(
            target.resource,
            target.namespace,
            target.name,
            part,
            response,
        );
    };
    let api = target.api(client);
    let status_subresource = target.resource.subresources.iter().any(|s| s == "status");
    let (main, status) = patch.merge_patches(status_subresource);
    let mut freshest: Option<Value> = None;
    for (part, is_status) in [(main, false), (status, true)] {
        let Some(part) = part else { continue };
        let what = if is_status {
            "patching the status"
        } else {
            "patching the object"
        };
        let sent = retried(what, || async {
            let params = PatchParams::default();
            let merge = KubePatch::Merge(&part);
            if is_status {
                api.patch_status(target.name, &params, &merge).await
            } else {
                api.patch(target.name, &params, &merge).await
            }
        })
        .await;
        match sent {
            Ok(object) => {
                let response = serde_json::to_value(object).unwrap_or(Value::Null);
                record(if is_status { "status" } else { "object" }, &response);
                let missed = inconsistencies(&part, &response);
                if !missed.is_empty() {
                    tracing::warn!("Patching failed with inconsistencies: {}", missed.to_json());
                }
                freshest = Some(response);
            }
            Err(e) if is_not_found(&e.source) => return Ok(Applied::Gone),
            Err(e) => return Err(e),
        }
    }

    let latest = freshest.as_ref().unwrap_or(body);
    let Some(ops) = patch.finalizer_json_patch(latest) else {
        return Ok(Applied::Done(freshest));
    };
    let ops: json_patch::Patch = match serde_json::from_value(ops) {
        Ok(ops) => ops,
        // Our own patch shapes always parse; refusing here is safer than panicking.
        Err(_) => return Ok(Applied::FinalizerRefused(freshest)),
    };
    let sent = retried("patching the finalizers", || async {
        api.patch(
            target.name,
            &PatchParams::default(),
            &KubePatch::<Value>::Json(ops.clone()),
        )
        .await
    })
    .await;
    match sent {
        Ok(object) => {
            let response = serde_json::to_value(object).unwrap_or(Value::Null);
            record("finalizers", &response);
            Ok(Applied::Done(Some(response)))
        }
        Err(e) if is_not_found(&e.source) => Ok(Applied::Gone),
        Err(e) if status_code(&e.source) == Some(422) => Ok(Applied::FinalizerRefused(freshest)),
        Err(e) => Err(e),
    }
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
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
            (request_is_retried(Some(status.code)), retry_after)
        }
        // Bodies we cannot read or send are not going to get better.
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => (false, None),
        // Connection errors, timeouts, TLS hiccups.
        _ => (request_is_retried(None), None),
    }
}

/// Runs a request with Kopf's request retries (KOPF.md §5.5).
pub(crate) async fn retried<T, F, Fut>(what: &'static str, mut request: F) -> Result<T, PatchError>
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
                    request_backoff(attempt, retry_after, false)
                } else {
                    None
                };
                let Some(pause) = pause else {
                    return Err(PatchError {
                        what,
                        source: error,
                    });
                };
                tracing::debug!("{what} failed, retrying in {}: {error}", humanize(pause));
                tokio::time::sleep(pause).await;
                attempt += 1;
            }
        }
    }
}

fn humanize(pause: Duration) -> String {
    format!("{} s", pause.as_secs_f64())
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
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_retried_with_backoff_then_succeed() {
        let calls = AtomicUsize::new(0);
        let started = tokio::time::Instant::now();
        let result = retried("testing", || {
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
        let result: Result<(), _> = retried("testing", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(409, None)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = retried("testing", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(500, None)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 9, "up to 9 attempts");
    }
}
