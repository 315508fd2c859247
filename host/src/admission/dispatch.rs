//! One admission review answered: the handlers that answer it called all at once (Kopf's
//! `all_at_once`, never retried), each in its own sandboxed call of the admission pool,
//! and their outcomes made one response: refused when any failed (the first failure by
//! Kopf's priority: an admission error, a permanent error, a temporary error, any other),
//! with every warning, and one JSONPatch of what the mutating handlers changed.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use chrono::TimeDelta;

use futures::future::join_all;
use serde_json::Value;
use tokio::sync::Mutex;

use super::handlers::{AdmissionHandler, admission_handlers, named_by, resource_of};
use super::review::{Judgement, Review, response};
use crate::activities::Context;
use crate::cluster::Resource;
use crate::handlers::execution::{self, Attempt, Executed, RetryPolicy, Verdict, decide};
use crate::handlers::{About, Ended, GuestServices, Handler, SettingsAccess};
use crate::limits::Limits;
use crate::reactor::diff;
use crate::runtime::{
    self, AdmissionRequest, CallContext, CallError, ErrorsMode, Guest, HandlerKind, Pool,
    ServedGuests,
};

/// Discovery is asked again for a resource it did not know at most this often.
const RESCAN_AFTER: Duration = Duration::from_secs(2);

/// The code of a refusal that names none (Kopf's).
const DEFAULT_CODE: u16 = 500;

/// Admission calls are made once (Kopf's `execute_handlers_once` with `PERMANENT` errors):
/// the policy that names their failures so.
const ADMISSION_POLICY: RetryPolicy = RetryPolicy {
    errors: ErrorsMode::Permanent,
    timeout: None,
    retries: Some(1),
    backoff: None,
    default_backoff: 0.0,
    min_delay: 0.0,
};

/// Answers the reviews of the operator's webhooks, with the guests served now.
pub(crate) struct Dispatch {
    served: ServedGuests,
    /// The admission handlers of the guests they were made of (a reload makes others).
    handlers: RwLock<(Vec<Guest>, Arc<Vec<AdmissionHandler>>)>,
    limits: Arc<Limits>,
    context: Context,
    /// The cluster's resources, as discovery found them; asked again (at most every
    /// [`RESCAN_AFTER`]) when a review names one it does not know.
    resources: Mutex<Discovered>,
    client: Option<kube::Client>,
}

struct Discovered {
    resources: Vec<Resource>,
    scanned: Option<Instant>,
}

/// How one handler's call ended, for the verdict.
enum Answer {
    /// Allowed, with the handler's merge patch (a mutating handler's).
    Allowed(Option<serde_json::Map<String, Value>>),
    /// Refused: the message, the code, and the rank of the failure (lower wins).
    Refused {
        message: String,
        code: u16,
        rank: u8,
    },
    /// Its call failed and the handler ignores failures: it says nothing.
    Ignored,
}

impl Dispatch {
    pub(crate) fn new(
        served: ServedGuests,
        limits: Arc<Limits>,
        context: Context,
        (client, resources): (Option<kube::Client>, Vec<Resource>),
    ) -> Dispatch {
        Dispatch {
            served,
            handlers: RwLock::new((Vec::new(), Arc::new(Vec::new()))),
            limits,
            context,
            resources: Mutex::new(Discovered {
                resources,
                scanned: None,
            }),
            client,
        }
    }

