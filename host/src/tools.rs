//! What the `kapsel` command's developer tools ask of the library: the handlers a guest
//! declares (`kapsel inspect`), the RBAC an operator of guests needs (`kapsel rbac`,
//! [`RbacRequest`]), and one handler called as the operator calls it, to measure what a
//! call costs (`make bench`, [`HandlerCall`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Error;
use crate::cluster::Scope;
use crate::handlers::execution::{self, Attempt};
use crate::limits::Limits;
use crate::runtime::{self, CallContext, Cause, Guest, NoServices, Resource, Runtime};

/// The handlers a guest declares, as JSON (what `kapsel inspect` prints).
///
/// # Errors
/// [`Error::NoGuests`] with the reason the guest cannot be loaded, naming the file;
/// [`Error::Runtime`] when the WebAssembly engine cannot start.
pub async fn inspect(guest: &Path) -> Result<serde_json::Value, Error> {
    let runtime = Runtime::new(Limits::default()).map_err(|e| Error::Runtime(Box::new(e)))?;
    let guest = runtime
        .load(guest)
        .await
        .map_err(|e| Error::NoGuests(vec![e.to_string()]))?;
    let mut rendered = runtime::describe_json(
        guest.describe(),
        guest.spawning(),
        guest.logins(),
        (guest.everything(), guest.chosen()),
    );
    runtime::add_admissions_json(&mut rendered, guest.admissions());
    Ok(rendered)
}

/// One handler of a guest, called as the operator calls it: the cause handed over, a
/// fresh sandboxed instance per call within the default limits, the reply read back
/// (its patch and result parsed by the host's own code). For measuring what a call
/// costs (`make bench`'s invocation figures); the guest gets no host services (its
/// Kubernetes calls and index reads are refused).
pub struct HandlerCall {
    guest: Guest,
    cause: Cause,
    // The engine the guest was compiled by, kept with it.
    _runtime: Runtime,
}

impl HandlerCall {
    /// `handler` of the guest at `path`, called with `body` (an object's JSON) as for
    /// the object's creation, whatever the handler's kind.
    ///
    /// # Errors
    /// [`Error::NoGuests`] when the guest cannot be loaded, declares no such handler, or
    /// the body is not a JSON object; [`Error::Runtime`] when the engine cannot start.
    pub async fn load(path: &Path, handler: &str, body: &str) -> Result<HandlerCall, Error> {
        let refused =
            |reason: String| Error::NoGuests(vec![format!("{}: {reason}", path.display())]);
        let object: serde_json::Value = serde_json::from_str(body)
            .map_err(|e| refused(format!("the body is not JSON: {e}")))?;
        let runtime = Runtime::new(Limits::default()).map_err(|e| Error::Runtime(Box::new(e)))?;
        let guest = runtime
            .load(path)
            .await
            .map_err(|e| Error::NoGuests(vec![e.to_string()]))?;
        let registration = guest
            .describe()
            .handlers
            .iter()
            .find(|r| r.id == handler)
            .ok_or_else(|| refused(format!("no handler {handler:?}")))?;
        let text = |key: &str| object[key].as_str().unwrap_or_default().to_owned();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let (group, version) = api_version
            .split_once('/')
            .map_or((String::new(), api_version.clone()), |(g, v)| {
                (g.to_owned(), v.to_owned())
            });
        let cause = Cause {
            handler_id: handler.to_owned(),
            kind: registration.kind,
            resource: Resource {
                group,
                version,
                plural: format!("{}s", kind.to_lowercase()),
                kind,
                namespaced: object["metadata"]["namespace"].is_string(),
            },
            event_type: None,
            reason: Some("create".to_owned()),
            body: body.to_owned(),
            old: None,
            new: None,
            diff: None,
            retry: 0,
            started: "2026-01-01T00:00:00Z".to_owned(),
            runtime_seconds: 0.0,
            param: None,
            memo: None,
        };
        Ok(HandlerCall {
            guest,
            cause,
            _runtime: runtime,
        })
    }

    /// One call, through the host's own path of a handler call (`execution::invoke`:
    /// the call, then the reply read into a patch and a result).
    ///
    /// # Errors
    /// [`Error::Operator`] when the call does not succeed (a trap, a limit, an error
    /// outcome, a result or patch that is not JSON), with the host's reason.
    pub async fn call(&self) -> Result<HandlerReply, Error> {
        let ctx = CallContext::new(&self.cause.handler_id, None, Arc::new(NoServices));
        let executed = execution::invoke(&self.guest, self.cause.clone(), ctx).await;
        match executed.attempt {
            Attempt::Success(result) => Ok(HandlerReply {
                patch: executed.patch.map(serde_json::Value::Object),
                result,
            }),
            other => Err(Error::Operator(
                format!("the handler did not succeed: {other:?}").into(),
            )),
        }
    }
}

