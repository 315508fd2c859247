//! What a guest declares: checking `describe()`'s output at load, and rendering it as JSON
//! for `kapsel inspect`.

use serde_json::{Map, Value, json};

use super::bindings::{
    DescribeOutput, HandlerKind, Matcher, MetaFilter, Permission, Registration, Selector,
};
use crate::limits::Limits;

/// Checks the registrations a guest declared; the error says what is wrong, in plain words.
///
/// Several registrations may share an id (stacked attributes on one function), also with
/// different kinds (Kopf allows `on.create` and `on.update` on one function).
pub(super) fn validate(output: &DescribeOutput, limits: &Limits) -> Result<(), String> {
    for (position, registration) in output.handlers.iter().enumerate() {
        validate_registration(registration, limits).map_err(|reason| {
            if registration.id.is_empty() {
                format!(
                    "handler #{} ({}): {reason}",
                    position + 1,
                    registration.kind.as_str()
                )
            } else {
                format!("handler {:?}: {reason}", registration.id)
            }
        })?;
    }
    for permission in &output.permissions {
        validate_selector(&permission.target)
            .map_err(|reason| format!("permission on {}: {reason}", permission.target))?;
        if permission.verbs.is_empty() {
            return Err(format!(
                "permission on {} names no verbs",
                permission.target
            ));
        }
    }
    Ok(())
}

fn validate_registration(r: &Registration, limits: &Limits) -> Result<(), String> {
    if r.id.trim().is_empty() {
        return Err("the id is empty".to_owned());
    }
    if r.kind.is_operator_level() {
        if !r.selectors.is_empty() {
            return Err(format!(
                "a {} handler takes no resource selectors",
                r.kind.as_str()
            ));
        }
    } else if r.selectors.is_empty() {
        return Err(format!(
            "a {} handler needs at least one resource selector",
            r.kind.as_str()
        ));
    }
    for selector in &r.selectors {
        validate_selector(selector).map_err(|reason| format!("selector {selector}: {reason}"))?;
    }
    for filter in r.labels.iter().chain(&r.annotations) {
        if filter.key.is_empty() {
            return Err("a label or annotation filter has an empty key".to_owned());
        }
    }
    for (name, seconds) in [
        ("timeout", r.timeout_seconds),
        ("backoff", r.backoff_seconds),
        ("interval", r.interval_seconds),
        ("initial delay", r.initial_delay_seconds),
        ("idle", r.idle_seconds),
    ] {
        if let Some(seconds) = seconds
            && !(seconds.is_finite() && seconds >= 0.0)
        {
            return Err(format!("the {name} of {seconds} seconds is not a duration"));
        }
    }
    if let Some(param) = &r.param
        && serde_json::from_str::<Value>(param).is_err()
    {
        return Err("param is not valid JSON".to_owned());
    }
    let max_deadline_ms = limits.max_call_deadline.as_millis();
    match r.deadline_ms {
        Some(0) => return Err("a deadline of 0 ms leaves no time to run".to_owned()),
        Some(ms) if u128::from(ms) > max_deadline_ms => {
            return Err(format!(
                "asks for a deadline of {ms} ms, above this host's maximum of {max_deadline_ms} ms \
                 (--max-call-deadline-ms)"
            ));
        }
        _ => {}
    }
    let max_memory_mib = match r.kind {
        HandlerKind::Timer | HandlerKind::Daemon => {
            limits.largest_memory_mib(limits.background_slots)
        }
        HandlerKind::Probe | HandlerKind::Startup | HandlerKind::Cleanup => {
            limits.max_call_memory_mib
        }
        _ => limits.largest_memory_mib(limits.call_slots),
    };
    match r.memory_mib {
        Some(0) => return Err("a memory cap of 0 MiB leaves no room to run".to_owned()),
        Some(mib) if mib > max_memory_mib => {
            return Err(format!(
                "asks for {mib} MiB of memory, above this host's maximum of {max_memory_mib} MiB \
                 (--max-call-memory-mib; a call must also fit in a handler's share of the \
                 call slots: --call-slots, --handler-share, --call-memory-mib)"
            ));
        }
        _ => {}
    }
    Ok(())
}

fn validate_selector(selector: &Selector) -> Result<(), String> {
    let (variant, name) = selector.name.parts();
    if name.trim().is_empty() {
        return Err(format!("the {variant} name is empty"));
    }
    if name.contains(['*', '?', ',', ' ']) {
        return Err(format!(
            "{name:?} is not one resource name (no masks or lists)"
        ));
    }
    if selector.version.as_deref() == Some("") {
        return Err("the version is empty".to_owned());
    }
    Ok(())
}

