//! The `admission.k8s.io/v1` `AdmissionReview`: the request a webhook is sent, and its
//! answer checked as k8s.io/apiserver's `VerifyAdmissionResponse` does.

use serde_json::{Value, json};

/// What a review tells the webhook about the request.
#[derive(Debug)]
pub(crate) struct Review<'a> {
    pub(crate) uid: &'a str,
    /// The object's `{group, version, kind}`, in the version the webhook matched.
    pub(crate) kind: Value,
    /// The request's `{group, version, resource}`, in the version the webhook matched.
    pub(crate) resource: Value,
    /// The kind and resource of the request itself (another version under
    /// `matchPolicy: Equivalent`).
    pub(crate) request_kind: Value,
    pub(crate) request_resource: Value,
    pub(crate) subresource: &'a str,
    pub(crate) name: &'a str,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) operation: &'a str,
    pub(crate) user: Value,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old_object: Option<&'a Value>,
    pub(crate) dry_run: bool,
    pub(crate) options: Value,
}

impl Review<'_> {
    /// The AdmissionReview sent.
    pub(crate) fn to_json(&self) -> Value {
        let mut request = json!({
            "uid": self.uid,
            "kind": self.kind,
            "resource": self.resource,
            "requestKind": self.request_kind,
            "requestResource": self.request_resource,
            "name": self.name,
            "operation": self.operation,
            "userInfo": self.user,
            "object": self.object,
            "oldObject": self.old_object,
            "dryRun": self.dry_run,
            "options": self.options,
        });
        if !self.subresource.is_empty() {
            request["subResource"] = json!(self.subresource);
            request["requestSubResource"] = json!(self.subresource);
        }
        if let Some(ns) = self.namespace {
            request["namespace"] = json!(ns);
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }
}

/// A webhook's verdict.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) allowed: bool,
    /// The `status` of a refusal (code, reason, message).
    pub(crate) status: Value,
    /// A JSONPatch (decoded from base64), from a mutating webhook.
    pub(crate) patch: Option<Value>,
    pub(crate) warnings: Vec<String>,
}

/// Reads a webhook's answer to the review `uid`; the error is kube's text for an invalid
/// response.
pub(crate) fn verdict(body: &[u8], uid: &str, mutating: bool) -> Result<Verdict, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let (api_version, kind) = (
        review
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        review.get("kind").and_then(Value::as_str).unwrap_or(""),
    );
    if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview") {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
        ));
    }
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let text = |k: &str| response.get(k).and_then(Value::as_str).unwrap_or("");
    if text("uid") != uid {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            text("uid")
        ));
    }
    let patch = match (text("patch"), response.get("patchType")) {
        ("", _) => None,
        (_, _) if !mutating => return Err("validating webhooks may not return patches".into()),
        (_, None) => {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
        (p, Some(t)) if t == "JSONPatch" => Some(decode_patch(p)?),
        (_, Some(t)) => {
            return Err(format!(
                "webhook returned invalid response.patchType of {:?}",
                t.as_str().unwrap_or("")
            ));
        }
    };
    Ok(Verdict {
        allowed: response
            .get("allowed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        status: response.get("status").cloned().unwrap_or(Value::Null),
        patch,
        warnings: response
            .get("warnings")
            .and_then(Value::as_array)
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

fn decode_patch(text: &str) -> Result<Value, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap()
    }

    #[test]
    fn answers_are_checked() {
        let ok = verdict(
            &answer(json!({"uid": "u", "allowed": true, "warnings": ["w"]})),
            "u",
            false,
        )
        .unwrap();
        assert!(ok.allowed);
        assert_eq!(ok.warnings, ["w"]);
        let err = verdict(&answer(json!({"uid": "v", "allowed": true})), "u", false).unwrap_err();
        assert_eq!(err, "expected response.uid=\"u\", got \"v\"");
        let patch = json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "JSONPatch"});
        assert_eq!(
            verdict(&answer(patch.clone()), "u", true).unwrap().patch,
            Some(json!([]))
        );
        assert!(verdict(&answer(patch), "u", false).is_err());
        assert!(verdict(b"{}", "u", false).is_err());
    }
}
