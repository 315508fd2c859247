//! Fault injection for tests: never active unless a test asks for it.

use crate::status::{ApiError, Target};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A failure to answer matching requests with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// 410 Gone with reason `Expired` (as for a compacted resourceVersion).
    Gone,
    /// 429 with a `Retry-After` header and `details.retryAfterSeconds`.
    TooManyRequests {
        /// Seconds the client is asked to wait.
        retry_after_secs: u32,
    },
    /// 500 InternalError.
    InternalError,
    /// 503 ServiceUnavailable, as while kube-apiserver (or an aggregated API) cannot
    /// serve: what kube's own retry layer retries.
    ServiceUnavailable,
    /// 409 Conflict, as when a write lost a race with another writer ("the object has
    /// been modified").
    Conflict,
    /// 422 Invalid, as for a JSON patch whose `test` operation failed.
    Invalid,
    /// No failure: the request is answered as usual, only this much later (a slow or
    /// overloaded server; a watch starts this much later).
    Slow(Duration),
}

/// What an injected fault does to one request.
#[derive(Debug)]
pub(crate) enum Injected {
    /// Answers with this error instead.
    Error(ApiError),
    /// Answers as usual, this much later.
    Delay(Duration),
}

impl Fault {
    fn injected(&self, req: &RequestInfo<'_>) -> Injected {
        let target = Target {
            group: req.group.unwrap_or_default(),
            plural: req.plural.unwrap_or_default(),
            name: req.name.unwrap_or_default(),
        };
        Injected::Error(match self {
            Fault::Slow(delay) => return Injected::Delay(*delay),
            Fault::Gone => ApiError::gone("injected fault: the resource version is too old"),
            Fault::TooManyRequests { retry_after_secs } => {
                ApiError::too_many_requests(*retry_after_secs)
            }
            Fault::InternalError => ApiError::internal("injected fault: internal error"),
            Fault::ServiceUnavailable => ApiError::service_unavailable(
                "injected fault: the server is currently unable to handle the request",
            ),
            Fault::Conflict => ApiError::conflict(target),
            Fault::Invalid => ApiError::invalid(
                target,
                target.plural,
                &[(
                    "metadata.resourceVersion".to_owned(),
                    "injected fault: the request was rejected as invalid".to_owned(),
                )],
            ),
        })
    }
}

/// Which requests a fault applies to: every field left `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestMatcher {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: Option<String>,
    /// The resource's plural, e.g. `pods`.
    pub plural: Option<String>,
    /// The API group ("" for core).
    pub group: Option<String>,
    /// The subresource (`status`, `scale`, ...), "" for the object itself.
    pub subresource: Option<String>,
}

impl RequestMatcher {
    /// Matches every request, discovery included.
    pub fn any() -> Self {
        RequestMatcher::default()
    }

    /// Only requests with this verb.
    #[must_use]
    pub fn verb(mut self, verb: impl Into<String>) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// Only requests for this resource (plural).
    #[must_use]
    pub fn plural(mut self, plural: impl Into<String>) -> Self {
        self.plural = Some(plural.into());
        self
    }

    /// Only requests in this API group ("" for core).
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Only requests for this subresource (`status`), or with "" only requests for
    /// objects themselves (a patch of the object, not of its `/status`).
    #[must_use]
    pub fn subresource(mut self, subresource: impl Into<String>) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    fn matches(&self, req: &RequestInfo<'_>) -> bool {
        self.verb.as_deref().is_none_or(|v| v == req.verb)
            && self.plural.as_deref().is_none_or(|p| Some(p) == req.plural)
            && self.group.as_deref().is_none_or(|g| Some(g) == req.group)
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == req.subresource.unwrap_or_default())
    }
}

/// What the fault table needs to know about a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestInfo<'a> {
    pub(crate) verb: &'a str,
    pub(crate) plural: Option<&'a str>,
    pub(crate) group: Option<&'a str>,
    /// The object's name, for requests about one object.
    pub(crate) name: Option<&'a str>,
    /// The subresource, if the request is for one.
    pub(crate) subresource: Option<&'a str>,
}

#[derive(Debug, Default)]
struct Table {
    rules: Vec<(usize, RequestMatcher, Fault)>,
    delay: Option<Duration>,
}

/// The server side of fault injection.
#[derive(Debug, Default)]
pub(crate) struct FaultTable(Mutex<Table>);

impl FaultTable {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic elsewhere cannot leave the table inconsistent: each change is one push/set.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn delay(&self) -> Option<Duration> {
        self.table().delay
    }

    /// Answers the next `n` requests that `matcher` matches with `fault`.
    pub(crate) fn push(&self, n: usize, matcher: RequestMatcher, fault: Fault) {
        self.table().rules.push((n, matcher, fault));
    }

    /// Forgets the rules not served yet.
    pub(crate) fn clear(&self) {
        self.table().rules.clear();
    }

    /// How many injected failures still wait for a matching request.
    pub(crate) fn unserved(&self) -> usize {
        self.table().rules.iter().map(|(n, _, _)| n).sum()
    }

    /// Delays every response by `d` (None switches the delay off).
    pub(crate) fn set_delay(&self, d: Option<Duration>) {
        self.table().delay = d;
    }

    /// The fault for this request, consuming one of its uses.
    pub(crate) fn take(&self, req: &RequestInfo<'_>) -> Option<Injected> {
        let mut t = self.table();
        let i = t
            .rules
            .iter()
            .position(|(n, m, _)| *n > 0 && m.matches(req))?;
        let (n, _, f) = &mut t.rules[i];
        *n -= 1;
        let injected = f.injected(req);
        t.rules.retain(|(n, _, _)| *n > 0);
        Some(injected)
    }
}
