//! What a guest declares: checking `describe()`'s output at load, and rendering it as JSON
//! for `kapsel inspect`.

use serde_json::{Map, Value, json};

use super::bindings::{
    DescribeOutput, HandlerKind, Matcher, MetaFilter, Permission, Registration, Selector,
    SpawningOptions,
};
use crate::limits::Limits;

/// What is wrong with what a guest declared, in plain words: where (which handler,
/// permission or selector), then what.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeclarationError {
    #[error("handler #{position} ({kind}): {reason}")]
    UnnamedHandler {
        /// From 1, in the order declared.
        position: usize,
        kind: &'static str,
        #[source]
        reason: Box<DeclarationError>,
    },
    #[error("handler {id:?}: {reason}")]
    Handler {
        id: String,
        #[source]
        reason: Box<DeclarationError>,
    },
    #[error("permission on {target}: {reason}")]
    Permission {
        target: String,
        #[source]
        reason: Box<DeclarationError>,
    },
    #[error("permission on {0} names no verbs")]
    NoVerbs(String),
    #[error("selector {selector}: {reason}")]
    Selector {
        selector: String,
        #[source]
        reason: Box<DeclarationError>,
    },
    #[error("the id is empty")]
    EmptyId,
    #[error("a {0} handler takes no resource selectors")]
    NeedsNoSelectors(&'static str),
    #[error("a {0} handler needs at least one resource selector")]
    NeedsSelectors(&'static str),
    #[error("a label or annotation filter has an empty key")]
    EmptyFilterKey,
    #[error("the {name} of {seconds} seconds is not a duration")]
    NotADuration { name: &'static str, seconds: f64 },
    #[error("param is not valid JSON")]
    ParamNotJson,
    #[error("a deadline of 0 ms leaves no time to run")]
    ZeroDeadline,
    #[error(
        "asks for a deadline of {ms} ms, above this host's maximum of {maximum_ms} ms \
         (--max-call-deadline-ms)"
    )]
    DeadlineAboveMaximum { ms: u32, maximum_ms: u128 },
    #[error("a memory cap of 0 MiB leaves no room to run")]
    ZeroMemory,
    #[error(
        "asks for {mib} MiB of memory, above this host's maximum of {maximum_mib} MiB \
         (--max-call-memory-mib; a call must also fit in a handler's share of the \
         call slots: --call-slots, --handler-share, --call-memory-mib)"
    )]
    MemoryAboveMaximum { mib: u32, maximum_mib: u32 },
    #[error("the {0} name is empty")]
    EmptyName(&'static str),
    #[error("{0:?} is not one resource name (no masks or lists)")]
    NotOneName(String),
    #[error("the version is empty")]
    EmptyVersion,
    #[error("timer and daemon options are declared for {0:?}, which is no timer or daemon")]
    OptionsOfNoSpawning(String),
    #[error("timer and daemon options are declared twice for {0:?}")]
    OptionsTwice(String),
    #[error("cancellation options are for daemons only, and {0:?} is a timer")]
    CancellationOfTimer(String),
    #[error(
        "handler {0:?} {1} (selection.{2} names it) but is no handler of resources, or has \
         no registration"
    )]
    SelectionOfNoResourceHandler(String, &'static str, &'static str),
    #[error(
        "handler {0:?} {1} (selection.{2} names it) and names resource selectors too: give \
         one of its attributes another id"
    )]
    SelectionAndSelectors(String, &'static str, &'static str),
    #[error("handler {0:?} both selects every resource and chooses its resources")]
    EverythingAndChosen(String),
    #[error(
        "login handler {0:?} is not a startup registration of the guest (login.declare names those)"
    )]
    NotALoginRegistration(String),
    #[error(
        "admission handler {0:?} is not an event registration of the guest, or is also \
         another kind of handler (admission.declare names event registrations of their own)"
    )]
    NotAnAdmissionRegistration(String),
    #[error("admission handler {0:?} is declared twice")]
    AdmissionTwice(String),
    #[error(
        "admission handler {id:?}: {operation:?} is not an operation (CREATE, UPDATE, DELETE, \
         CONNECT)"
    )]
    AdmissionOperation { id: String, operation: String },
    #[error("admission handler {0:?}: its subresource is empty")]
    AdmissionSubresource(String),
}

