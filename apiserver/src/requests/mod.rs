//! Resource requests, dispatched by method and subresource to one function per kind of
//! request: get, list and watch (`reads`); create, update, patch (server-side apply
//! included), delete and deletecollection (`writes`), through admission webhooks
//! (`admitted`); the scale subresource (`scale`);
//! ServiceAccount tokens (`token`), access and token reviews (`review`); the control plane's health (`components`); CertificateSigningRequests' approval (`csr`); pods' other subresources
//! (`pods`: binding, eviction, ephemeral containers, log, exec and its kin). The query parameters and
//! bodies they share are read here.

mod admitted;
mod components;
mod csr;
mod pods;
mod reads;
mod review;
mod scale;
mod token;
mod writes;

use crate::field_validation::with_warnings;
use crate::managed::Who;
use crate::objects::{Presented, Scope};
use crate::registry::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::shards::ShardSelector;
use crate::state::Shared;
use crate::status::{ApiError, json_response};
use crate::table::View;
use axum::response::Response;
use http::Method;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A parsed resource path.
#[derive(Debug)]
pub(crate) struct ResPath {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) ns: Option<String>,
    pub(crate) plural: String,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
    /// The legacy `/watch/` path prefix.
    pub(crate) watch: bool,
}

/// 404 for a path that names nothing served.
fn not_served(group: &str, version: &str, plural: &str) -> ApiError {
    ApiError::no_route(&format!("{group}/{version}/{plural}"))
}

impl ResPath {
    /// 404 for a path that names nothing served.
    fn not_served(&self) -> ApiError {
        not_served(&self.group, &self.version, &self.plural)
    }

    /// Whether this is the SelfSubjectAccessReview collection, which is not stored.
    fn is_self_subject_access_review(&self) -> bool {
        (
            self.group.as_str(),
            self.version.as_str(),
            self.plural.as_str(),
        ) == ("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
            && self.ns.is_none()
            && self.name.is_none()
    }

    /// Whether this is the TokenReview collection, which is not stored.
    fn is_token_review(&self) -> bool {
        (
            self.group.as_str(),
            self.version.as_str(),
            self.plural.as_str(),
        ) == ("authentication.k8s.io", "v1", "tokenreviews")
            && self.ns.is_none()
            && self.name.is_none()
    }

    /// Whether this is the SelfSubjectReview collection (`kubectl auth whoami`), which is
    /// not stored.
    pub(crate) fn is_self_subject_review(&self) -> bool {
        (
            self.group.as_str(),
            self.version.as_str(),
            self.plural.as_str(),
        ) == ("authentication.k8s.io", "v1", "selfsubjectreviews")
            && self.ns.is_none()
            && self.name.is_none()
    }
}

/// Go's strconv.ParseBool, which kube uses for boolean query parameters.
fn parse_bool(q: &HashMap<String, String>, k: &str) -> Result<Option<bool>, ApiError> {
    match q.get(k).map(String::as_str) {
        None | Some("") => Ok(None),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid boolean value for {k}: {other:?}"
        ))),
    }
}

/// The selectors of a list, watch or deletecollection: `labelSelector`, `fieldSelector`,
/// and `shardSelector` unless the server is without sharded lists and watches (as
/// kube-apiserver without the `ShardedListAndWatch` feature gate ignores it).
fn selectors(call: &Call<'_>) -> Result<Selectors, ApiError> {
    let q = call.query;
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map_or("", String::as_str),
        &call.scope.rt.plural,
    )
    .map_err(ApiError::bad_request)?;
    let shard = match q.get("shardSelector").filter(|s| !s.is_empty()) {
        Some(text) if call.shared.sharded_list_and_watch => Some(
            ShardSelector::parse(text)
                .map_err(|e| ApiError::bad_request(format!("invalid shard selector: {e}")))?,
        ),
        _ => None,
    };
    Ok(Selectors {
        labels,
        fields,
        shard,
    })
}

/// Parses a create/update body by its media type, as kube-apiserver's negotiation: JSON
/// (also when none is given), YAML, protobuf; any other is 415.
fn parse_object(ct: &str, body: &[u8]) -> Result<Value, ApiError> {
    let media = ct.split(';').next().unwrap_or_default().trim();
    let yaml = media.eq_ignore_ascii_case("application/yaml");
    if media.eq_ignore_ascii_case("application/vnd.kubernetes.protobuf") {
        return crate::protobuf::decode(body);
    }
    if !media.is_empty() && !yaml && !media.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ));
    }
    let v: Value = if yaml {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    Ok(v)
}

/// The body, for the duplicate-field check, when it is JSON (YAML and protobuf
/// bodies are not searched for duplicates).
fn json_body<'a>(ct: &str, body: &'a [u8]) -> Option<&'a [u8]> {
    (!ct.contains("yaml") && !ct.contains("protobuf") && !ct.contains("cbor")).then_some(body)
}

