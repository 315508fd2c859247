//! Privilege escalation checks on writes of roles and bindings, as kube's RBAC storage
//! makes them: a user may create or change a Role or ClusterRole only with rules it holds
//! itself (in that namespace) unless it may `escalate` roles, and may bind a role only if
//! it holds the role's rules unless it may `bind` that role. `system:masters` may do
//! anything. Messages are kube's.

use super::rules::{GROUP, Rule, role_ref_rules, rules_for, rules_of};
use super::{Attributes, Target, authorize};
use crate::auth::User;
use crate::meta::meta_str;
use crate::status::ApiError;
use crate::store::Store;
use serde_json::Value;
use std::collections::BTreeSet;

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// kube's CompactString of a rule: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
fn compact_string(r: &Rule) -> String {
    let parts: Vec<String> = [
        ("APIGroups", &r.api_groups),
        ("Resources", &r.resources),
        ("NonResourceURLs", &r.non_resource_urls),
        ("ResourceNames", &r.resource_names),
        ("Verbs", &r.verbs),
    ]
    .iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k}:{}", go_list(v)))
    .collect();
    format!("{{{}}}", parts.join(", "))
}

/// kube's BreakdownRule: one rule per group, resource, verb and name; one per URL and verb.
fn breakdown(r: &Rule) -> Vec<Rule> {
    let mut out = Vec::new();
    let one = |s: &String| vec![s.clone()];
    for g in &r.api_groups {
        for res in &r.resources {
            for v in &r.verbs {
                let base = Rule {
                    api_groups: one(g),
                    resources: one(res),
                    verbs: one(v),
                    ..Rule::default()
                };
                if r.resource_names.is_empty() {
                    out.push(base);
                } else {
                    for n in &r.resource_names {
                        out.push(Rule {
                            resource_names: one(n),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for u in &r.non_resource_urls {
        for v in &r.verbs {
            out.push(Rule {
                non_resource_urls: one(u),
                verbs: one(v),
                ..Rule::default()
            });
        }
    }
    out
}

fn has(set: &[String], x: &str) -> bool {
    set.iter().any(|s| s == x)
}

fn has_all(set: &[String], xs: &[String]) -> bool {
    xs.iter().all(|x| has(set, x))
}

/// kube's ruleCovers: whether `owner` covers `sub` (one verb, resource and name).
fn covers(owner: &Rule, sub: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = has(&owner.resources, "*")
        || sub.resources.iter().all(|r| {
            has(&owner.resources, r)
                || r.split_once('/')
                    .is_some_and(|(_, s)| has(&owner.resources, &format!("*/{s}")))
        });
    let urls = sub.non_resource_urls.iter().all(|p| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| o == p || o.ends_with('*') && p.starts_with(o.trim_end_matches('*')))
    });
    let names = owner.resource_names.is_empty()
        || !sub.resource_names.is_empty() && has_all(&owner.resource_names, &sub.resource_names);
    verbs && groups && resources && urls && names
}

/// kube's CompactRules over broken-down rules: the verbs of rules that differ only by
/// verb, merged.
fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    for r in rules {
        let simple = r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1
            && r.resource_names.len() <= 1;
        let same = out.iter_mut().find(|o| {
            simple
                && o.non_resource_urls.is_empty()
                && o.api_groups == r.api_groups
                && o.resources == r.resources
                && o.resource_names == r.resource_names
        });
        match same {
            Some(o) => {
                for v in r.verbs {
                    if !o.verbs.contains(&v) {
                        o.verbs.push(v);
                    }
                }
            }
            None => out.push(r),
        }
    }
    out
}

/// kube's ConfirmNoEscalation: the user holds every rule in `rules` in `ns`.
fn confirm_no_escalation(
    store: &Store,
    user: &User,
    ns: &str,
    rules: &[Rule],
) -> Result<(), String> {
    let owner = rules_for(store, user, ns);
    let missing: Vec<Rule> = rules
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.rules.iter().any(|o| covers(o, sub)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let described: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    let mut msg = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_list(&user.groups),
        described.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !owner.errors.is_empty() {
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            owner.errors.join(" ")
        ));
    }
    Err(msg)
}

/// Whether only what garbage collection changes (owners, finalizers) and bookkeeping
/// differ between the stored object and its update (kube's IsOnlyMutatingGCFields).
fn only_gc_fields(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "selfLink",
                "resourceVersion",
                "generation",
            ] {
                m.remove(k);
            }
        }
        v
    };
    strip(old) == strip(new)
}

fn allowed(store: &Store, user: &User, verb: &str, resource: &str, ns: &str, name: &str) -> bool {
    let a = Attributes {
        verb: verb.into(),
        target: Target::Resource {
            group: GROUP.into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: ns.into(),
            name: name.into(),
        },
    };
    authorize(store, user, &a).is_ok()
}

/// Checks a create (`old` None) or update of an object of `plural` by `user`; objects of
/// other resources pass.
pub(crate) fn check_write(
    store: &Store,
    user: &User,
    (group, plural): (&str, &str),
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if group != GROUP || user.is_master() {
        return Ok(());
    }
    let name = meta_str(new, "name");
    let ns = meta_str(new, "namespace");
    let forbid = |message: String| {
        let mut e = ApiError::new(
            403,
            "Forbidden",
            format!("{plural}.{GROUP} {name:?} is forbidden: {message}"),
        );
        e.details = Some(Box::new(
            serde_json::json!({"name": name, "group": GROUP, "kind": plural}),
        ));
        e
    };
    if old.is_some_and(|old| only_gc_fields(old, new)) {
        return Ok(());
    }
    let request_name = if old.is_some() { name } else { "" };
    match plural {
        "roles" | "clusterroles" => {
            if allowed(store, user, "escalate", plural, ns, request_name) {
                return Ok(());
            }
            confirm_no_escalation(store, user, ns, &rules_of(new)).map_err(forbid)?;
            if plural == "clusterroles" && new.get("aggregationRule").is_some_and(|a| !a.is_null())
            {
                let everything = [
                    Rule {
                        verbs: vec!["*".into()],
                        api_groups: vec!["*".into()],
                        resources: vec!["*".into()],
                        ..Rule::default()
                    },
                    Rule {
                        verbs: vec!["*".into()],
                        non_resource_urls: vec!["*".into()],
                        ..Rule::default()
                    },
                ];
                confirm_no_escalation(store, user, "", &everything).map_err(|_| {
                    forbid("must have cluster-admin privileges to use the aggregationRule".into())
                })?;
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = new.get("roleRef");
            let text = |k: &str| {
                role_ref
                    .and_then(|r| r.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            let bind_resource = match text("kind") {
                "Role" => Some("roles"),
                "ClusterRole" => Some("clusterroles"),
                _ => None,
            };
            if let Some(resource) = bind_resource
                && allowed(store, user, "bind", resource, ns, text("name"))
            {
                return Ok(());
            }
            let rules = role_ref_rules(store, role_ref, ns).map_err(forbid)?;
            confirm_no_escalation(store, user, ns, &rules).map_err(forbid)
        }
        _ => Ok(()),
    }
}
