//! Sending a cycle's patch to the API server (KOPF.md §4.7, §5.5).
//!
//! One merge-patch of `/status` when the resource has a status subresource, then one of
//! the object, then the finalizer change as a JSON patch guarded by a `resourceVersion`
//! test against the freshest body (the merge-patch's response).
//!
//! Status first, unlike Kopf: the object's patch carries what says a cause was handled
//! (the diff-base, the purged progress), `/status` the handlers' results. Were the
//! object patched first, a crash between the two writes would leave the cause handled
//! and its results never written (nothing would run the handler again). This way the
//! crash leaves the results written and the cause unhandled: the handler runs again
//! after the restart (at least once, as Kopf promises) and nothing is lost.
//! Every request is retried as Kopf retries API requests (`cluster::retried`); a 404
//! means the object is gone.
//!
//! Results the resource's schema refuses (422 Invalid naming fields under `status`) can
//! never be stored: unlike Kopf, which fails the whole cycle and so runs the
//! handlers again at every later event, the rest of the patch is sent without them (the
//! outcome, the diff-base, the finalizer) and the refusal is logged and posted as a
//! Warning Event `ResultsRefused` with the API server's reason.

use kube::Client;
use kube::api::{Api, Patch as KubePatch, PatchParams};
use serde_json::{Value, json};

use super::changes::{Patch, inconsistencies};
use super::objects::object_ref;
use crate::cluster::wire::Body;
use crate::cluster::{
    ObjectRef, PostedEvent, Poster, RequestError, Resource, Retries, SENSITIVE, retried,
};
use crate::object_log::object_log;
use crate::recording::Recorder;

/// Which object a patch is for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) resource: &'a Resource,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
}

impl<'a> Target<'a> {
    /// The object `body` is, of `resource`.
    pub(crate) fn of(resource: &'a Resource, body: &'a Value) -> Target<'a> {
        let meta = body.get("metadata");
        let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
        Target {
            resource,
            namespace: text("namespace"),
            name: text("name").unwrap_or_default(),
        }
    }

    fn api(&self, client: &Client) -> Api<Body> {
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
    /// The merge-patches were applied (`fresh`: the body they produced, if any was sent)
    /// but the finalizer change was refused (422 or 409: the object changed meanwhile);
    /// it should be retried in the next cycle.
    FinalizerRefused {
        fresh: Option<Value>,
        /// The refusal, when the API server refused it.
        error: Option<RequestError>,
    },
}

/// Sends patches to the API server, and tells the recording what they produced.
#[derive(Clone)]
pub(crate) struct Patcher {
    pub(crate) client: Client,
    /// How each patch is retried (`networking.error_backoffs`).
    pub(crate) retries: Retries,
    pub(crate) recorder: Recorder,
    /// Where refused results are reported.
    pub(crate) poster: Poster,
}

impl Patcher {
    /// Sends the patch: `/status` merge-patch, object merge-patch, finalizer JSON patch.
    pub(crate) async fn apply(
        &self,
        target: Target<'_>,
        body: &Value,
        patch: &Patch,
    ) -> Result<Applied, RequestError> {
        let (applied, refused) = apply(self, target, body, patch).await?;
        if let Some(error) = refused {
            let message = format!(
                "The handlers' results could not be stored: the API server refused them: {}",
                error.source
            );
            object_log!(error, object_ref(body).as_str(), "{message}");
            if let Some(involved) = ObjectRef::of(body) {
                self.poster
                    .post(PostedEvent::warning(involved, "ResultsRefused", message));
            }
        }
        Ok(applied)
    }
}

/// Whether the resource's objects hold credentials (their values are never logged).
fn holds_credentials(resource: &Resource) -> bool {
    SENSITIVE
        .iter()
        .any(|(group, plural)| resource.group == *group && resource.plural == *plural)
}

