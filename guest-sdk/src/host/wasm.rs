//! The host imports of the wasm build: the WIT `host`, `subhandlers`, `spawning`, `login`,
//! `settings`, `resources`, `selection` and `admission` interfaces the component imports (each only if the guest calls it), and the conversions of the values they exchange.

use super::{AdmissionDeclaration, AdmissionRequest, ApiError, Declaration, Due, Level};
use crate::bindings::kapsel::operator::types as wit;
use crate::bindings::kapsel::operator::{
    admission, host, login, resources, selection, settings, spawning, subhandlers,
};
use crate::error::ErrorsMode;
use crate::outcome::Outcome;
use crate::selector::{ResourceName, Selector};

pub(crate) fn errors_mode_to_wit(mode: ErrorsMode) -> wit::ErrorsMode {
    match mode {
        ErrorsMode::Temporary => wit::ErrorsMode::Temporary,
        ErrorsMode::Permanent => wit::ErrorsMode::Permanent,
        ErrorsMode::Ignored => wit::ErrorsMode::Ignored,
    }
}

pub(crate) fn outcome_to_wit(outcome: Outcome) -> wit::Outcome {
    match outcome {
        Outcome::Done(result) => wit::Outcome::Done(result),
        Outcome::Temporary(message, delay) => wit::Outcome::Temporary((message, delay)),
        Outcome::Permanent(message) | Outcome::Rejected(message, _) => {
            wit::Outcome::Permanent(message)
        }
        Outcome::Failed(message) => wit::Outcome::Failed(message),
    }
}

pub(crate) fn selector_to_wit(selector: &Selector) -> wit::Selector {
    wit::Selector {
        group: selector.group.clone(),
        version: selector.version.clone(),
        name: match &selector.name {
            ResourceName::Any(n) => wit::ResourceName::Any(n.clone()),
            ResourceName::Kind(n) => wit::ResourceName::Kind(n.clone()),
            ResourceName::Plural(n) => wit::ResourceName::Plural(n.clone()),
            ResourceName::Singular(n) => wit::ResourceName::Singular(n.clone()),
            ResourceName::Shortcut(n) => wit::ResourceName::Shortcut(n.clone()),
            ResourceName::Category(n) => wit::ResourceName::Category(n.clone()),
        },
    }
}

fn error(error: wit::KubeError) -> ApiError {
    ApiError::new(error.code, error.reason, error.message)
}

