//! The AdmissionReview as the webhook server reads and answers it (`admission.k8s.io/v1`;
//! `v1beta1` too, as Kopf reads both): the parts of the request a handler sees, and the
//! response built from what the handlers decided.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// One admission request, as read from a review.
///
/// The objects are kept as the review's text, which the handlers get as it came (never
/// serialised again); they are parsed only when something needs them as values (a
/// filter, an update's diff, a mutating handler's patch): a review is read in one pass.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Review {
    /// The review's `apiVersion`, which the response repeats.
    pub(crate) api_version: String,
    pub(crate) uid: String,
    /// The resource written (`request.resource`): group, version, plural.
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    /// The object's kind (`request.kind.kind`).
    pub(crate) kind: String,
    pub(crate) subresource: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub(crate) operation: String,
    /// `userInfo` as the review's text.
    pub(crate) user_info: String,
    pub(crate) object_text: Option<String>,
    pub(crate) old_object_text: Option<String>,
    pub(crate) dry_run: bool,
    /// `options` as the review's text.
    pub(crate) options: Option<String>,
    /// The objects as values, parsed on first need.
    object: OnceLock<Option<Value>>,
    old_object: OnceLock<Option<Value>>,
    /// What names the body: its `apiVersion`, `kind` and `metadata`'s name,
    /// generateName, namespace and uid (for logs, Events and the calls' namespace).
    identity: Arc<Value>,
}

/// Why a request body is no admission review the webhook can answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReviewError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body is not an AdmissionReview of admission.k8s.io/v1 or v1beta1")]
    NotAReview,
    #[error("the admission request has no {0}")]
    Missing(&'static str),
}

/// A review as it is written: what the webhook reads of it, the rest skipped.
#[derive(Deserialize)]
struct WireReview<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request: Option<WireRequest<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<'a> {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    kind: Option<WireKind>,
    #[serde(default)]
    resource: Option<WireResource>,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(borrow, default)]
    user_info: Option<&'a RawValue>,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(borrow, default)]
    options: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireKind {
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct WireResource {
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    resource: Option<String>,
}

/// What names an object, read from its text without the rest.
#[derive(Deserialize)]
struct WireIdentity {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<Value>,
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default)]
    metadata: Option<WireMetadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMetadata {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    generate_name: Option<Value>,
    #[serde(default)]
    namespace: Option<Value>,
    #[serde(default)]
    uid: Option<Value>,
}

impl Review {
    /// The request of a review's body.
    ///
    /// # Errors
    /// The body is no review, or its request lacks what every request has: its uid,
    /// resource, operation and user info, and an object or an old object (Kopf refuses
    /// those too).
    pub(crate) fn read(body: &[u8]) -> Result<Review, ReviewError> {
        let wire: WireReview =
            serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
        let api_version = match wire.api_version.as_deref() {
            Some(v @ ("admission.k8s.io/v1" | "admission.k8s.io/v1beta1")) => v.to_owned(),
            _ => return Err(ReviewError::NotAReview),
        };
        if wire.kind.as_deref() != Some("AdmissionReview") {
            return Err(ReviewError::NotAReview);
        }
        let request = wire.request.ok_or(ReviewError::Missing("request"))?;
        // `null` is absent, as for any optional field.
        let text = |raw: Option<&RawValue>| {
            raw.map(RawValue::get)
                .filter(|text| *text != "null")
                .map(str::to_owned)
        };
        let (object_text, old_object_text) = (text(request.object), text(request.old_object));
        let resource = request.resource.ok_or(ReviewError::Missing("resource"))?;
        let identity = object_text
            .as_deref()
            .or(old_object_text.as_deref())
            .map_or(Value::Null, identity_of);
        let review = Review {
            api_version,
            uid: request.uid.ok_or(ReviewError::Missing("uid"))?,
            group: resource.group.unwrap_or_default(),
            version: resource.version.unwrap_or_default(),
            plural: resource.resource.unwrap_or_default(),
            kind: request.kind.and_then(|k| k.kind).unwrap_or_default(),
            subresource: request.sub_resource.filter(|s| !s.is_empty()),
            operation: request.operation.ok_or(ReviewError::Missing("operation"))?,
            user_info: text(request.user_info).ok_or(ReviewError::Missing("userInfo"))?,
            dry_run: request.dry_run.unwrap_or(false),
            options: text(request.options),
            object: OnceLock::new(),
            old_object: OnceLock::new(),
            identity: Arc::new(identity),
            object_text,
            old_object_text,
        };
        if review.plural.is_empty() {
            return Err(ReviewError::Missing("resource"));
        }
        if review.object_text.is_none() && review.old_object_text.is_none() {
            return Err(ReviewError::Missing("object or oldObject"));
        }
        Ok(review)
    }

    /// The object written, as a value (parsed on first need).
    pub(crate) fn object(&self) -> Option<&Value> {
        parsed(&self.object, self.object_text.as_deref())
    }