    /// The admission handlers of the guests served now: a review that started before a
    /// reload finishes with those it started with.
    pub(crate) fn handlers(&self) -> Arc<Vec<AdmissionHandler>> {
        let guests = self.served.guests();
        let same = |made_of: &[Guest]| {
            made_of.len() == guests.len()
                && made_of.iter().zip(&guests).all(|(a, b)| a.same_load(b))
        };
        {
            let cached = self.handlers.read().unwrap_or_else(PoisonError::into_inner);
            if same(&cached.0) {
                return Arc::clone(&cached.1);
            }
        }
        let handlers = Arc::new(admission_handlers(&guests, &self.limits));
        *self
            .handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner) = (guests, Arc::clone(&handlers));
        handlers
    }

    /// The resources discovery found (for the managed configurations' rules).
    pub(crate) async fn resources(&self) -> Vec<Resource> {
        self.resources.lock().await.resources.clone()
    }

    /// Discovery again, now (a CRD came).
    pub(crate) async fn rescan(&self) {
        let mut discovered = self.resources.lock().await;
        self.scan(&mut discovered).await;
    }

    async fn scan(&self, discovered: &mut Discovered) {
        let Some(client) = &self.client else { return };
        discovered.scanned = Some(Instant::now());
        match crate::cluster::scan(client).await {
            Ok(resources) => discovered.resources = resources,
            Err(error) => tracing::warn!("admission: discovery failed: {error}"),
        }
    }

    /// The response to a review that came to `path` (below the server's root).
    pub(crate) async fn answer(&self, path: &str, body: &[u8]) -> http::Response<String> {
        let review = match Review::read(body) {
            Ok(review) => review,
            Err(error) => return plain(http::StatusCode::BAD_REQUEST, error.to_string()),
        };
        let handlers = self.handlers();
        let Some(named) = named_by(&handlers, path) else {
            return plain(
                http::StatusCode::NOT_FOUND,
                format!(
                    "no admission handler is served at /{}",
                    path.trim_matches('/')
                ),
            );
        };
        let verdict = self.decide(&named, &review).await;
        let body = response(&review, &verdict).to_string();
        http::Response::builder()
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .unwrap_or_default()
    }

    /// What the handlers among `named` that answer `review` decide.
    async fn decide(&self, named: &[&AdmissionHandler], review: &Review) -> Judgement {
        let resource = self.resource_of(review).await;
        let matching: Vec<&AdmissionHandler> = named
            .iter()
            .copied()
            .filter(|h| h.answers(review, &resource))
            .collect();
        let calls = matching
            .iter()
            .map(|handler| self.call(handler, review, &resource));
        let answers = join_all(calls).await;
        let mut verdict = Judgement::default();
        // The body with the mutating handlers' merge patches, once one has any.
        let mut patched: Option<Value> = None;
        let mut refusal: Option<(String, u16, u8)> = None;
        for (answer, warnings) in answers.into_iter().flatten() {
            verdict.warnings.extend(warnings);
            match answer {
                Answer::Allowed(Some(patch)) => {
                    let patched = patched.get_or_insert_with(|| review.body().clone());
                    json_patch::merge(patched, &Value::Object(patch));
                }
                Answer::Refused {
                    message,
                    code,
                    rank,
                } if refusal.as_ref().is_none_or(|(_, _, best)| rank < *best) => {
                    refusal = Some((message, code, rank));
                }
                Answer::Allowed(None) | Answer::Refused { .. } | Answer::Ignored => {}
            }
        }
        verdict.refusal = refusal.map(|(message, code, _)| (message, code));
        if let Some(patched) = patched.filter(|_| verdict.refusal.is_none()) {
            let patch = json_patch::diff(review.body(), &patched);
            if let Ok(Value::Array(operations)) = serde_json::to_value(&patch) {
                verdict.patch = operations;
            }
        }
        verdict
    }

    /// The review's resource, discovery asked again when it does not know it yet.
    async fn resource_of(&self, review: &Review) -> Resource {
        let mut discovered = self.resources.lock().await;
        let stale = discovered
            .scanned
            .is_none_or(|scanned| scanned.elapsed() >= RESCAN_AFTER);
        if !super::handlers::discovered(review, &discovered.resources) && stale {
            self.scan(&mut discovered).await;
        }
        resource_of(review, &discovered.resources)
    }

    /// Calls one handler (after its `when` filter, if any): its answer and warnings, or
    /// nothing when its `when` filter says it does not apply.
    async fn call(
        &self,
        handler: &AdmissionHandler,
        review: &Review,
        resource: &Resource,
    ) -> Option<(Answer, Vec<String>)> {
        let cause = cause(handler, review, resource, self.context.memo.get());
        let request = AdmissionRequest {
            uid: review.uid.clone(),
            operation: review.operation.clone(),
            subresource: review.subresource.clone(),
            dry_run: review.dry_run,
            user_info: review.user_info.clone(),
            options: review.options.clone(),
        };
        if handler.has_when() {
            let ctx = self.call_context(handler, review, resource);
            let applies = handler
                .guest
                .admission_when(cause.clone(), request.clone(), ctx)
                .await;
            match applies {
                Ok(true) => {}
                Ok(false) => return None,
                Err(error) => return Some((self.failed(handler, &error), Vec::new())),
            }
        }
        let ctx = self.call_context(handler, review, resource);
        let journaled = Handler {
            guest: handler.guest.clone(),
            spec: handler.specs.first()?.clone(),
        };
        let (key, object) = (resource.key(), object_ref(review.identity()));
        let about = About {
            resource: &key,
            object: object.as_deref(),
            event_type: None,
        };
        journaled.record_called(&self.context.journal, about);
        let (executed, admitted) = execution::admit(&handler.guest, cause, request, ctx).await;
        let answer = self.judged(handler, &journaled, about, executed, admitted.rejected);
        Some((answer, admitted.warnings))
    }

    /// What an admission call's outcome means, logged and recorded as every handler
    /// call's is (Kopf's lines; `kind` `validate` or `mutate` in the records and metrics).
    fn judged(
        &self,
        handler: &AdmissionHandler,
        journaled: &Handler,
        about: About<'_>,
        executed: Executed,
        rejected: Option<u16>,
    ) -> Answer {
        let id = handler.id();
        // Kopf names an admission handler a webhook in its log lines.
        let name = format!("Webhook {}", crate::pyformat::py_repr_str(id));
        let journal = &self.context.journal;
        let fault = executed.fault;
        let ignored = fault.is_some() && handler.declaration.ignore_failures;
        let (verdict, line) = if ignored {
            let message = match &executed.attempt {
                Attempt::Arbitrary { message } => message.as_str(),
                _ => "",
            };
            let line = format!("{name} failed and is ignored (ignore_failures): {message}");
            (Verdict::Ignored, line)
        } else {
            let decision = decide(
                &name,
                &ADMISSION_POLICY,
                0,
                TimeDelta::zero(),
                executed.attempt.clone(),
            );
            (decision.verdict, decision.line)
        };
        let guest = handler.guest.name();
        if verdict == Verdict::Success {
            tracing::info!(
                guest,
                handler = id,
                object = about.object.unwrap_or("-"),
                "{line}"
            );
        } else {
            tracing::error!(
                guest,
                handler = id,
                object = about.object.unwrap_or("-"),
                "{line}"
            );
            journaled.record_failed(journal, about, &line);
        }
        let ended = Ended {
            elapsed: executed.elapsed,
            verdict,
            fault,
            line: &line,
        };
        journaled.record_finished(journal, about, ended);
        if ignored {
            return Answer::Ignored;
        }
        let attempt = match executed.attempt {
            // A call the sandbox stopped: the refusal says whose it was.
            Attempt::Arbitrary { message } if fault.is_some() => Attempt::Arbitrary {
                message: format!("admission handler {id:?} failed: {message}"),
            },
            attempt => attempt,
        };
        answer_of(handler, attempt, executed.patch, rejected)
    }

    /// A `when` call that trapped, ran past its budget or its memory: ignored when the
    /// handler ignores failures (as its webhook's `failurePolicy: Ignore` says), else a
    /// refusal.
    fn failed(&self, handler: &AdmissionHandler, error: &CallError) -> Answer {
        let guest = handler.guest.name();
        let id = handler.id();
        if handler.declaration.ignore_failures {
            tracing::warn!(
                guest,
                handler = id,
                "admission handler failed, ignored: {error}"
            );
            return Answer::Ignored;
        }
        tracing::error!(guest, handler = id, "admission handler failed: {error}");
        Answer::Refused {
            message: format!("admission handler {id:?} failed: {error}"),
            code: DEFAULT_CODE,
            rank: 9,
        }
    }

    /// What the guest may use during an admission call: the reviewed object is the default
    /// object of its Events and namespace of its Kubernetes calls.
    fn call_context(
        &self,
        handler: &AdmissionHandler,
        review: &Review,
        resource: &Resource,
    ) -> CallContext {
        let context = &self.context;
        let identity = review.identity();
        let services = GuestServices {
            journal: context.journal.clone(),
            indexes: context.indexes.clone(),
            guest: handler.guest.clone(),
            // What names the object is all the services read of it.
            object: Arc::clone(identity),
            poster: None,
            posts_logs: false,
            kube: context.kube.clone(),
            recorder: context.recorder.clone(),
            sleeps: None,
            subhandlers: None,
            settings: SettingsAccess::read_only(&context.settings),
            resource: Some(Arc::new(resource.clone())),
        };
        CallContext::new(
            handler.id().to_owned(),
            object_ref(identity),
            Arc::new(services),
        )
        .in_pool(Pool::Admission)
    }
}