pub(super) fn get(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, ApiError> {
    host::get(&selector_to_wit(target), namespace, name).map_err(error)
}

pub(super) fn list(
    target: &Selector,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<String, ApiError> {
    host::list(&selector_to_wit(target), namespace, label_selector).map_err(error)
}

pub(super) fn create(
    target: &Selector,
    namespace: Option<&str>,
    body: &str,
) -> Result<String, ApiError> {
    host::create(&selector_to_wit(target), namespace, body).map_err(error)
}

pub(super) fn patch(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
    merge_patch: &str,
) -> Result<String, ApiError> {
    host::patch(&selector_to_wit(target), namespace, name, merge_patch).map_err(error)
}

pub(super) fn delete(
    target: &Selector,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    host::delete(&selector_to_wit(target), namespace, name).map_err(error)
}

pub(super) fn log(level: Level, message: &str) {
    let level = match level {
        Level::Debug => host::Level::Debug,
        Level::Info => host::Level::Info,
        Level::Warning => host::Level::Warning,
        Level::Error => host::Level::Error,
    };
    host::log(level, message);
}

pub(super) fn index_lookup(index: &str, key: &str) -> Option<Vec<String>> {
    host::index_lookup(index, key)
}

pub(super) fn index_keys(index: &str) -> Vec<String> {
    host::index_keys(index)
}

pub(super) fn post_event(object: Option<&str>, event_type: &str, reason: &str, message: &str) {
    host::post_event(object, event_type, reason, message);
}

pub(super) fn sleep_unless_stopped(seconds: f64) -> bool {
    host::sleep_unless_stopped(seconds)
}

pub(super) fn stopped() -> crate::StopReasons {
    use crate::StopReasons as Sdk;
    use host::StopReasons as Wit;
    let wit = host::stopped();
    [
        (Wit::DONE, Sdk::DONE),
        (Wit::FILTERS_MISMATCH, Sdk::FILTERS_MISMATCH),
        (Wit::RESOURCE_DELETED, Sdk::RESOURCE_DELETED),
        (Wit::OPERATOR_PAUSING, Sdk::OPERATOR_PAUSING),
        (Wit::OPERATOR_EXITING, Sdk::OPERATOR_EXITING),
        (Wit::DAEMON_SIGNALLED, Sdk::DAEMON_SIGNALLED),
        (Wit::DAEMON_CANCELLED, Sdk::DAEMON_CANCELLED),
        (Wit::DAEMON_ABANDONED, Sdk::DAEMON_ABANDONED),
    ]
    .into_iter()
    .filter(|(flag, _)| wit.contains(*flag))
    .fold(Sdk::empty(), |reasons, (_, reason)| reasons | reason)
}

pub(super) fn latest_body() -> Option<String> {
    host::latest_body()
}

pub(super) fn declare_spawning(r: super::SpawningOptions) {
    spawning::declare(&spawning::Options {
        id: r.id,
        cancellation_backoff_seconds: r.cancellation_backoff_seconds,
        cancellation_timeout_seconds: r.cancellation_timeout_seconds,
        cancellation_polling_seconds: r.cancellation_polling_seconds,
        initial_delay_callback: r.initial_delay_callback,
    });
}

pub(super) fn answer_initial_delay(seconds: f64) {
    spawning::initial_delay(seconds);
}

pub(super) fn execute_subhandlers(
    parent: &str,
    declared: &[Declaration],
) -> Result<Vec<Due>, String> {
    let declared: Vec<subhandlers::Declaration> = declared
        .iter()
        .map(|d| subhandlers::Declaration {
            id: d.id.clone(),
            errors: d.errors.map(errors_mode_to_wit),
            timeout_seconds: d.timeout_seconds,
            retries: d.retries,
            backoff_seconds: d.backoff_seconds,
        })
        .collect();
    let due = subhandlers::execute(parent, &declared)?;
    Ok(due
        .into_iter()
        .map(|d| Due {
            id: d.id,
            retry: d.retry,
            started: d.started,
            runtime_seconds: d.runtime_seconds,
        })
        .collect())
}

pub(super) fn subhandler_finished(id: &str, outcome: &Outcome) {
    subhandlers::finished(id, &outcome_to_wit(outcome.clone()));
}

pub(super) fn subhandlers_pending(parent: &str) -> Option<f64> {
    subhandlers::pending(parent)
}

pub(super) fn declare_logins(ids: &[String]) {
    login::declare(ids);
}

pub(super) fn declare_everything(ids: &[String]) {
    selection::everything(ids);
}

pub(super) fn declare_chosen(ids: &[String]) {
    selection::chosen(ids);
}

pub(super) fn settings() -> String {
    settings::get()
}

pub(super) fn resource_info() -> Option<super::ResourceInfo> {
    resources::current().map(|info| super::ResourceInfo {
        group: info.group,
        version: info.version,
        plural: info.plural,
        kind: info.kind,
        singular: info.singular,
        shortcuts: info.shortcuts,
        categories: info.categories,
        subresources: info.subresources,
        namespaced: info.namespaced,
        preferred: info.preferred,
        verbs: info.verbs,
    })
}

pub(super) fn merge_settings(changes: &str) -> Result<(), String> {
    settings::merge(changes)
}

pub(super) fn declare_admission(declarations: &[AdmissionDeclaration]) {
    let declarations: Vec<admission::Declaration> = declarations
        .iter()
        .map(|d| admission::Declaration {
            id: d.id.clone(),
            webhook: if d.mutating {
                admission::Webhook::Mutating
            } else {
                admission::Webhook::Validating
            },
            operations: d.operations.clone(),
            subresource: d.subresource.clone(),
            persistent: d.persistent,
            side_effects: d.side_effects,
            ignore_failures: d.ignore_failures,
        })
        .collect();
    admission::declare(&declarations);
}

pub(super) fn admission_request() -> Option<AdmissionRequest> {
    admission::current().map(|r| AdmissionRequest {
        uid: r.uid,
        operation: r.operation,
        subresource: r.subresource,
        dry_run: r.dry_run,
        user_info: r.user_info,
        options: r.options,
    })
}

pub(super) fn admission_warn(message: &str) {
    admission::warn(message);
}

pub(super) fn admission_reject(code: u16) {
    admission::reject(code);
}