/// `dryRun`, refused as kube validates the options of the write (`CreateOptions` of a
/// POST, ...): 422 naming the values (Go's %q of the list).
fn dry_run(method: &Method, q: &HashMap<String, String>) -> Result<bool, ApiError> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => {
            let options = match *method {
                Method::POST => "CreateOptions",
                Method::PUT => "UpdateOptions",
                Method::PATCH => "PatchOptions",
                Method::DELETE => "DeleteOptions",
                _ => "ListOptions",
            };
            Err(ApiError::invalid_options(
                options,
                "dryRun",
                &format!("Unsupported value: [{other:?}]: supported values: \"All\""),
            ))
        }
    }
}

/// A request for a resource, as the router parsed it.
pub(crate) struct ResourceRequest<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: ResPath,
    pub(crate) query: &'a HashMap<String, String>,
    /// `?watch=true` (or `1`).
    pub(crate) watch: bool,
    pub(crate) content_type: &'a str,
    pub(crate) body: &'a [u8],
    /// How the client wants objects: whole, as a table, or metadata only.
    pub(crate) view: View,
    /// The `User-Agent`, whose prefix names a field manager that gave none.
    pub(crate) user_agent: &'a str,
    /// The user, when RBAC is checked.
    pub(crate) user: Option<Arc<crate::auth::User>>,
}

/// The answer to a write: the object written (shared with the store, not copied) as the
/// resource serves it, or only its metadata to a client that asks for
/// `PartialObjectMetadata` (kube-rs's `patch_metadata`), with field validation's warnings.
fn answer_written(call: &Call<'_>, code: u16, obj: &Value, warnings: &[String]) -> Response {
    let answer = if call.view == View::Meta {
        json_response(code, &crate::table::partial(obj))
    } else {
        json_response(code, &Presented::new(&call.scope.rt, obj))
    };
    with_warnings(answer, warnings)
}

/// The part of a resource a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subresource {
    /// The object itself.
    Main,
    /// `/status`, for types with a status subresource: only `status` changes.
    Status,
    /// `/scale`: the object as an `autoscaling/v1` Scale.
    Scale,
    /// `/token` of a ServiceAccount: a TokenRequest.
    Token,
    /// `/approval` of a CertificateSigningRequest: only `status.conditions` changes.
    Approval,
    /// The other subresources of a pod (`binding`, `eviction`, `log`, …).
    Pod(pods::PodSub),
}

impl Subresource {
    /// The subresource the path names, if the type has it.
    fn of(path: &ResPath, rt: &ResourceType) -> Option<Self> {
        match path.sub.as_deref() {
            None => Some(Subresource::Main),
            Some("scale") => Some(Subresource::Scale),
            Some("status") if rt.has_status => Some(Subresource::Status),
            Some("token") if rt.group.is_empty() && rt.plural == "serviceaccounts" => {
                Some(Subresource::Token)
            }
            Some("approval")
                if rt.group == "certificates.k8s.io"
                    && rt.plural == "certificatesigningrequests" =>
            {
                Some(Subresource::Approval)
            }
            Some(sub) if rt.group.is_empty() && rt.plural == "pods" => {
                pods::PodSub::of(sub).map(Subresource::Pod)
            }
            Some(_) => None,
        }
    }

    /// The subresource as managed fields record a write's.
    fn recorded(self) -> Option<&'static str> {
        match self {
            Subresource::Status => Some("status"),
            Subresource::Scale => Some("scale"),
            Subresource::Approval => Some("approval"),
            Subresource::Main | Subresource::Token | Subresource::Pod(_) => None,
        }
    }
}

/// A request for a served type, as every kind of request reads it.
struct Call<'a> {
    shared: &'a Arc<Shared>,
    method: &'a Method,
    scope: Scope,
    query: &'a HashMap<String, String>,
    content_type: &'a str,
    body: &'a [u8],
    /// How the client wants objects: whole, as a table, or metadata only.
    view: View,
    subresource: Subresource,
    /// `dryRun=All`.
    dry: bool,
    /// The field manager and user the write is recorded for.
    who: Who,
}

impl<'a> Call<'a> {
    fn new(
        shared: &'a Arc<Shared>,
        request: ResourceRequest<'a>,
        rt: ResourceType,
        subresource: Subresource,
    ) -> Result<Self, ApiError> {
        let query = request.query;
        let dry = dry_run(request.method, query)?;
        let who = Who {
            manager: Who::from_request(
                query.get("fieldManager").map(String::as_str),
                request.user_agent,
            ),
            subresource: subresource.recorded(),
            user: request.user,
        };
        Ok(Call {
            shared,
            method: request.method,
            scope: Scope {
                rt,
                ns: request.path.ns,
            },
            query,
            content_type: request.content_type,
            body: request.body,
            view: request.view,
            subresource,
            dry,
            who,
        })
    }

    /// 404 for a path of the type that names nothing served.
    fn not_served(&self) -> ApiError {
        let rt = &self.scope.rt;
        not_served(&rt.group, &rt.version, &rt.plural)
    }