/// A faithful JSON rendering of what a guest declares, for `kapsel inspect`: every
/// registration with its id, kind, selectors, filters and options. Empty and absent fields
/// are left out; JSON-valued fields (`param`) are embedded as JSON when they parse.
pub(crate) fn describe_json(output: &DescribeOutput) -> Value {
    let mut root = Map::new();
    if !output.sdk_version.is_empty() {
        root.insert("sdk_version".to_owned(), json!(output.sdk_version));
    }
    let handlers: Vec<Value> = output.handlers.iter().map(registration_json).collect();
    root.insert("handlers".to_owned(), Value::Array(handlers));
    if !output.permissions.is_empty() {
        let permissions = output.permissions.iter().map(permission_json).collect();
        root.insert("permissions".to_owned(), Value::Array(permissions));
    }
    Value::Object(root)
}

fn registration_json(r: &Registration) -> Value {
    let mut m = Map::new();
    m.insert("id".to_owned(), json!(r.id));
    m.insert("kind".to_owned(), json!(r.kind.as_str()));
    if !r.selectors.is_empty() {
        m.insert(
            "selectors".to_owned(),
            r.selectors.iter().map(selector_json).collect(),
        );
    }
    if !r.labels.is_empty() {
        m.insert("labels".to_owned(), filters_json(&r.labels));
    }
    if !r.annotations.is_empty() {
        m.insert("annotations".to_owned(), filters_json(&r.annotations));
    }
    if let Some(field) = &r.field {
        m.insert("field".to_owned(), json!(field));
    }
    for (key, matcher) in [
        ("value", &r.value),
        ("old", &r.old_value),
        ("new", &r.new_value),
    ] {
        if let Some(matcher) = matcher {
            m.insert(key.to_owned(), matcher_json(matcher));
        }
    }
    let flags = [
        ("when", r.has_when),
        ("optional", r.optional),
        ("deleted", r.deleted),
        ("sharp", r.sharp),
    ];
    for (key, flag) in flags {
        if flag {
            m.insert(key.to_owned(), Value::Bool(true));
        }
    }
    if let Some(errors) = r.errors {
        m.insert("errors".to_owned(), json!(errors.as_str()));
    }
    if let Some(retries) = r.retries {
        m.insert("retries".to_owned(), json!(retries));
    }
    let seconds = [
        ("timeout_seconds", r.timeout_seconds),
        ("backoff_seconds", r.backoff_seconds),
        ("interval_seconds", r.interval_seconds),
        ("initial_delay_seconds", r.initial_delay_seconds),
        ("idle_seconds", r.idle_seconds),
    ];
    for (key, value) in seconds {
        if let Some(value) = value {
            m.insert(key.to_owned(), json!(value));
        }
    }
    if let Some(param) = &r.param {
        let value = serde_json::from_str(param).unwrap_or_else(|_| json!(param));
        m.insert("param".to_owned(), value);
    }
    if let Some(ms) = r.deadline_ms {
        m.insert("deadline_ms".to_owned(), json!(ms));
    }
    if let Some(mib) = r.memory_mib {
        m.insert("memory_mib".to_owned(), json!(mib));
    }
    Value::Object(m)
}

fn selector_json(s: &Selector) -> Value {
    let mut m = Map::new();
    if let Some(group) = &s.group {
        m.insert("group".to_owned(), json!(group));
    }
    if let Some(version) = &s.version {
        m.insert("version".to_owned(), json!(version));
    }
    let (variant, name) = s.name.parts();
    m.insert(variant.to_owned(), json!(name));
    Value::Object(m)
}

fn filters_json(filters: &[MetaFilter]) -> Value {
    let map = filters
        .iter()
        .map(|f| (f.key.clone(), matcher_json(&f.matcher)))
        .collect();
    Value::Object(map)
}

/// `equals(v)` → `"v"`, `present` → `{"present": true}`, `absent` → `{"absent": true}`,
/// so the common case reads as a plain value.
fn matcher_json(matcher: &Matcher) -> Value {
    match matcher {
        Matcher::Equals(value) => json!(value),
        Matcher::Present => json!({"present": true}),
        Matcher::Absent => json!({"absent": true}),
    }
}

