//! HTTP: parses kube's URL scheme and query parameters, applies faults, authenticates and
//! authorizes (with RBAC on), and dispatches to discovery, object handlers and watches.

use crate::auth::User;
use crate::counts::RequestKind;
use crate::faults::{Injected, RequestInfo};
use crate::requests::ResPath;
use crate::state::Shared;
use crate::status::{ApiError, json_response};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{Method, header};
use std::collections::HashMap;
use std::sync::Arc;

/// Kube's default request body limit (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The router: one handler, since kube's paths are easier parsed by hand than routed.
pub(crate) fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

/// A parsed request path.
#[derive(Debug)]
enum Route {
    Root,
    Version,
    Health,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiV2,
    OpenApiV3,
    OpenApiV3Gv(String, String),
    Resource(ResPath),
    NotFound,
}

fn parse_path(path: &str) -> Route {
    let segs: Vec<&str> = path
        .trim_start_matches('/')
        .trim_end_matches('/')
        .split('/')
        .collect();
    if segs.iter().skip(1).any(|s| s.is_empty()) {
        return Route::NotFound;
    }
    match segs.as_slice() {
        [""] => Route::Root,
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::Api,
        ["api", "v1"] => Route::GroupVersion(String::new(), "v1".into()),
        ["api", "v1", rest @ ..] => resource("", "v1", rest),
        ["apis"] => Route::Apis,
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v] => Route::GroupVersion(g.to_string(), v.to_string()),
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3,
        ["openapi", "v3", "api", "v1"] => Route::OpenApiV3Gv(String::new(), "v1".into()),
        ["openapi", "v3", "apis", g, v] => Route::OpenApiV3Gv(g.to_string(), v.to_string()),
        _ => Route::NotFound,
    }
}

fn resource(group: &str, version: &str, mut rest: &[&str]) -> Route {
    let mut watch = false;
    if rest.first() == Some(&"watch") {
        watch = true;
        rest = &rest[1..];
    }
    let s = |i: usize| rest.get(i).map(|x| x.to_string());
    let namespaced_path = rest.first() == Some(&"namespaces")
        && rest.len() >= 3
        && !(rest.len() == 3 && matches!(rest[2], "status" | "finalize"));
    let (ns, plural, name, sub, max) = if namespaced_path {
        (s(1), s(2), s(3), s(4), 5)
    } else {
        (None, s(0), s(1), s(2), 3)
    };
    match plural {
        Some(plural) if rest.len() <= max => Route::Resource(ResPath {
            group: group.into(),
            version: version.into(),
            ns,
            plural,
            name,
            sub,
            watch,
        }),
        _ => Route::NotFound,
    }
}

fn verb_of(method: &Method, p: &ResPath, watch: bool) -> &'static str {
    match (method, p.name.is_some()) {
        (&Method::GET, false) if watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::GET, true) if watch => "watch",
        (&Method::GET, true) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, false) => "deletecollection",
        (&Method::DELETE, true) => "delete",
        _ => "unknown",
    }
}

/// Serves `GET /metrics` (the request counts), and counts every other request by its
/// answer.
async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    if req.uri().path() == "/metrics" && req.method() == Method::GET {
        let text = shared.counts.prometheus();
        return ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response();
    }
    let kind = request_kind(&req);
    let response = respond(&shared, req).await;
    shared.counts.record(RequestKind {
        code: response.status().as_u16(),
        ..kind
    });
    response
}

/// What a request is about, as counted (the code is the answer's, set later).
fn request_kind(req: &Request) -> RequestKind {
    let user_agent = req.headers().get(header::USER_AGENT);
    let client = crate::counts::client_of(user_agent.and_then(|v| v.to_str().ok()).unwrap_or(""));
    let watch = req.uri().query().is_some_and(|q| {
        q.split('&').any(|p| {
            matches!(
                p,
                "watch=1" | "watch=true" | "watch=True" | "watch=t" | "watch=T" | "watch=TRUE"
            )
        })
    });
    match parse_path(req.uri().path()) {
        Route::Resource(p) => RequestKind {
            client,
            verb: verb_of(req.method(), &p, p.watch || watch).to_owned(),
            group: p.group,
            resource: p.plural,
            subresource: p.sub.unwrap_or_default(),
            code: 0,
        },
        _ => RequestKind {
            client,
            verb: req.method().as_str().to_lowercase(),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            code: 0,
        },
    }
}

