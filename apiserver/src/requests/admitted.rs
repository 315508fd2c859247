//! Writes through admission, where kube-apiserver runs it: the mutating webhooks on the
//! incoming object, kube's create or update rules, the validating webhooks on the object
//! as it would be stored, then the write. Without a matching webhook, the write is the
//! plain one.

use std::sync::Arc;

use serde_json::Value;

use super::Call;
use crate::admission::{self, Attributes};
use crate::objects::{Fields, present};
use crate::status::ApiError;
use crate::store::meta_str;

impl Call<'_> {
    /// The write as admission sees it.
    fn attributes<'a>(&'a self, operation: &'static str, name: &'a str) -> Attributes<'a> {
        Attributes {
            scope: &self.scope,
            name,
            subresource: self.subresource.recorded().unwrap_or(""),
            operation,
            user: self.who.user.as_deref(),
            dry_run: self.dry,
            kind: None,
        }
    }
}

/// Creates `obj` (a POST, or a server-side apply that creates), admitted by webhooks;
/// their warnings are added to `warnings`.
pub(super) async fn create(
    call: &Call<'_>,
    mut obj: Value,
    fields: Fields<'_>,
    warnings: &mut Vec<String>,
) -> Result<Arc<Value>, ApiError> {
    let scope = &call.scope;
    let name = meta_str(&obj, "name").to_string();
    let attrs = call.attributes("CREATE", &name);
    if !admission::any(call.shared, &attrs) {
        return crate::objects::create(&mut call.shared.lock(), scope, obj, call.dry, fields);
    }
    // The object admission sees is in the namespace of the request.
    if let (Some(ns), Some(meta)) = (
        &scope.ns,
        obj.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        meta.insert("namespace".into(), Value::from(ns.as_str()));
    }
    // Webhooks see the object defaulted, as kube defaults it when it decodes it.
    crate::objects::apply_defaults(scope, &mut obj);
    admission::mutate(call.shared, &attrs, &mut obj, None, warnings).await?;
    let prepared = crate::objects::create(&mut call.shared.lock(), scope, obj, true, fields)?;
    let name = meta_str(&prepared, "name").to_string();
    let attrs = call.attributes("CREATE", &name);
    let seen = present(&scope.rt, &prepared);
    admission::validate(call.shared, &attrs, Some(&seen), None, warnings).await?;
    if call.dry {
        return Ok(prepared);
    }
    crate::objects::store_prepared(
        &mut call.shared.lock(),
        scope,
        Value::clone(&prepared),
        fields,
    )
}

/// Updates object `name` from `old` (as served) to the client's `new` version (a PUT or
/// a patch's result), admitted by webhooks; their warnings are added to `warnings`.
pub(super) async fn update(
    call: &Call<'_>,
    name: &str,
    mut new: Value,
    old: &Value,
    fields: Fields<'_>,
    warnings: &mut Vec<String>,
) -> Result<Arc<Value>, ApiError> {
    let scope = &call.scope;
    let attrs = call.attributes("UPDATE", name);
    let commit = |new: Value, dry: bool| {
        let mut store = call.shared.lock();
        let stored = store.shared(&scope.res(), &scope.key(name)).cloned();
        let result = crate::objects::commit_update(
            &mut store,
            scope,
            name,
            new,
            call.status_only(),
            dry,
            fields,
        )?;
        Ok::<_, ApiError>((result, stored))
    };
    if !admission::any(call.shared, &attrs) {
        return Ok(commit(new, call.dry)?.0);
    }
    crate::objects::apply_defaults(scope, &mut new);
    admission::mutate(call.shared, &attrs, &mut new, Some(old), warnings).await?;
    let (prepared, stored) = commit(new, true)?;
    let seen = present(&scope.rt, &prepared);
    admission::validate(call.shared, &attrs, Some(&seen), Some(old), warnings).await?;
    // A write that changes nothing answers the stored version itself.
    let unchanged = stored.as_ref().is_none_or(|s| Arc::ptr_eq(s, &prepared));
    if call.dry || unchanged {
        return Ok(prepared);
    }
    let old_rv = stored
        .as_deref()
        .map_or("", |s| meta_str(s, "resourceVersion"));
    crate::objects::store_prepared_update(
        &mut call.shared.lock(),
        scope,
        name,
        old_rv,
        Value::clone(&prepared),
    )
}

/// Admits the deletion of object `name`, `old` as served (`body_dry`: the DeleteOptions'
/// own dryRun), its `preconditions` checked between the mutating and the validating
/// webhooks; the webhooks' warnings are added to `warnings`.
pub(super) async fn delete(
    call: &Call<'_>,
    name: &str,
    (old, body_dry): (&Value, bool),
    preconditions: impl FnOnce() -> Result<(), ApiError>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut attrs = call.attributes("DELETE", name);
    attrs.dry_run |= body_dry;
    admission::admit_delete(call.shared, &attrs, old, warnings, preconditions).await
}

/// Admits the update of object `name`'s scale: `scale` the new `autoscaling/v1` Scale
/// (changed by the mutating webhooks), `old` the current one; the webhooks' warnings are
/// added to `warnings`.
pub(super) async fn scale(
    call: &Call<'_>,
    name: &str,
    scale: &mut Value,
    old: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut attrs = call.attributes("UPDATE", name);
    attrs.subresource = "scale";
    attrs.kind = Some(("autoscaling", "v1", "Scale"));
    admission::mutate(call.shared, &attrs, scale, Some(old), warnings).await?;
    admission::validate(call.shared, &attrs, Some(scale), Some(old), warnings).await
}

/// Admits a connection to object `name`'s subresource `subresource` (`pods/exec`,
/// `attach`, `portforward`): operation CONNECT, the connection's options (`kind`, of
/// `v1`) as the object, as kube-apiserver admits them before it looks for the object.
pub(super) async fn connect(
    call: &Call<'_>,
    name: &str,
    (subresource, kind): (&'static str, &'static str),
    options: &mut Value,
) -> Result<(), ApiError> {
    let mut attrs = call.attributes("CONNECT", name);
    attrs.subresource = subresource;
    attrs.kind = Some(("", "v1", kind));
    // A connection's answer is its stream: warnings have nowhere to go.
    let mut warnings = Vec::new();
    admission::mutate(call.shared, &attrs, options, None, &mut warnings).await?;
    admission::validate(call.shared, &attrs, Some(options), None, &mut warnings).await
}