fn permission_json(p: &Permission) -> Value {
    json!({"target": selector_json(&p.target), "verbs": p.verbs})
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runtime::bindings::{ErrorsMode, HandlerKind, ResourceName};

    pub(crate) fn registration(id: &str, kind: HandlerKind) -> Registration {
        Registration {
            id: id.to_owned(),
            kind,
            selectors: vec![Selector {
                group: None,
                version: Some("v1".to_owned()),
                name: ResourceName::Plural("pods".to_owned()),
            }],
            labels: Vec::new(),
            annotations: Vec::new(),
            field: None,
            value: None,
            old_value: None,
            new_value: None,
            has_when: false,
            errors: None,
            timeout_seconds: None,
            retries: None,
            backoff_seconds: None,
            optional: false,
            deleted: false,
            interval_seconds: None,
            initial_delay_seconds: None,
            idle_seconds: None,
            sharp: false,
            param: None,
            deadline_ms: None,
            memory_mib: None,
        }
    }

    #[test]
    fn json_is_faithful_and_omits_empty_fields() {
        let mut full = registration("fn", HandlerKind::Update);
        full.selectors.push(Selector {
            group: Some("kopf.dev".to_owned()),
            version: None,
            name: ResourceName::Any("kex".to_owned()),
        });
        full.labels = vec![
            MetaFilter {
                key: "app".to_owned(),
                matcher: Matcher::Equals("x".to_owned()),
            },
            MetaFilter {
                key: "skip".to_owned(),
                matcher: Matcher::Absent,
            },
        ];
        full.field = Some("spec.size".to_owned());
        full.new_value = Some(Matcher::Present);
        full.has_when = true;
        full.errors = Some(ErrorsMode::Permanent);
        full.retries = Some(3);
        full.backoff_seconds = Some(1.5);
        full.param = Some(r#"{"a":1}"#.to_owned());
        full.deadline_ms = Some(200);
        let output = DescribeOutput {
            sdk_version: "0.1.0".to_owned(),
            handlers: vec![full, registration("plain", HandlerKind::Event)],
            permissions: vec![Permission {
                target: Selector {
                    group: Some(String::new()),
                    version: Some("v1".to_owned()),
                    name: ResourceName::Plural("configmaps".to_owned()),
                },
                verbs: vec!["get".to_owned()],
            }],
        };
        let expected = json!({
            "sdk_version": "0.1.0",
            "handlers": [
                {
                    "id": "fn", "kind": "update",
                    "selectors": [{"version": "v1", "plural": "pods"}, {"group": "kopf.dev", "any": "kex"}],
                    "labels": {"app": "x", "skip": {"absent": true}},
                    "field": "spec.size",
                    "new": {"present": true},
                    "when": true,
                    "errors": "permanent",
                    "retries": 3,
                    "backoff_seconds": 1.5,
                    "param": {"a": 1},
                    "deadline_ms": 200
                },
                {"id": "plain", "kind": "event", "selectors": [{"version": "v1", "plural": "pods"}]}
            ],
            "permissions": [
                {"target": {"group": "", "version": "v1", "plural": "configmaps"}, "verbs": ["get"]}
            ]
        });
        assert_eq!(describe_json(&output), expected);
    }

    #[test]
    fn validation_names_the_handler_and_the_problem() {
        let output = |handlers| DescribeOutput {
            sdk_version: String::new(),
            handlers,
            permissions: Vec::new(),
        };
        let limits = Limits::default();
        let ok = output(vec![
            registration("a", HandlerKind::Create),
            // Stacked attributes repeat ids, also across kinds.
            registration("a", HandlerKind::Update),
        ]);
        assert_eq!(validate(&ok, &limits), Ok(()));

        let error = validate(&output(vec![registration("", HandlerKind::Event)]), &limits);
        assert_eq!(error, Err("handler #1 (event): the id is empty".to_owned()));

        let mut no_selector = registration("x", HandlerKind::Event);
        no_selector.selectors.clear();
        let error = validate(&output(vec![no_selector]), &limits).unwrap_err();
        assert!(
            error.contains("needs at least one resource selector"),
            "{error}"
        );

        let mut glob = registration("x", HandlerKind::Event);
        glob.selectors[0].name = ResourceName::Plural("pods,services".to_owned());
        let error = validate(&output(vec![glob]), &limits).unwrap_err();
        assert!(error.contains("not one resource name"), "{error}");

        let mut greedy = registration("big", HandlerKind::Event);
        greedy.memory_mib = Some(1024);
        let error = validate(&output(vec![greedy]), &limits).unwrap_err();
        assert!(
            error.contains("\"big\"") && error.contains("maximum of 512 MiB"),
            "{error}"
        );

        let mut slow = registration("slow", HandlerKind::Event);
        slow.deadline_ms = Some(3_600_000);
        let error = validate(&output(vec![slow]), &limits).unwrap_err();
        assert!(
            error.contains("\"slow\"")
                && error.contains("deadline of 3600000 ms")
                && error.contains("maximum of 60000 ms"),
            "{error}"
        );

        let mut nan = registration("x", HandlerKind::Timer);
        nan.interval_seconds = Some(f64::NAN);
        assert!(validate(&output(vec![nan]), &limits).is_err());
    }
}