/// Applies the parts; the refusal of the results (see the module's docs) beside.
async fn apply(
    patcher: &Patcher,
    target: Target<'_>,
    body: &Value,
    patch: &Patch,
) -> Result<(Applied, Option<RequestError>), RequestError> {
    let (recorder, retries) = (&patcher.recorder, &patcher.retries);
    let record = |part: &str, response: &Value| {
        recorder.write(
            target.resource,
            target.namespace,
            target.name,
            part,
            response,
        );
    };
    let api = target.api(&patcher.client);
    let status_subresource = target.resource.subresources.iter().any(|s| s == "status");
    let (main, status) = patch.merge_patches(status_subresource);
    let mut freshest: Option<Value> = None;
    let mut refused = None;
    // The results before the record that the cause was handled: see the module's docs.
    for (part, is_status) in [(status, true), (main, false)] {
        let Some(mut part) = part else { continue };
        let sent = loop {
            let shape = read_back(&part, recorder);
            let sent = merge(&api, retries, target.name, &part, is_status, shape.as_ref()).await;
            match sent {
                Err(e) if refuses_results(&e.source) && part.get("status").is_some() => {
                    refused = Some(e);
                    match part.as_object_mut() {
                        Some(map) if map.len() > 1 => {
                            map.shift_remove("status");
                        }
                        _ => break None, // nothing but the results
                    }
                }
                other => break Some(other),
            }
        };
        match sent {
            None => {}
            Some(Ok(response)) => {
                record(if is_status { "status" } else { "object" }, &response);
                let missed = inconsistencies(&part, &response);
                if !missed.is_empty() && holds_credentials(target.resource) {
                    // The values may be credentials: only where they are is logged.
                    let paths: Vec<String> = missed.0.iter().map(|d| d.path.join(".")).collect();
                    tracing::warn!(
                        "Patching failed with inconsistencies at: {}",
                        paths.join(", ")
                    );
                } else if !missed.is_empty() {
                    tracing::warn!("Patching failed with inconsistencies: {}", missed.to_json());
                }
                freshest = Some(response);
            }
            Some(Err(e)) if e.status() == Some(404) => return Ok((Applied::Gone, refused)),
            Some(Err(e)) => return Err(e),
        }
    }
    // The finalizers' JSON patch: what its next write needs of the answer.
    let shape = read_back(&Value::Null, recorder);
    let applied = finalizers(
        (&api, retries),
        target,
        body,
        patch,
        freshest,
        record,
        shape,
    )
    .await?;
    Ok((applied, refused))
}

/// Whether a refusal is of the results: a 422 whose causes name fields under `status`, as
/// kube-apiserver's schema validation names them. Other 422s (a failed precondition, an
/// injected fault) are errors like any other, and the cycle is tried again.
fn refuses_results(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else {
        return false;
    };
    status.code == 422
        && status.details.as_ref().is_some_and(|details| {
            details.causes.iter().any(|cause| {
                cause.field == "status"
                    || cause.field.starts_with("status.")
                    || cause.field.starts_with("status[")
            })
        })
}

/// What the operator reads of the object its write returns, as a shape for
/// [`Body::read`]: the fields of the merge patch `part` (to see that they took) and what
/// its next write needs (`resourceVersion`, the finalizers); the rest is skipped unbuilt.
/// `None` (read whole) when `--record` keeps the answers.
fn read_back(part: &Value, recorder: &Recorder) -> Option<Value> {
    if recorder.is_on() {
        return None;
    }
    let mut shape = json!({"metadata": {}});
    if part.is_object() {
        shape = part.clone();
    }
    if let Some(shape) = shape.as_object_mut() {
        let metadata = shape.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        metadata["resourceVersion"] = Value::Null;
        metadata["finalizers"] = Value::Null;
    }
    Some(shape)
}

/// One merge-patch of the object or its `/status`, retried; the answer read as far as
/// `shape` names (see [`Body::read`]), whole without one.
async fn merge(
    api: &Api<Body>,
    retries: &Retries,
    name: &str,
    part: &Value,
    is_status: bool,
    shape: Option<&Value>,
) -> Result<Value, RequestError> {
    let what = if is_status {
        "patching the status"
    } else {
        "patching the object"
    };
    retried(what, retries, || async {
        let params = PatchParams::default();
        let merge = KubePatch::Merge(part);
        let answer = if is_status {
            api.patch_status(name, &params, &merge).await
        } else {
            api.patch(name, &params, &merge).await
        };
        answer.and_then(|object| object.read(shape).map_err(kube::Error::SerdeError))
    })
    .await
}