/// Checks the further options of timers and daemons (the WIT's `spawning.declare`): each
/// names a timer or daemon once, with durations, and cancellation only for daemons.
pub(super) fn validate_spawning(
    output: &DescribeOutput,
    declared: &[SpawningOptions],
) -> Result<(), DeclarationError> {
    let mut seen = std::collections::HashSet::new();
    for options in declared {
        let id = &options.id;
        let kinds: Vec<HandlerKind> = output
            .handlers
            .iter()
            .filter(|r| &r.id == id)
            .map(|r| r.kind)
            .collect();
        if !kinds
            .iter()
            .any(|k| matches!(k, HandlerKind::Timer | HandlerKind::Daemon))
        {
            return Err(DeclarationError::OptionsOfNoSpawning(id.clone()));
        }
        if !seen.insert(id) {
            return Err(DeclarationError::OptionsTwice(id.clone()));
        }
        let cancellation = [
            ("cancellation backoff", options.cancellation_backoff_seconds),
            ("cancellation timeout", options.cancellation_timeout_seconds),
            ("cancellation polling", options.cancellation_polling_seconds),
        ];
        for (name, seconds) in cancellation {
            if let Some(seconds) = seconds
                && !(seconds.is_finite() && seconds >= 0.0)
            {
                let reason = Box::new(DeclarationError::NotADuration { name, seconds });
                return Err(DeclarationError::Handler {
                    id: id.clone(),
                    reason,
                });
            }
        }
        if cancellation.iter().any(|(_, s)| s.is_some()) && !kinds.contains(&HandlerKind::Daemon) {
            return Err(DeclarationError::CancellationOfTimer(id.clone()));
        }
    }
    Ok(())
}

/// Checks the registrations a guest declared; the error says what is wrong, in plain words.
///
/// Several registrations may share an id (stacked attributes on one function), also with
/// different kinds (Kopf allows `on.create` and `on.update` on one function). The login
/// handlers (`logins`, from `login.declare`) must be startup registrations; the handlers
/// selecting every resource and those choosing theirs (`selections`: from
/// `selection.everything` and `selection.chosen`) must be handlers of resources, each of
/// whose registrations names no selectors, and in one of the two only.
pub(super) fn validate(
    output: &DescribeOutput,
    logins: &[String],
    selections: (&[String], &[String]),
    limits: &Limits,
) -> Result<(), DeclarationError> {
    let (everything, chosen) = selections;
    let named = [
        (everything, "selects every resource", "everything"),
        (chosen, "chooses its resources", "chosen"),
    ];
    for (ids, does, function) in named {
        for id in ids {
            let mut registrations = output.handlers.iter().filter(|r| &r.id == id).peekable();
            if registrations.peek().is_none() {
                return Err(DeclarationError::SelectionOfNoResourceHandler(
                    id.clone(),
                    does,
                    function,
                ));
            }
            for r in registrations {
                if r.kind.is_operator_level() {
                    return Err(DeclarationError::SelectionOfNoResourceHandler(
                        id.clone(),
                        does,
                        function,
                    ));
                }
                if !r.selectors.is_empty() {
                    return Err(DeclarationError::SelectionAndSelectors(
                        id.clone(),
                        does,
                        function,
                    ));
                }
            }
        }
    }
    if let Some(id) = everything.iter().find(|id| chosen.contains(id)) {
        return Err(DeclarationError::EverythingAndChosen(id.clone()));
    }
    for login in logins {
        let registered = output
            .handlers
            .iter()
            .any(|r| &r.id == login && r.kind == HandlerKind::Startup);
        if !registered {
            return Err(DeclarationError::NotALoginRegistration(login.clone()));
        }
    }
    for (position, registration) in output.handlers.iter().enumerate() {
        let selected = everything.contains(&registration.id) || chosen.contains(&registration.id);
        validate_registration(registration, selected, limits).map_err(|reason| {
            let reason = Box::new(reason);
            if registration.id.is_empty() {
                DeclarationError::UnnamedHandler {
                    position: position + 1,
                    kind: registration.kind.as_str(),
                    reason,
                }
            } else {
                DeclarationError::Handler {
                    id: registration.id.clone(),
                    reason,
                }
            }
        })?;
    }
    for permission in &output.permissions {
        validate_selector(&permission.target).map_err(|reason| DeclarationError::Permission {
            target: permission.target.to_string(),
            reason: Box::new(reason),
        })?;
        if permission.verbs.is_empty() {
            return Err(DeclarationError::NoVerbs(permission.target.to_string()));
        }
    }
    Ok(())
}