/// The answer an attempt stands for. Only a mutating handler's patch counts: a validating
/// webhook's is never applied.
fn answer_of(
    handler: &AdmissionHandler,
    attempt: Attempt,
    patch: Option<serde_json::Map<String, Value>>,
    rejected: Option<u16>,
) -> Answer {
    let refused = |message: String, rank: u8| Answer::Refused {
        code: if rank == 0 {
            rejected.unwrap_or(DEFAULT_CODE)
        } else {
            DEFAULT_CODE
        },
        message,
        rank,
    };
    match attempt {
        Attempt::Success(_) | Attempt::ChildrenRetry { .. } => {
            Answer::Allowed(patch.filter(|_| handler.is_mutating()))
        }
        Attempt::Permanent { message } if rejected.is_some() => refused(message, 0),
        Attempt::Permanent { message } => refused(message, 1),
        Attempt::Temporary { message, .. } => refused(message, 2),
        Attempt::Arbitrary { message } => refused(message, 9),
    }
}

/// The cause of an admission call (the WIT's `admission` interface says what each field
/// holds).
fn cause(
    handler: &AdmissionHandler,
    review: &Review,
    resource: &Resource,
    memo: Option<String>,
) -> runtime::Cause {
    let now = chrono::Utc::now();
    runtime::Cause {
        handler_id: handler.id().to_owned(),
        kind: HandlerKind::Event,
        resource: runtime::Resource {
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
            kind: resource.kind.clone(),
            namespaced: resource.namespaced,
        },
        event_type: None,
        reason: Some(
            if handler.is_mutating() {
                "mutating"
            } else {
                "validating"
            }
            .to_owned(),
        ),
        body: review.body_text().to_owned(),
        old: review.old_object_text.clone(),
        new: review.object_text.clone(),
        diff: Some(review.diff_text(|old, new| diff(old, new).to_json())),
        retry: 0,
        started: now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
        runtime_seconds: 0.0,
        param: handler.specs.first().and_then(|spec| spec.param.clone()),
        memo,
    }
}

/// `namespace/name` or `name` of an object, for log fields.
fn object_ref(body: &Value) -> Option<String> {
    let meta = body.get("metadata")?;
    let name = meta
        .get("name")
        .or_else(|| meta.get("generateName"))
        .and_then(Value::as_str)?;
    Some(match meta.get("namespace").and_then(Value::as_str) {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_owned(),
    })
}

/// A response that is no review: the server could not read the request, or serves no such
/// path.
fn plain(status: http::StatusCode, message: String) -> http::Response<String> {
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(message)
        .unwrap_or_default()
}