/// What a handler handed back, as the host reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerReply {
    /// Its merge-patch of the object, if it made one.
    pub patch: Option<serde_json::Value>,
    /// What it returned, for `status.<id>` (`null`: nothing).
    pub result: serde_json::Value,
}

/// What `kapsel rbac` is asked: the guests, the ServiceAccount that runs them, and how
/// the operator runs (`kapsel run`'s `-n` and peering flags), which decides where and
/// which permissions it needs.
#[derive(Debug, Clone)]
pub struct RbacRequest {
    guests: Vec<PathBuf>,
    service_account: String,
    namespace: String,
    namespaces: Vec<String>,
    /// The peering object (`default` unless `--peering` names another); `None` standalone.
    peering: Option<String>,
    /// `--admission-managed`: the webhook configurations' name.
    admission_managed: Option<String>,
    /// `--admission-secret`: the namespace and name of a generated certificate's Secret.
    admission_secret: Option<(String, String)>,
}

impl RbacRequest {
    /// For these guests (`.wasm` files or directories of them), run by the
    /// ServiceAccount `kapsel` in `default`, cluster-wide, peering as `kapsel run` does
    /// by default.
    pub fn new(guests: impl IntoIterator<Item = impl Into<PathBuf>>) -> RbacRequest {
        RbacRequest {
            guests: guests.into_iter().map(Into::into).collect(),
            service_account: "kapsel".to_owned(),
            namespace: "default".to_owned(),
            namespaces: Vec::new(),
            peering: Some("default".to_owned()),
            admission_managed: None,
            admission_secret: None,
        }
    }

    /// The ServiceAccount's name (also the roles' and the bindings') and namespace.
    #[must_use]
    pub fn service_account(
        mut self,
        name: impl Into<String>,
        namespace: impl Into<String>,
    ) -> RbacRequest {
        self.service_account = name.into();
        self.namespace = namespace.into();
        self
    }

    /// The operator serves only these namespaces (`kapsel run -n`: names, or Kopf's
    /// globs); none means cluster-wide.
    #[must_use]
    pub fn namespaces(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> RbacRequest {
        self.namespaces = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// The operator runs `--standalone`: no peering resources are granted.
    #[must_use]
    pub fn standalone(mut self) -> RbacRequest {
        self.peering = None;
        self
    }

    /// The operator peers through the peering object of this name (`--peering NAME`),
    /// not `default`.
    #[must_use]
    pub fn peering(mut self, name: impl Into<String>) -> RbacRequest {
        self.peering = Some(name.into());
        self
    }

    /// The operator manages the admission webhook configurations of this name
    /// (`kapsel run --admission-managed NAME`): only they may be patched, and a generated
    /// certificate is kept in `<NAME>-admission-tls`. Without it, configurations of any
    /// name may be patched.
    #[must_use]
    pub fn admission_managed(mut self, name: impl Into<String>) -> RbacRequest {
        self.admission_managed = Some(name.into());
        self
    }

    /// The operator keeps a generated admission certificate in this Secret
    /// (`kapsel run --admission-secret NAMESPACE/NAME`).
    #[must_use]
    pub fn admission_secret(
        mut self,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> RbacRequest {
        self.admission_secret = Some((namespace.into(), name.into()));
        self
    }
}

/// The RBAC manifests that an operator of the request's guests needs on the cluster
/// `client` talks to, as YAML (what `kapsel rbac` prints): a ServiceAccount, a
/// ClusterRole and its binding, and a Role and its binding in each namespace named with
/// `-n`. The guests' selectors and permissions are resolved by that cluster's
/// discovery; those that resolve to nothing are named in a comment.
///
/// # Errors
/// [`Error::NoGuests`] when a guest cannot be loaded (naming the file), else what
/// failed (the runtime, discovery).
pub async fn rbac(request: &RbacRequest, client: kube::Client) -> Result<String, Error> {
    let runtime = Runtime::new(Limits::default()).map_err(|e| Error::Runtime(Box::new(e)))?;
    let (loaded, errors) = runtime.load_all(&request.guests).await;
    if !errors.is_empty() || loaded.is_empty() {
        return Err(Error::NoGuests(
            errors.iter().map(ToString::to_string).collect(),
        ));
    }
    let needs = crate::rbac::guest_needs(&client, &loaded)
        .await
        .map_err(|e| Error::Operator(Box::new(e)))?;
    Ok(crate::rbac::manifests(
        &needs,
        &crate::rbac::Subject {
            name: request.service_account.clone(),
            namespace: request.namespace.clone(),
        },
        &crate::rbac::Mode {
            scope: Scope::from_patterns(&request.namespaces),
            peering: request.peering.clone(),
            admission: crate::rbac::Admission {
                managed: request.admission_managed.clone(),
                secret: request.admission_secret.clone(),
            },
        },
    ))
}