/// One registration; `selected`: its id selects every resource or those its guest
/// chooses, in place of selectors.
fn validate_registration(
    r: &Registration,
    selected: bool,
    limits: &Limits,
) -> Result<(), DeclarationError> {
    if r.id.trim().is_empty() {
        return Err(DeclarationError::EmptyId);
    }
    if r.kind.is_operator_level() {
        if !r.selectors.is_empty() {
            return Err(DeclarationError::NeedsNoSelectors(r.kind.as_str()));
        }
    } else if r.selectors.is_empty() && !selected {
        return Err(DeclarationError::NeedsSelectors(r.kind.as_str()));
    }
    for selector in &r.selectors {
        validate_selector(selector).map_err(|reason| DeclarationError::Selector {
            selector: selector.to_string(),
            reason: Box::new(reason),
        })?;
    }
    for filter in r.labels.iter().chain(&r.annotations) {
        if filter.key.is_empty() {
            return Err(DeclarationError::EmptyFilterKey);
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
            return Err(DeclarationError::NotADuration { name, seconds });
        }
    }
    if let Some(param) = &r.param
        && serde_json::from_str::<Value>(param).is_err()
    {
        return Err(DeclarationError::ParamNotJson);
    }
    let maximum_ms = limits.max_call_deadline.as_millis();
    match r.deadline_ms {
        Some(0) => return Err(DeclarationError::ZeroDeadline),
        Some(ms) if u128::from(ms) > maximum_ms => {
            return Err(DeclarationError::DeadlineAboveMaximum { ms, maximum_ms });
        }
        _ => {}
    }
    let maximum_mib = match r.kind {
        HandlerKind::Timer | HandlerKind::Daemon => {
            limits.largest_memory_mib(limits.background_slots)
        }
        HandlerKind::Probe | HandlerKind::Startup | HandlerKind::Cleanup => {
            limits.max_call_memory_mib
        }
        _ => limits.largest_memory_mib(limits.call_slots),
    };
    match r.memory_mib {
        Some(0) => return Err(DeclarationError::ZeroMemory),
        Some(mib) if mib > maximum_mib => {
            return Err(DeclarationError::MemoryAboveMaximum { mib, maximum_mib });
        }
        _ => {}
    }
    Ok(())
}

fn validate_selector(selector: &Selector) -> Result<(), DeclarationError> {
    let (variant, name) = selector.name.parts();
    if name.trim().is_empty() {
        return Err(DeclarationError::EmptyName(variant));
    }
    if name.contains(['*', '?', ',', ' ']) {
        return Err(DeclarationError::NotOneName(name.to_owned()));
    }
    if selector.version.as_deref() == Some("") {
        return Err(DeclarationError::EmptyVersion);
    }
    Ok(())
}

/// A faithful JSON rendering of what a guest declares, for `kapsel inspect`: every
/// registration with its id, kind, selectors, filters and options. Empty and absent fields
/// are left out; JSON-valued fields (`param`) are embedded as JSON when they parse. A login
/// handler (one of `logins`) is of kind `login`; a handler selecting every resource (one
/// of `everything`) has `"everything": true`, one whose guest chooses its resources (one
/// of `chosen`) `"chosen": true`.
pub(crate) fn describe_json(
    output: &DescribeOutput,
    spawning: &[SpawningOptions],
    logins: &[String],
    (everything, chosen): (&[String], &[String]),
) -> Value {
    let mut root = Map::new();
    if !output.sdk_version.is_empty() {
        root.insert("sdk_version".to_owned(), json!(output.sdk_version));
    }
    let handlers: Vec<Value> = output
        .handlers
        .iter()
        .map(|r| {
            let login = r.kind == HandlerKind::Startup && logins.contains(&r.id);
            let mut json = registration_json(r, if login { "login" } else { r.kind.as_str() });
            if let Value::Object(m) = &mut json {
                for (ids, key) in [(everything, "everything"), (chosen, "chosen")] {
                    if ids.contains(&r.id) {
                        m.insert(key.to_owned(), Value::Bool(true));
                    }
                }
            }
            if let (Some(options), Value::Object(m)) =
                (spawning.iter().find(|o| o.id == r.id), &mut json)
            {
                add_spawning_json(m, options);
            }
            json
        })
        .collect();
    root.insert("handlers".to_owned(), Value::Array(handlers));
    if !output.permissions.is_empty() {
        let permissions = output.permissions.iter().map(permission_json).collect();
        root.insert("permissions".to_owned(), Value::Array(permissions));
    }
    Value::Object(root)
}

/// A timer's or daemon's further options (`spawning.declare`), beside its registration's.
fn add_spawning_json(m: &mut Map<String, Value>, options: &SpawningOptions) {
    let seconds = [
        (
            "cancellation_backoff_seconds",
            options.cancellation_backoff_seconds,
        ),
        (
            "cancellation_timeout_seconds",
            options.cancellation_timeout_seconds,
        ),
        (
            "cancellation_polling_seconds",
            options.cancellation_polling_seconds,
        ),
    ];
    for (key, value) in seconds {
        if let Some(value) = value {
            m.insert(key.to_owned(), json!(value));
        }
    }
    if options.initial_delay_callback {
        m.insert("initial_delay_callback".to_owned(), Value::Bool(true));
    }
}

