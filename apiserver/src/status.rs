//! `metav1.Status` errors: every failure the server answers is one of these.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// A failed request, rendered as a `metav1.Status` with kube-apiserver's code and reason.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    /// `details` (name, group, kind, causes, retryAfterSeconds), when kube sends them.
    pub(crate) details: Option<Box<Value>>,
    /// Seconds for the `Retry-After` header (429).
    pub(crate) retry_after: Option<u32>,
}

/// Names the object an error is about, for `details` and for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) group: &'a str,
    /// The resource (plural) — kube puts the plural in `details.kind`.
    pub(crate) plural: &'a str,
    pub(crate) name: &'a str,
}

impl Target<'_> {
    /// `pods` or `deployments.apps`, as kube's messages spell a group-resource.
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// kube's `details`: an empty name left out (omitempty), as of a create without one.
    fn details(&self) -> Value {
        let mut d = if self.name.is_empty() {
            json!({"kind": self.plural})
        } else {
            json!({"name": self.name, "kind": self.plural})
        };
        if !self.group.is_empty() {
            d["group"] = json!(self.group);
        }
        d
    }
}

/// A field error's cause type, as kube's `field.Error` gives it: its message starts with
/// the type's words ("Required value", "Forbidden: ...").
fn cause_type(message: &str) -> &'static str {
    const TYPES: [(&str, &str); 8] = [
        ("Required value", "FieldValueRequired"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
        ("Internal error", "InternalError"),
    ];
    TYPES
        .iter()
        .find(|(words, _)| message.starts_with(words))
        .map_or("FieldValueInvalid", |(_, ty)| ty)
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn not_found(t: Target<'_>) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", t.qualified(), t.name),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    /// 404 for a path that names no served resource (kube answers a bare "404 page not found"
    /// for unknown groups, but a Status for unknown resources; a Status everywhere is what
    /// clients handle best).
    pub(crate) fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub(crate) fn already_exists(t: Target<'_>) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", t.qualified(), t.name),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    pub(crate) fn conflict(t: Target<'_>) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                t.qualified(),
                t.name
            ),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    /// 422 Invalid with one cause per problem, as kube's field validation reports them.
    pub(crate) fn invalid(t: Target<'_>, kind: &str, causes: &[(String, String)]) -> Self {
        let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} \"{}\" is invalid: {}", kind, t.name, text.join(", ")),
        );
        let mut d = t.details();
        d["kind"] = json!(kind);
        d["causes"] = causes
            .iter()
            .map(|(f, m)| json!({"reason": cause_type(m), "message": m, "field": f}))
            .collect();
        e.details = Some(Box::new(d));
        e
    }

    /// 422 Invalid of a request's options (`ListOptions`, `PatchOptions`, ... of
    /// meta.k8s.io): one cause, its type from its message.
    pub(crate) fn invalid_options(kind: &str, field: &str, message: &str) -> Self {
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {message}"),
        );
        let cause = json!({"reason": cause_type(message), "message": message, "field": field});
        e.details = Some(Box::new(
            json!({"group": "meta.k8s.io", "kind": kind, "causes": [cause]}),
        ));
        e
    }

    pub(crate) fn method_not_allowed(what: &str) -> Self {
        Self::new(405, "MethodNotAllowed", format!("{what} is not supported"))
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn forbidden(t: Target<'_>, message: &str) -> Self {
        let mut e = Self::new(
            403,
            "Forbidden",
            format!("{} \"{}\" is forbidden: {message}", t.qualified(), t.name),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    pub(crate) fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
            ),
        )
    }

    pub(crate) fn too_many_requests(retry_after: u32) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        );
        e.details = Some(Box::new(json!({"retryAfterSeconds": retry_after})));
        e.retry_after = Some(retry_after);
        e
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 503, as kube-apiserver answers while it (or an aggregated API) cannot serve.
    pub(crate) fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `metav1.Status` object (also used inside watch ERROR events).
    pub(crate) fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // kube's `reason` is omitted when empty (a webhook's refusal may give none).
            if let Some(m) = s.as_object_mut() {
                m.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            // kube orders `details` before `code`; clients don't care, but keep it near.
            s["details"] = (**d).clone();
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, json_body(&self.to_status())).into_response();
        set_json(&mut resp);
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// Serialises a JSON value; serialising a `Value` cannot fail, the fallback is for form.
pub(crate) fn json_body(v: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec())
}

pub(crate) fn set_json(resp: &mut Response) {
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
}

/// A successful JSON answer with the given code.
pub(crate) fn json_response(code: u16, v: &impl serde::Serialize) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let mut resp = (code, json_body(v)).into_response();
    set_json(&mut resp);
    resp
}
