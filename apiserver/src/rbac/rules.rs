//! Which RBAC rules apply to a user in a namespace (kube's DefaultRuleResolver: every
//! ClusterRoleBinding, then the RoleBindings of the namespace) and whether a rule allows a
//! request (kube's RuleAllows). Aggregated ClusterRoles (`aggregationRule`) hold the rules
//! of the ClusterRoles their selectors match, as kube's aggregation controller fills them.

use super::{Attributes, Target};
use crate::auth::User;
use crate::meta::meta_str;
use crate::selectors::{LabelSelector, selector_string};
use crate::store::Store;
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

/// One `PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rule {
    pub(crate) verbs: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) resources: Vec<String>,
    pub(crate) resource_names: Vec<String>,
    pub(crate) non_resource_urls: Vec<String>,
}

fn strings(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

impl Rule {
    pub(crate) fn from_json(v: &Value) -> Rule {
        Rule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }
}

/// The `rules` of a role object.
pub(crate) fn rules_of(role: &Value) -> Vec<Rule> {
    role.get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(Rule::from_json)
        .collect()
}

fn has(set: &[String], x: &str) -> bool {
    set.iter().any(|s| s == x)
}

/// kube's RuleAllows.
pub(crate) fn allows(rule: &Rule, a: &Attributes) -> bool {
    let verb = has(&rule.verbs, "*") || has(&rule.verbs, &a.verb);
    if !verb {
        return false;
    }
    match &a.target {
        Target::Path(path) => rule.non_resource_urls.iter().any(|u| {
            u == "*" || u == path || u.ends_with('*') && path.starts_with(u.trim_end_matches('*'))
        }),
        Target::Resource {
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let group_ok = has(&rule.api_groups, "*") || has(&rule.api_groups, group);
            let resource_ok = rule.resources.iter().any(|r| {
                r == "*"
                    || *r == combined
                    || !subresource.is_empty() && r.strip_prefix("*/") == Some(subresource)
            });
            let name_ok = rule.resource_names.is_empty() || has(&rule.resource_names, name);
            group_ok && resource_ok && name_ok
        }
    }
}

/// The rules that apply, and the bindings that could not be resolved.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    pub(crate) rules: Vec<Rule>,
    pub(crate) errors: Vec<String>,
}

impl Resolved {
    /// kube's denial reason: `RBAC: ERR` or `RBAC: [ERR1, ERR2]`, or nothing.
    pub(crate) fn reason(&self) -> String {
        let unique: Vec<&String> = {
            let mut seen = BTreeSet::new();
            self.errors.iter().filter(|e| seen.insert(*e)).collect()
        };
        match unique.as_slice() {
            [] => String::new(),
            [one] => format!("RBAC: {one}"),
            many => format!(
                "RBAC: [{}]",
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

fn subject_applies(user: &User, s: &Value, binding_ns: &str) -> bool {
    let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
    match text("kind") {
        "User" => user.name == text("name"),
        "Group" => user.groups.iter().any(|g| g == text("name")),
        "ServiceAccount" => {
            let ns = if text("namespace").is_empty() {
                binding_ns
            } else {
                text("namespace")
            };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{}", text("name"))
        }
        _ => false,
    }
}

fn applies(user: &User, binding: &Value, ns: &str) -> bool {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .is_some_and(|ss| ss.iter().any(|s| subject_applies(user, s, ns)))
}

fn res(plural: &str) -> (String, String) {
    (GROUP.to_string(), plural.to_string())
}

/// The rules of a ClusterRole: its own, or for an aggregated one those of every
/// ClusterRole its selectors match (followed through further aggregated roles).
fn cluster_role_rules(store: &Store, role: &Value, seen: &mut BTreeSet<String>) -> Vec<Rule> {
    let Some(selectors) = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    else {
        return rules_of(role);
    };
    seen.insert(meta_str(role, "name").to_string());
    let selectors: Vec<LabelSelector> = selectors
        .iter()
        .filter_map(|s| match selector_string(s) {
            None => Some(LabelSelector::default()),
            Some(text) => LabelSelector::parse(&text).ok(),
        })
        .collect();
    let mut out: Vec<Rule> = Vec::new();
    let matching: Vec<&Value> = store
        .list(&res("clusterroles"), None)
        .map(|(_, r)| r)
        .filter(|r| !seen.contains(meta_str(r, "name")))
        .filter(|r| selectors.iter().any(|s| s.matches(r)))
        .collect();
    for r in matching {
        for rule in cluster_role_rules(store, r, seen) {
            if !out.contains(&rule) {
                out.push(rule);
            }
        }
    }
    out
}

/// The rules a `roleRef` names, in a binding's namespace ("" for a ClusterRoleBinding).
pub(crate) fn role_ref_rules(
    store: &Store,
    role_ref: Option<&Value>,
    ns: &str,
) -> Result<Vec<Rule>, String> {
    let text = |k: &str| {
        role_ref
            .and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let name = text("name");
    match text("kind") {
        "Role" => store
            .get(&res("roles"), &(ns.to_string(), name.to_string()))
            .map(rules_of)
            .ok_or_else(|| format!("role.{GROUP} {name:?} not found")),
        "ClusterRole" => store
            .get(&res("clusterroles"), &(String::new(), name.to_string()))
            .map(|r| cluster_role_rules(store, r, &mut BTreeSet::new()))
            .ok_or_else(|| format!("clusterrole.{GROUP} {name:?} not found")),
        other => Err(format!("unsupported role reference kind: {other:?}")),
    }
}

/// Every rule that applies to `user` in `ns` ("" for cluster-scoped requests).
pub(crate) fn rules_for(store: &Store, user: &User, ns: &str) -> Resolved {
    let mut out = Resolved::default();
    let mut add = |r: Result<Vec<Rule>, String>| match r {
        Ok(rules) => out.rules.extend(rules),
        Err(e) => out.errors.push(e),
    };
    for (_, b) in store.list(&res("clusterrolebindings"), None) {
        if applies(user, b, "") {
            add(role_ref_rules(store, b.get("roleRef"), ""));
        }
    }
    if !ns.is_empty() {
        for (_, b) in store.list(&res("rolebindings"), Some(ns)) {
            if applies(user, b, ns) {
                add(role_ref_rules(store, b.get("roleRef"), ns));
            }
        }
    }
    out
}