fn registration_json(r: &Registration, kind: &str) -> Value {
    let mut m = Map::new();
    m.insert("id".to_owned(), json!(r.id));
    m.insert("kind".to_owned(), json!(kind));
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

    fn options(id: &str) -> SpawningOptions {
        SpawningOptions {
            id: id.to_owned(),
            cancellation_backoff_seconds: None,
            cancellation_timeout_seconds: None,
            cancellation_polling_seconds: None,
            initial_delay_callback: false,
        }
    }

    /// Options declared during `describe` must name a timer or daemon, once, with
    /// durations; cancellation is for daemons only.
    #[test]
    fn spawning_options_are_checked() {
        let output = DescribeOutput {
            sdk_version: "0".to_owned(),
            handlers: vec![
                registration("tick", HandlerKind::Timer),
                registration("run", HandlerKind::Daemon),
                registration("create", HandlerKind::Create),
            ],
            permissions: Vec::new(),
        };
        let check = |declared: &[SpawningOptions]| {
            validate_spawning(&output, declared).map_err(|e| e.to_string())
        };
        let daemon = SpawningOptions {
            cancellation_backoff_seconds: Some(1.0),
            cancellation_timeout_seconds: Some(0.0),
            initial_delay_callback: true,
            ..options("run")
        };
        let timer = SpawningOptions {
            initial_delay_callback: true,
            ..options("tick")
        };
        assert_eq!(check(&[daemon.clone(), timer.clone()]), Ok(()));
        let error = check(&[options("create")]).expect_err("not a timer");
        assert!(
            error.contains("\"create\", which is no timer or daemon"),
            "{error}"
        );
        let error = check(&[options("nothing")]).expect_err("no such handler");
        assert!(error.contains("\"nothing\""), "{error}");
        let error = check(&[timer.clone(), timer]).expect_err("twice");
        assert!(error.contains("twice"), "{error}");
        let cancelled_timer = SpawningOptions {
            cancellation_timeout_seconds: Some(1.0),
            ..options("tick")
        };
        let error = check(&[cancelled_timer]).expect_err("a timer");
        assert!(error.contains("daemons only"), "{error}");
        let negative = SpawningOptions {
            cancellation_polling_seconds: Some(-1.0),
            ..options("run")
        };
        let error = check(&[negative]).expect_err("negative");
        assert!(error.contains("cancellation polling of -1"), "{error}");
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
            handlers: vec![
                full,
                registration("plain", HandlerKind::Event),
                registration("run", HandlerKind::Daemon),
            ],
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
                {"id": "plain", "kind": "event", "selectors": [{"version": "v1", "plural": "pods"}]},
                {
                    "id": "run", "kind": "daemon",
                    "selectors": [{"version": "v1", "plural": "pods"}],
                    "cancellation_timeout_seconds": 2.5,
                    "initial_delay_callback": true
                }
            ],
            "permissions": [
                {"target": {"group": "", "version": "v1", "plural": "configmaps"}, "verbs": ["get"]}
            ]
        });
        let spawning = SpawningOptions {
            cancellation_timeout_seconds: Some(2.5),
            initial_delay_callback: true,
            ..options("run")
        };
        assert_eq!(
            describe_json(&output, &[spawning], &[], (&[], &[])),
            expected
        );
    }

    #[test]
    fn validation_names_the_handler_and_the_problem() {
        let output = |handlers| DescribeOutput {
            sdk_version: String::new(),
            handlers,
            permissions: Vec::new(),
        };
        let limits = Limits::default();
        // The texts users read.
        let check = |declared| {
            validate(&declared, &[], (&[], &[]), &limits).map_err(|error| error.to_string())
        };
        let ok = output(vec![
            registration("a", HandlerKind::Create),
            // Stacked attributes repeat ids, also across kinds.
            registration("a", HandlerKind::Update),
        ]);
        assert_eq!(check(ok), Ok(()));

        let error = check(output(vec![registration("", HandlerKind::Event)]));
        assert_eq!(error, Err("handler #1 (event): the id is empty".to_owned()));

        let mut no_selector = registration("x", HandlerKind::Event);
        no_selector.selectors.clear();
        let error = check(output(vec![no_selector])).unwrap_err();
        assert!(
            error.contains("needs at least one resource selector"),
            "{error}"
        );

        let mut glob = registration("x", HandlerKind::Event);
        glob.selectors[0].name = ResourceName::Plural("pods,services".to_owned());
        let error = check(output(vec![glob])).unwrap_err();
        assert!(error.contains("not one resource name"), "{error}");

        let mut greedy = registration("big", HandlerKind::Event);
        greedy.memory_mib = Some(1024);
        let error = check(output(vec![greedy])).unwrap_err();
        assert_eq!(
            error,
            "handler \"big\": asks for 1024 MiB of memory, above this host's maximum of 512 MiB \
             (--max-call-memory-mib; a call must also fit in a handler's share of the call \
             slots: --call-slots, --handler-share, --call-memory-mib)"
        );

        let mut slow = registration("slow", HandlerKind::Event);
        slow.deadline_ms = Some(3_600_000);
        let error = check(output(vec![slow])).unwrap_err();
        assert_eq!(
            error,
            "handler \"slow\": asks for a deadline of 3600000 ms, above this host's maximum \
             of 60000 ms (--max-call-deadline-ms)"
        );

        let mut nan = registration("x", HandlerKind::Timer);
        nan.interval_seconds = Some(f64::NAN);
        assert!(check(output(vec![nan])).is_err());
    }

    #[test]
    fn handlers_selecting_everything_are_resource_handlers_without_selectors() {
        let mut everything = registration("all_fn", HandlerKind::Event);
        everything.selectors.clear();
        let mut startup = registration("start_fn", HandlerKind::Startup);
        startup.selectors.clear();
        let declared = DescribeOutput {
            sdk_version: String::new(),
            handlers: vec![
                everything,
                startup,
                registration("pods_fn", HandlerKind::Event),
            ],
            permissions: Vec::new(),
        };
        let limits = Limits::default();
        let ids = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>();
        let check = |everything: &[&str]| {
            validate(&declared, &[], (&ids(everything), &[]), &limits).map_err(|e| e.to_string())
        };
        assert_eq!(check(&["all_fn"]), Ok(()));
        // Without the declaration, its empty selectors are refused.
        assert!(
            check(&[])
                .unwrap_err()
                .contains("needs at least one resource selector")
        );
        for wrong in ["start_fn", "nowhere"] {
            let error = check(&[wrong]).unwrap_err();
            assert!(error.contains("is no handler of resources"), "{error}");
        }
        let error = check(&["pods_fn"]).unwrap_err();
        assert!(error.contains("names resource selectors too"), "{error}");
        // A handler chooses its resources the same way, and does one or the other.
        let chosen = |ids: &[String]| {
            validate(&declared, &[], (&[], ids), &limits).map_err(|e| e.to_string())
        };
        assert_eq!(chosen(&ids(&["all_fn"])), Ok(()));
        let error = chosen(&ids(&["pods_fn"])).unwrap_err();
        assert!(
            error.contains("chooses its resources (selection.chosen"),
            "{error}"
        );
        let both = validate(
            &declared,
            &[],
            (&ids(&["all_fn"]), &ids(&["all_fn"])),
            &limits,
        );
        assert!(
            both.unwrap_err()
                .to_string()
                .contains("both selects every resource")
        );
        let rendered = describe_json(&declared, &[], &[], (&ids(&["all_fn"]), &[]));
        assert_eq!(rendered["handlers"][0]["everything"], true);
        assert!(rendered["handlers"][0].get("selectors").is_none());
    }

    #[test]
    fn login_handlers_are_startup_registrations_and_render_as_logins() {
        let mut login = registration("login_fn", HandlerKind::Startup);
        login.selectors.clear();
        let declared = DescribeOutput {
            sdk_version: String::new(),
            handlers: vec![login, registration("create_fn", HandlerKind::Create)],
            permissions: Vec::new(),
        };
        let limits = Limits::default();
        let logins = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>();
        assert!(validate(&declared, &logins(&["login_fn"]), (&[], &[]), &limits).is_ok());
        for wrong in ["create_fn", "nowhere"] {
            let error = validate(&declared, &logins(&[wrong]), (&[], &[]), &limits).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "login handler {wrong:?} is not a startup registration of the guest \
                     (login.declare names those)"
                )
            );
        }
        let rendered = describe_json(&declared, &[], &logins(&["login_fn"]), (&[], &[]));
        assert_eq!(rendered["handlers"][0]["kind"], "login");
        assert_eq!(rendered["handlers"][1]["kind"], "create");
        assert_eq!(
            describe_json(&declared, &[], &[], (&[], &[]))["handlers"][0]["kind"],
            "startup"
        );
    }
}