    /// The object before the write, as a value (parsed on first need).
    pub(crate) fn old_object(&self) -> Option<&Value> {
        parsed(&self.old_object, self.old_object_text.as_deref())
    }

    /// The object the handlers see as their body: the object written, or for a deletion
    /// the object deleted (Kopf's choice).
    pub(crate) fn body(&self) -> &Value {
        self.object()
            .or_else(|| self.old_object())
            .unwrap_or(&Value::Null)
    }

    /// What names the body (`apiVersion`, `kind`, and `metadata`'s name, generateName,
    /// namespace and uid), without the rest of it.
    pub(crate) fn identity(&self) -> &Arc<Value> {
        &self.identity
    }
}

/// `text` as a value, parsed once into `cell`. The review's reading checked the text is
/// JSON; a value too deep to parse is `null`.
fn parsed<'a>(cell: &'a OnceLock<Option<Value>>, text: Option<&str>) -> Option<&'a Value> {
    cell.get_or_init(|| text.map(|text| serde_json::from_str(text).unwrap_or(Value::Null)))
        .as_ref()
}

/// What names the object of `text`, as a value with only those members.
fn identity_of(text: &str) -> Value {
    let Ok(wire) = serde_json::from_str::<WireIdentity>(text) else {
        return Value::Null;
    };
    let mut identity = Map::new();
    let put = |into: &mut Map<String, Value>, key: &str, value: Option<Value>| {
        if let Some(value) = value {
            into.insert(key.to_owned(), value);
        }
    };
    put(&mut identity, "apiVersion", wire.api_version);
    put(&mut identity, "kind", wire.kind);
    if let Some(meta) = wire.metadata {
        let mut metadata = Map::new();
        put(&mut metadata, "name", meta.name);
        put(&mut metadata, "generateName", meta.generate_name);
        put(&mut metadata, "namespace", meta.namespace);
        put(&mut metadata, "uid", meta.uid);
        identity.insert("metadata".to_owned(), Value::Object(metadata));
    }
    Value::Object(identity)
}

impl Review {
    /// The text of the object the handlers see as their body.
    pub(crate) fn body_text(&self) -> &str {
        self.object_text
            .as_deref()
            .or(self.old_object_text.as_deref())
            .unwrap_or("null")
    }

    /// Kopf's diff of the old object and the new one, as JSON text: one `add` of the
    /// whole object for a creation, one `remove` for a deletion (both from the review's
    /// text), else the diff of the two.
    pub(crate) fn diff_text(&self, diff: impl FnOnce(&Value, &Value) -> Value) -> String {
        match (&self.old_object_text, &self.object_text) {
            (None, Some(new)) => format!("[[\"add\",[],null,{new}]]"),
            (Some(old), None) => format!("[[\"remove\",[],{old},null]]"),
            (None, None) => "[]".to_owned(),
            (Some(_), Some(_)) => {
                let absent = Value::Null;
                let old = self.old_object().unwrap_or(&absent);
                let new = self.object().unwrap_or(&absent);
                diff(old, new).to_string()
            }
        }
    }
}

/// What the handlers of one review decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Judgement {
    /// The refusal that wins, if any handler refused: its message and HTTP code.
    pub(crate) refusal: Option<(String, u16)>,
    pub(crate) warnings: Vec<String>,
    /// The JSONPatch operations of the mutating handlers, if they changed anything.
    pub(crate) patch: Vec<Value>,
}