    /// Whether the request is for the status subresource.
    fn status_only(&self) -> bool {
        self.subresource == Subresource::Status
    }
}

/// Serves a request for a resource: the table of method, subresource, name and watch to
/// the kind of request.
pub(crate) async fn resource_request(
    shared: &Arc<Shared>,
    request: ResourceRequest<'_>,
) -> Result<Response, ApiError> {
    if request.path.is_self_subject_access_review() {
        return self_subject_access_review(shared, &request);
    }
    if request.path.is_self_subject_review() {
        return self_subject_review(&request);
    }
    if request.path.is_token_review() {
        return token_review(shared, &request);
    }
    let rt = served_type(shared, &request.path)?;
    let subresource =
        Subresource::of(&request.path, &rt).ok_or_else(|| request.path.not_served())?;
    if subresource == Subresource::Token {
        return service_account_token(shared, &request);
    }
    let method = request.method.clone();
    let name = request.path.name.clone();
    let watch = request.path.watch || request.watch;
    let call = Call::new(shared, request, rt, subresource)?;
    use Subresource::{Approval, Main, Pod, Scale};
    if (call.scope.rt.group.as_str(), call.scope.rt.plural.as_str()) == ("", "componentstatuses") {
        return components::serve(&call, &method, name.as_deref(), watch);
    }
    match (method, subresource, name.as_deref(), watch) {
        (_, Scale, name, _) => scale::scale(&call, name).await,
        (method, Approval, Some(name), false) => csr::approval(&call, &method, name),
        (_, Pod(sub), Some(name), _) => pods::serve(&call, sub, name).await,
        (Method::GET, _, None, true) => reads::watch(call),
        (Method::GET, _, None, false) => reads::list(&call),
        (Method::GET, _, Some(name), true) => reads::watch_one(call, name),
        (Method::GET, _, Some(name), false) => reads::get(&call, name),
        (Method::POST, Main, None, _) => writes::create(&call).await,
        (Method::PUT, _, Some(name), _) => writes::update(&call, name).await,
        (Method::PATCH, _, Some(name), _) => writes::patch(&call, name).await,
        (Method::DELETE, Main, Some(name), _) => writes::delete(&call, name).await,
        (Method::DELETE, _, None, _) => writes::delete_collection(&call).await,
        (method, ..) => Err(ApiError::method_not_allowed(&format!(
            "{method} on this resource"
        ))),
    }
}

/// The type the path names, if it is served there (a namespace only for a namespaced
/// type; a name of a namespaced type only within a namespace).
fn served_type(shared: &Shared, path: &ResPath) -> Result<ResourceType, ApiError> {
    let rt = shared
        .lock()
        .registry
        .find(&path.group, &path.version, &path.plural)
        .cloned()
        .ok_or_else(|| path.not_served())?;
    if !rt.namespaced && path.ns.is_some()
        || rt.namespaced && path.ns.is_none() && path.name.is_some()
    {
        return Err(path.not_served());
    }
    Ok(rt)
}

/// POST of a SelfSubjectAccessReview.
fn self_subject_access_review(
    shared: &Shared,
    request: &ResourceRequest<'_>,
) -> Result<Response, ApiError> {
    if *request.method != Method::POST {
        return Err(ApiError::method_not_allowed(&format!(
            "{} on this resource",
            request.method
        )));
    }
    review::self_subject_access_review(
        shared,
        request.user.as_deref(),
        &parse_object(request.content_type, request.body)?,
    )
}

/// POST of a SelfSubjectReview: who the request's credentials name (the server
/// authenticates it also with RBAC off).
fn self_subject_review(request: &ResourceRequest<'_>) -> Result<Response, ApiError> {
    if *request.method != Method::POST {
        return Err(ApiError::method_not_allowed(&format!(
            "{} on this resource",
            request.method
        )));
    }
    let user = request
        .user
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("no user present on request"))?;
    review::self_subject_review(user, &parse_object(request.content_type, request.body)?)
}

/// POST of a TokenReview.
fn token_review(shared: &Shared, request: &ResourceRequest<'_>) -> Result<Response, ApiError> {
    if *request.method != Method::POST {
        return Err(ApiError::method_not_allowed(&format!(
            "{} on this resource",
            request.method
        )));
    }
    review::token_review(shared, &parse_object(request.content_type, request.body)?)
}

/// POST of a TokenRequest to a ServiceAccount's `token` subresource.
fn service_account_token(
    shared: &Shared,
    request: &ResourceRequest<'_>,
) -> Result<Response, ApiError> {
    let (Some(ns), Some(name)) = (&request.path.ns, &request.path.name) else {
        return Err(request.path.not_served());
    };
    if *request.method != Method::POST {
        return Err(ApiError::method_not_allowed(&format!(
            "{} on this resource",
            request.method
        )));
    }
    token::create(
        shared,
        ns,
        name,
        &parse_object(request.content_type, request.body)?,
    )
}
