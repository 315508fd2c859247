//! Which webhooks of the stored configurations a request calls: their `rules`
//! (operations, API groups, versions, resources with `*` and sub-resources, scope), as
//! k8s.io/apiserver's `rules.Matcher` decides, and their `namespaceSelector` and
//! `objectSelector`, as its `NamespaceMatcher` and `ObjectMatcher` do.

use serde_json::Value;

/// What a request is, as rules match it.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    pub(crate) operation: &'a str,
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    /// The sub-resource (`status`), or "".
    pub(crate) subresource: &'a str,
    pub(crate) namespaced: bool,
}

/// Whether a webhook's `rules` take in the request.
pub(crate) fn matches(webhook: &Value, req: &Request<'_>) -> bool {
    webhook
        .get("rules")
        .and_then(Value::as_array)
        .is_some_and(|rules| rules.iter().any(|r| rule_matches(r, req)))
}

/// Whether the webhook's `objectSelector` takes in the new or the old object (an absent
/// or empty selector takes in everything), and its `namespaceSelector` the labels of
/// `namespace` (the namespace of a namespaced object; the object itself when it is a
/// Namespace; None for other cluster-scoped objects, which it always takes in). A
/// selector that does not parse takes in nothing.
pub(crate) fn selected(
    webhook: &Value,
    obj: Option<&Value>,
    old: Option<&Value>,
    namespace: Option<&Value>,
) -> bool {
    let by = |key: &str, candidates: &[Option<&Value>]| {
        let Some(text) = webhook.get(key).and_then(crate::selectors::selector_string) else {
            return true;
        };
        crate::selectors::LabelSelector::parse(&text)
            .is_ok_and(|sel| candidates.iter().flatten().any(|o| sel.matches(o)))
    };
    by("objectSelector", &[obj, old])
        && (namespace.is_none() || by("namespaceSelector", &[namespace]))
}

fn strings(rule: &Value, key: &str) -> Vec<String> {
    rule.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// One RuleWithOperations against the request.
fn rule_matches(rule: &Value, req: &Request<'_>) -> bool {
    let any_of = |key: &str, what: &str| strings(rule, key).iter().any(|x| x == "*" || x == what);
    any_of("operations", req.operation)
        && any_of("apiGroups", req.group)
        && any_of("apiVersions", req.version)
        && resource_matches(&strings(rule, "resources"), req)
        && scope_matches(rule.get("scope").and_then(Value::as_str), req.namespaced)
}

/// kube's resource patterns: `*` (every resource, no sub-resource), `*/*` (everything),
/// `pods` (the resource only), `pods/status`, `pods/*`, `*/status`.
fn resource_matches(patterns: &[String], req: &Request<'_>) -> bool {
    patterns.iter().any(|p| {
        let (res, sub) = p.split_once('/').unwrap_or((p.as_str(), ""));
        let res_ok = res == "*" || res == req.resource;
        let sub_ok = if p.contains('/') {
            sub == "*" || sub == req.subresource
        } else {
            req.subresource.is_empty()
        };
        res_ok && sub_ok
    })
}

/// `scope`: `*` (the default), `Cluster` or `Namespaced`.
fn scope_matches(scope: Option<&str>, namespaced: bool) -> bool {
    match scope {
        Some("Cluster") => !namespaced,
        Some("Namespaced") => namespaced,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req<'a>(op: &'a str, resource: &'a str, sub: &'a str) -> Request<'a> {
        Request {
            operation: op,
            group: "",
            version: "v1",
            resource,
            subresource: sub,
            namespaced: true,
        }
    }

    #[test]
    fn rules_match_as_kube_does() {
        let hook = |resources: Value, scope: &str| {
            json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["*"],
                "resources": resources, "scope": scope}]})
        };
        let pods = hook(json!(["pods"]), "*");
        assert!(matches(&pods, &req("CREATE", "pods", "")));
        assert!(!matches(&pods, &req("UPDATE", "pods", "")));
        assert!(!matches(&pods, &req("CREATE", "pods", "status")));
        assert!(!matches(&pods, &req("CREATE", "services", "")));
        assert!(matches(&hook(json!(["*"]), "*"), &req("CREATE", "x", "")));
        assert!(!matches(
            &hook(json!(["*"]), "*"),
            &req("CREATE", "x", "status")
        ));
        assert!(matches(
            &hook(json!(["*/*"]), "*"),
            &req("CREATE", "x", "status")
        ));
        assert!(matches(
            &hook(json!(["pods/status"]), "*"),
            &req("CREATE", "pods", "status")
        ));
        assert!(matches(
            &hook(json!(["*/status"]), "*"),
            &req("CREATE", "pods", "status")
        ));
        assert!(!matches(
            &hook(json!(["pods"]), "Cluster"),
            &req("CREATE", "pods", "")
        ));
        assert!(matches(
            &hook(json!(["pods"]), "Namespaced"),
            &req("CREATE", "pods", "")
        ));
        assert!(!matches(&json!({}), &req("CREATE", "pods", "")));
    }

    #[test]
    fn selectors_take_in_the_new_or_old_object_and_the_namespace() {
        let hook = json!({"objectSelector": {"matchLabels": {"a": "1"}},
            "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["test"]}]}});
        let labelled = |k: &str, v: &str| json!({"metadata": {"labels": {k: v}}});
        let (obj, other, ns) = (
            labelled("a", "1"),
            labelled("a", "2"),
            labelled("env", "test"),
        );
        assert!(selected(&hook, Some(&obj), None, Some(&ns)));
        assert!(selected(&hook, Some(&other), Some(&obj), Some(&ns)));
        assert!(!selected(&hook, Some(&other), None, Some(&ns)));
        assert!(!selected(&hook, Some(&obj), None, Some(&other)));
        assert!(selected(&hook, Some(&obj), None, None));
        assert!(selected(&json!({}), None, None, Some(&other)));
    }
}