/// The review's response to `review`: allowed unless refused, with the warnings, the
/// patch (base64 JSONPatch) and the refusal's status.
pub(crate) fn response(review: &Review, verdict: &Judgement) -> Value {
    let mut answer = Map::new();
    answer.insert("uid".to_owned(), json!(review.uid));
    answer.insert("allowed".to_owned(), json!(verdict.refusal.is_none()));
    if !verdict.warnings.is_empty() {
        answer.insert("warnings".to_owned(), json!(verdict.warnings));
    }
    if let Some((message, code)) = &verdict.refusal {
        answer.insert(
            "status".to_owned(),
            json!({"message": message, "code": code}),
        );
    } else if !verdict.patch.is_empty() {
        let patch = Value::Array(verdict.patch.clone()).to_string();
        let encoded = base64::engine::general_purpose::STANDARD.encode(patch);
        answer.insert("patch".to_owned(), json!(encoded));
        answer.insert("patchType".to_owned(), json!("JSONPatch"));
    }
    json!({
        "apiVersion": review.api_version,
        "kind": "AdmissionReview",
        "response": answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review_json(request: Value) -> Vec<u8> {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
            .to_string()
            .into_bytes()
    }

    fn create() -> Value {
        json!({
            "uid": "u-1",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {"metadata": {"name": "kex", "namespace": "ns", "labels": {"a": "b"}}, "spec": {"field": "x"}},
            "oldObject": null,
            "dryRun": true,
            "options": {"kind": "CreateOptions"},
        })
    }

    #[test]
    fn a_request_is_read_with_what_handlers_see() {
        let review = Review::read(&review_json(create())).unwrap();
        assert_eq!(review.uid, "u-1");
        assert_eq!(
            (
                review.group.as_str(),
                review.version.as_str(),
                review.plural.as_str()
            ),
            ("kopf.dev", "v1", "kopfexamples")
        );
        assert_eq!(review.kind, "KopfExample");
        assert_eq!(review.operation, "CREATE");
        assert!(review.dry_run);
        assert_eq!(review.old_object(), None, "null is absent");
        assert_eq!(
            review.options.as_deref(),
            Some(r#"{"kind":"CreateOptions"}"#)
        );
        assert_eq!(
            review.user_info,
            r#"{"username":"admin","groups":["system:masters"]}"#
        );
        assert_eq!(
            **review.identity(),
            json!({"metadata": {"name": "kex", "namespace": "ns"}})
        );
        assert_eq!(review.body()["spec"]["field"], "x");
    }

    #[test]
    fn handlers_get_the_objects_as_written_and_kopfs_diff() {
        // Spaced as a client may space it: the text handed over is the review's own.
        let body = br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE", "userInfo": {}, "object": {"a" :  1}, "oldObject": null}}"#;
        let created = Review::read(body).unwrap();
        assert_eq!(created.body_text(), r#"{"a" :  1}"#);
        assert_eq!(created.old_object_text, None);
        let diff = |_: &Value, _: &Value| unreachable!("no diff to compute");
        assert_eq!(created.diff_text(diff), r#"[["add",[],null,{"a" :  1}]]"#);

        let mut request = create();
        request["operation"] = json!("DELETE");
        request["oldObject"] = request["object"].take();
        let deleted = Review::read(&review_json(request)).unwrap();
        assert_eq!(
            deleted.body_text(),
            deleted.old_object_text.as_deref().unwrap()
        );
        assert!(deleted.diff_text(diff).starts_with(r#"[["remove",[],{"#));
        assert!(deleted.diff_text(diff).ends_with(r#"},null]]"#));

        let mut request = create();
        request["operation"] = json!("UPDATE");
        request["oldObject"] = json!({"spec": {"field": "w"}});
        let updated = Review::read(&review_json(request)).unwrap();
        let text = updated.diff_text(|old, new| json!([old["spec"], new["spec"]]));
        assert_eq!(text, r#"[{"field":"w"},{"field":"x"}]"#);
    }

    #[test]
    fn a_deletion_shows_the_deleted_object_as_the_body() {
        let mut request = create();
        request["operation"] = json!("DELETE");
        request["oldObject"] = request["object"].take();
        let review = Review::read(&review_json(request)).unwrap();
        assert_eq!(review.body()["metadata"]["name"], "kex");
        assert_eq!(review.object(), None);
    }

    #[test]
    fn what_is_no_review_is_refused_saying_why() {
        assert!(matches!(Review::read(b"{"), Err(ReviewError::NotJson(_))));
        let other = json!({"apiVersion": "v1", "kind": "AdmissionReview", "request": create()});
        assert_eq!(
            Review::read(other.to_string().as_bytes()),
            Err(ReviewError::NotAReview)
        );
        for (field, missing) in [
            ("userInfo", "userInfo"),
            ("uid", "uid"),
            ("operation", "operation"),
            ("resource", "resource"),
        ] {
            let mut request = create();
            request.as_object_mut().unwrap().remove(field);
            assert_eq!(
                Review::read(&review_json(request)),
                Err(ReviewError::Missing(missing))
            );
        }
        let mut request = create();
        request["object"] = Value::Null;
        assert_eq!(
            Review::read(&review_json(request)),
            Err(ReviewError::Missing("object or oldObject"))
        );
    }

    #[test]
    fn the_response_carries_the_refusal_or_the_patch_and_the_warnings() {
        let review = Review::read(&review_json(create())).unwrap();
        let refused = response(
            &review,
            &Judgement {
                refusal: Some(("no".to_owned(), 422)),
                warnings: vec!["careful".to_owned()],
                patch: vec![json!({"op": "add", "path": "/x", "value": 1})],
            },
        );
        assert_eq!(
            refused,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                "uid": "u-1", "allowed": false, "warnings": ["careful"],
                "status": {"message": "no", "code": 422},
            }})
        );
        let patched = response(
            &review,
            &Judgement {
                patch: vec![json!({"op": "add", "path": "/x", "value": 1})],
                ..Judgement::default()
            },
        );
        let encoded = patched["response"]["patch"].as_str().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&decoded).unwrap(),
            json!([{"op": "add", "path": "/x", "value": 1}])
        );
        assert_eq!(patched["response"]["patchType"], "JSONPatch");
        assert_eq!(patched["response"]["allowed"], true);
    }
}
