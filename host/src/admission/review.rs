//! The AdmissionReview as the webhook server reads and answers it (`admission.k8s.io/v1`;
//! `v1beta1` too, as Kopf reads both): the parts of the request a handler sees, and the
//! response built from what the handlers decided.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// One admission request, as read from a review.
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
    pub(crate) user_info: Value,
    pub(crate) object: Option<Value>,
    pub(crate) old_object: Option<Value>,
    /// The objects as the review's text, which the handlers get as it came (never
    /// serialised again).
    pub(crate) object_text: Option<String>,
    pub(crate) old_object_text: Option<String>,
    pub(crate) dry_run: bool,
    pub(crate) options: Option<Value>,
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

impl Review {
    /// The request of a review's body.
    ///
    /// # Errors
    /// The body is no review, or its request lacks what every request has: its uid,
    /// resource, operation and user info, and an object or an old object (Kopf refuses
    /// those too).
    pub(crate) fn read(body: &[u8]) -> Result<Review, ReviewError> {
        let not_json = |e: serde_json::Error| ReviewError::NotJson(e.to_string());
        let review: Value = serde_json::from_slice(body).map_err(not_json)?;
        // The objects are kept as their text too, as they are written in the review.
        let raw: RawObjects = serde_json::from_slice(body).map_err(not_json)?;
        let raw = raw.request.unwrap_or_default();
        let text = |raw: Option<&serde_json::value::RawValue>| {
            raw.map(serde_json::value::RawValue::get)
                .filter(|text| *text != "null")
                .map(str::to_owned)
        };
        let (object_text, old_object_text) = (text(raw.object), text(raw.old_object));
        let api_version = review.get("apiVersion").and_then(Value::as_str);
        let api_version = match api_version {
            Some(v @ ("admission.k8s.io/v1" | "admission.k8s.io/v1beta1")) => v.to_owned(),
            _ => return Err(ReviewError::NotAReview),
        };
        if review.get("kind").and_then(Value::as_str) != Some("AdmissionReview") {
            return Err(ReviewError::NotAReview);
        }
        let request = review
            .get("request")
            .and_then(Value::as_object)
            .ok_or(ReviewError::Missing("request"))?;
        let text = |field: &'static str| {
            request
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(ReviewError::Missing(field))
        };
        let resource = request
            .get("resource")
            .and_then(Value::as_object)
            .ok_or(ReviewError::Missing("resource"))?;
        let part = |field: &str| {
            resource
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let present = |field: &str| request.get(field).filter(|v| !v.is_null()).cloned();
        let review = Review {
            api_version,
            uid: text("uid")?,
            group: part("group"),
            version: part("version"),
            plural: part("resource"),
            kind: request
                .get("kind")
                .and_then(|k| k.get("kind"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            subresource: request
                .get("subResource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            operation: text("operation")?,
            user_info: present("userInfo").ok_or(ReviewError::Missing("userInfo"))?,
            object: present("object"),
            old_object: present("oldObject"),
            dry_run: request
                .get("dryRun")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            options: present("options"),
            object_text,
            old_object_text,
        };
        if review.plural.is_empty() {
            return Err(ReviewError::Missing("resource"));
        }
        if review.object.is_none() && review.old_object.is_none() {
            return Err(ReviewError::Missing("object or oldObject"));
        }
        Ok(review)
    }

    /// The object the handlers see as their body: the object written, or for a deletion
    /// the object deleted (Kopf's choice).
    pub(crate) fn body(&self) -> &Value {
        self.object
            .as_ref()
            .or(self.old_object.as_ref())
            .unwrap_or(&Value::Null)
    }
}

/// The review's objects as they are written in it.
#[derive(serde::Deserialize)]
struct RawObjects<'a> {
    #[serde(borrow)]
    request: Option<RawRequest<'a>>,
}

#[derive(Default, serde::Deserialize)]
struct RawRequest<'a> {
    #[serde(borrow)]
    object: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "oldObject")]
    old_object: Option<&'a serde_json::value::RawValue>,
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
                let old = self.old_object.as_ref().unwrap_or(&absent);
                let new = self.object.as_ref().unwrap_or(&absent);
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
            "object": {"metadata": {"name": "kex"}, "spec": {"field": "x"}},
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
        assert_eq!(review.old_object, None, "null is absent");
        assert_eq!(review.options, Some(json!({"kind": "CreateOptions"})));
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
        assert_eq!(review.object, None);
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