async fn respond(shared: &Arc<Shared>, req: Request) -> Response {
    answer(shared, req)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// The answer to a request, in steps: its query, the faults injected, who it is (with RBAC
/// on), its body, then the request itself; a write is answered only once it is durable.
async fn answer(shared: &Arc<Shared>, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let query = parse_query(&parts.uri)?;
    let route = parse_path(parts.uri.path());
    let watch_param = matches!(
        query.get("watch").map(String::as_str),
        Some("1" | "true" | "True" | "t" | "T" | "TRUE")
    );
    inject_faults(shared, &request_info(&route, &parts.method, watch_param)).await?;
    let user = if shared.rbac {
        Some(Arc::new(authorize(shared, &parts, &query)?))
    } else if matches!(&route, Route::Resource(path) if path.is_self_subject_review()) {
        // Without RBAC nothing else is authenticated; who the caller is, it is asked.
        Some(Arc::new(authenticate(shared, &parts)?))
    } else {
        None
    };
    let body = read_body(body).await?;
    let ct = header_text(&parts.headers, header::CONTENT_TYPE);
    let accept = header_text(&parts.headers, header::ACCEPT);
    let view = crate::table::view(accept);
    let result = match route {
        Route::Resource(path) => {
            crate::requests::resource_request(
                shared,
                crate::requests::ResourceRequest {
                    method: &parts.method,
                    path,
                    query: &query,
                    watch: watch_param,
                    content_type: ct,
                    body: &body,
                    view,
                    user_agent: header_text(&parts.headers, header::USER_AGENT),
                    user,
                },
            )
            .await
        }
        _ if parts.method != Method::GET && parts.method != Method::HEAD => Err(
            ApiError::method_not_allowed(&format!("{} on {}", parts.method, parts.uri.path())),
        ),
        other => discovery_request(
            shared,
            other,
            parts.uri.path(),
            accept,
            header_text(&parts.headers, header::IF_NONE_MATCH),
        ),
    };
    let writes = !matches!(parts.method, Method::GET | Method::HEAD);
    if writes && let Some(why) = shared.lock().journal_error() {
        // The change may not be durable: it must not be acknowledged.
        return Err(ApiError::internal(why.to_string()));
    }
    result
}

/// The query parameters (the last of a repeated one wins).
fn parse_query(uri: &http::Uri) -> Result<HashMap<String, String>, ApiError> {
    match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri) {
        Ok(q) => Ok(q.0.into_iter().collect()),
        Err(e) => Err(ApiError::bad_request(format!("invalid query string: {e}"))),
    }
}

/// What faults are matched against.
fn request_info<'a>(route: &'a Route, method: &Method, watch_param: bool) -> RequestInfo<'a> {
    match route {
        Route::Resource(p) => RequestInfo {
            verb: verb_of(method, p, p.watch || watch_param),
            plural: Some(p.plural.as_str()),
            group: Some(p.group.as_str()),
            name: p.name.as_deref(),
            subresource: p.sub.as_deref(),
        },
        _ => RequestInfo {
            verb: "get",
            plural: None,
            group: None,
            name: None,
            subresource: None,
        },
    }
}

/// The configured faults: a delay, then an error instead of the answer, or a later one.
async fn inject_faults(shared: &Shared, info: &RequestInfo<'_>) -> Result<(), ApiError> {
    if let Some(d) = shared.faults.delay() {
        tokio::time::sleep(d).await;
    }
    match shared.faults.take(info) {
        Some(Injected::Error(err)) => Err(err),
        Some(Injected::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            Ok(())
        }
        None => Ok(()),
    }
}

/// The request's body, up to kube's limit.
async fn read_body(body: axum::body::Body) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            "the request body is too large or could not be read",
        )
    })
}