/// The finalizer change, as a JSON patch tested against the freshest body.
async fn finalizers(
    (api, retries): (&Api<Body>, &Retries),
    target: Target<'_>,
    body: &Value,
    patch: &Patch,
    freshest: Option<Value>,
    record: impl Fn(&str, &Value),
    shape: Option<Value>,
) -> Result<Applied, RequestError> {
    let latest = freshest.as_ref().unwrap_or(body);
    let Some(ops) = patch.finalizer_json_patch(latest) else {
        return Ok(Applied::Done(freshest));
    };
    let ops: json_patch::Patch = match serde_json::from_value(ops) {
        Ok(ops) => ops,
        // Our own patch shapes always parse; refusing here is safer than panicking.
        Err(_) => {
            return Ok(Applied::FinalizerRefused {
                fresh: freshest,
                error: None,
            });
        }
    };
    let sent = retried("patching the finalizers", retries, || async {
        api.patch(
            target.name,
            &PatchParams::default(),
            &KubePatch::<Value>::Json(ops.clone()),
        )
        .await
        .and_then(|object| object.read(shape.as_ref()).map_err(kube::Error::SerdeError))
    })
    .await;
    match sent {
        Ok(response) => {
            record("finalizers", &response);
            Ok(Applied::Done(Some(response)))
        }
        Err(e) if e.status() == Some(404) => Ok(Applied::Gone),
        // The version test failed (kube answers 422) or the write conflicted: the object
        // changed meanwhile, a race lost (`RequestError::lost_race`).
        Err(e) if e.status() == Some(422) || e.lost_race() => Ok(Applied::FinalizerRefused {
            fresh: freshest,
            error: Some(e.raced()),
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    #[test]
    fn a_write_is_read_back_as_far_as_the_patch_and_the_next_write_need() {
        let off = Recorder::default();
        let part = json!({"metadata": {"annotations": {"a": "1"}, "finalizers": ["f"]},
                          "status": {"create_fn": {"message": "m"}, "phase": "Created"}});
        assert_eq!(
            read_back(&part, &off),
            Some(
                json!({"metadata": {"annotations": {"a": "1"}, "finalizers": null, "resourceVersion": null},
                   "status": {"create_fn": {"message": "m"}, "phase": "Created"}})
            )
        );
        let answer: Body = serde_json::from_value(json!({
            "metadata": {"name": "x", "resourceVersion": "9", "annotations": {"a": "1", "b": "2"}},
            "spec": {"big": [1, 2, 3]},
            "status": {"create_fn": {"message": "m"}, "phase": "Created", "other": 1}
        }))
        .unwrap();
        let response = answer.read(read_back(&part, &off).as_ref()).unwrap();
        assert_eq!(
            response,
            json!({"metadata": {"resourceVersion": "9", "annotations": {"a": "1"}},
                   "status": {"create_fn": {"message": "m"}, "phase": "Created"}})
        );
        // What the operator reads of it: the fields it wrote took (the finalizers it
        // added did not), and the version its next write tests.
        let missed = inconsistencies(&part, &response);
        let paths: Vec<String> = missed.0.iter().map(|d| d.path.join(".")).collect();
        assert_eq!(paths, ["metadata.finalizers"]);
        assert_eq!(response["metadata"]["resourceVersion"], "9");
        for nothing in [Value::Null, json!([1])] {
            assert_eq!(
                read_back(&nothing, &off),
                Some(json!({"metadata": {"finalizers": null, "resourceVersion": null}}))
            );
        }
        // Recording keeps the answers whole.
        let (recording, _) = Recorder::in_memory(&[]);
        assert_eq!(read_back(&part, &recording), None);
    }

    fn invalid(code: u16, fields: &[&str]) -> kube::Error {
        let mut status = kube::core::Status::failure("invalid", "Invalid").with_code(code);
        status.details = Some(StatusDetails {
            name: "obj".into(),
            group: "kopf.dev".into(),
            kind: "kopfexamples".into(),
            uid: String::new(),
            causes: fields
                .iter()
                .map(|field| StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: "no".into(),
                    field: (*field).to_owned(),
                })
                .collect(),
            retry_after_seconds: 0,
        });
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn only_refusals_naming_the_results_are_refusals_of_the_results() {
        assert!(refuses_results(&invalid(422, &["status.create_fn"])));
        assert!(refuses_results(&invalid(422, &["spec.x", "status"])));
        assert!(refuses_results(&invalid(422, &["status[0]"])));
        // A failed precondition (or an injected fault) is tried again, not given up.
        assert!(!refuses_results(&invalid(
            422,
            &["metadata.resourceVersion"]
        )));
        assert!(!refuses_results(&invalid(422, &["statusx"])));
        assert!(!refuses_results(&invalid(422, &[])));
        assert!(!refuses_results(&invalid(409, &["status.create_fn"])));
    }
}