/// A header's value as text ("" when absent or not text).
fn header_text(headers: &http::HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Who a request is (its client certificate or bearer token, then the user it
/// impersonates): 401 for a bearer token that is not valid (kube's Status,
/// "Unauthorized"), 403 for an impersonation not allowed.
fn authenticate(shared: &Shared, parts: &http::request::Parts) -> Result<User, ApiError> {
    let store = shared.lock();
    let header = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let certificate = parts
        .extensions
        .get::<axum::extract::ConnectInfo<crate::tls::Peer>>()
        .and_then(|peer| peer.0.certificate.as_deref());
    let user = shared
        .auth
        .authenticate(&store, header, certificate)
        .map_err(|why| {
            tracing::debug!(reason = %why, "a bearer token was refused");
            ApiError::new(401, "Unauthorized", "Unauthorized")
        })?;
    crate::rbac::acting_user(&store, user, &parts.headers)
}

/// Who a request is, and whether it may do what it asks: 401 for a bearer token that is not
/// valid (kube's Status, "Unauthorized"), 403 with kube's wording for what RBAC does not
/// allow. A watch is authorized as a whole, as kube does: what it streams is what its
/// (namespace, name) scope allows.
fn authorize(
    shared: &Shared,
    parts: &http::request::Parts,
    query: &HashMap<String, String>,
) -> Result<User, ApiError> {
    let user = authenticate(shared, parts)?;
    let store = shared.lock();
    let attributes = crate::rbac::attributes(&parts.method, parts.uri.path(), query);
    crate::rbac::authorize(&store, &user, &attributes)
        .map_err(|reason| crate::rbac::forbidden(&user, &attributes, &reason))?;
    Ok(user)
}

/// What the OpenAPI v2 document is served as: JSON, or gnostic's protobuf (the only form
/// client-go asks for), under both names kube-openapi answers to.
const OPENAPI_V2_TYPES: &[&str] = &[
    "application/json",
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The other discovery documents and OpenAPI v3 are served as JSON only; a client asking
/// for another form only (protobuf) gets 406 and falls back, as from a server without
/// that form.
const JSON_ONLY: &[&str] = &["application/json"];

/// `/api` and `/apis`: plain JSON first, so that only a client naming the aggregated form
/// gets it (as from kube-apiserver).
const GROUP_LISTS: &[&str] = &["application/json", crate::discovery::AGGREGATED];

fn discovery_request(
    shared: &Shared,
    route: Route,
    path: &str,
    accept: &str,
    if_none_match: &str,
) -> Result<Response, ApiError> {
    let offers = match route {
        Route::Health | Route::NotFound | Route::Resource(_) => None,
        Route::OpenApiV2 => Some(OPENAPI_V2_TYPES),
        Route::Api | Route::Apis => Some(GROUP_LISTS),
        _ => Some(JSON_ONLY),
    };
    let media = offers
        .map(|o| crate::negotiate::negotiate(accept, o))
        .transpose()?;
    let store = shared.lock();
    let reg = &store.registry;
    if media == Some(crate::discovery::AGGREGATED) {
        let doc = crate::discovery::aggregated(reg, matches!(route, Route::Api), &|t| {
            crate::scale::paths(&store, t).is_some()
        });
        return Ok(crate::discovery::aggregated_response(&doc, if_none_match));
    }
    let found = match route {
        Route::Root => Some(crate::discovery::root_paths(reg)),
        Route::Version => Some(crate::discovery::version()),
        Route::Health => {
            return Ok(
                ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response(),
            );
        }
        Route::Api => Some(crate::discovery::api_versions(shared.addr)),
        Route::Apis => Some(crate::discovery::group_list(reg)),
        Route::Group(g) => crate::discovery::group(reg, &g),
        Route::GroupVersion(g, v) => crate::discovery::resource_list(reg, &g, &v, &|t| {
            crate::scale::paths(&store, t).is_some()
        }),
        Route::OpenApiV2 => Some(crate::openapi::v2(reg.all())),
        Route::OpenApiV3 => Some(crate::openapi::v3_index(reg.all())),
        Route::OpenApiV3Gv(g, v) => crate::openapi::v3_group_version(reg.all(), &g, &v),
        Route::Resource(_) | Route::NotFound => None,
    };
    let doc = found.ok_or_else(|| ApiError::no_route(path))?;
    match media {
        // Both names are answered with the dotted one: Go's media type parser (client-go
        // reads the response's Content-Type) refuses the `@` of the other.
        Some(ty) if ty.contains("protobuf") => Ok((
            [(
                header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            crate::openapi::v2_protobuf(&doc),
        )
            .into_response()),
        _ => Ok(json_response(200, &doc)),
    }
}
