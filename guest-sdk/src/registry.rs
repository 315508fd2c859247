//! The guest's handler registry, filled by static constructors that the handler
//! attributes emit, and the dispatch of host calls to handlers. Hidden: only the
//! generated code names these items (through `kapsel::__private`).

use std::sync::{Mutex, OnceLock, PoisonError};

use serde::Serialize;

use crate::admission::AdmissionOptions;
pub use crate::error::ErrorsMode;
use crate::outcome::error_outcome;
pub use crate::outcome::{Outcome, result_outcome, value_outcome};
pub use crate::permissions::{Permission, PermissionEntry, register_permission};
pub use crate::selector::{ResourceName, Selector};
use crate::{Cause, Error, HandlerKind};

/// WIT `matcher`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Matcher {
    Equals(String),
    Present,
    Absent,
}

/// WIT `meta-filter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetaFilter {
    pub key: String,
    pub matcher: Matcher,
}

impl MetaFilter {
    pub fn new(key: &str, matcher: Matcher) -> Self {
        Self {
            key: key.to_owned(),
            matcher,
        }
    }
}

/// WIT `registration`: one attribute on one function.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Registration {
    pub id: String,
    pub kind: HandlerKind,
    pub selectors: Vec<Selector>,
    pub labels: Vec<MetaFilter>,
    pub annotations: Vec<MetaFilter>,
    pub field: Option<String>,
    pub value: Option<Matcher>,
    pub old_value: Option<Matcher>,
    pub new_value: Option<Matcher>,
    pub has_when: bool,
    pub errors: Option<ErrorsMode>,
    pub timeout_seconds: Option<f64>,
    pub retries: Option<u32>,
    pub backoff_seconds: Option<f64>,
    pub optional: bool,
    pub deleted: bool,
    pub interval_seconds: Option<f64>,
    pub initial_delay_seconds: Option<f64>,
    pub idle_seconds: Option<f64>,
    pub sharp: bool,
    pub param: Option<String>,
    pub deadline_ms: Option<u32>,
    pub memory_mib: Option<u32>,
    // The WIT's `spawning.options`, declared beside the registration.
    pub cancellation_backoff_seconds: Option<f64>,
    pub cancellation_timeout_seconds: Option<f64>,
    pub cancellation_polling_seconds: Option<f64>,
    pub initial_delay_callback: bool,
    /// Selects every resource (the WIT's `selection.everything`), with no selectors.
    pub everything: bool,
    /// Selects the resources its `resource_filter` chooses (the WIT's
    /// `selection.chosen`), with no selectors.
    pub chosen: bool,
    /// An admission handler's options (the WIT's `admission.declaration`), declared beside
    /// the registration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<AdmissionOptions>,
}

impl Registration {
    /// A registration with every option unset.
    pub fn new(id: &str, kind: HandlerKind) -> Self {
        Self {
            id: id.to_owned(),
            kind,
            selectors: Vec::new(),
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
            cancellation_backoff_seconds: None,
            cancellation_timeout_seconds: None,
            cancellation_polling_seconds: None,
            initial_delay_callback: false,
            everything: false,
            chosen: false,
            admission: None,
        }
    }

    /// Whether it has options the WIT's `registration` has no field for: the guest
    /// declares them through `spawning.declare`.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn has_spawning_options(&self) -> bool {
        self.cancellation_backoff_seconds.is_some()
            || self.cancellation_timeout_seconds.is_some()
            || self.cancellation_polling_seconds.is_some()
            || self.initial_delay_callback
    }
}

/// WIT `index-outcome`, with keys and values as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexOutcome {
    Keep,
    Entries(Vec<(String, String)>),
    Temporary(String, f64),
    Permanent(String),
    Failed(String),
}

/// How the registry calls a handler.
#[derive(Clone, Copy)]
pub enum Handler {
    Invoke(fn(&mut Cause) -> Outcome),
    Index(fn(&mut Cause) -> IndexOutcome),
}

/// One registered attribute.
#[derive(Clone, Copy)]
pub struct Entry {
    /// The handler id (as in the registration).
    pub id: &'static str,
    /// The handler kind (as in the registration).
    pub kind: HandlerKind,
    /// Built when the host asks (`describe`), so that `param`/`value`
    /// expressions are evaluated then.
    pub registration: fn() -> Registration,
    pub handler: Handler,
    pub when: Option<fn(&Cause) -> bool>,
    /// Timers and daemons: `initial_delay = <function>`, seconds for the cause's object.
    pub initial_delay: Option<fn(&Cause) -> f64>,
    /// `resource_filter = <function>`: whether the handler selects a resource.
    pub resource_filter: Option<fn(&crate::ResourceInfo) -> bool>,
    /// `module::function`, to tell two functions sharing an id apart.
    pub function: &'static str,
    /// Where the attribute is written (file, line, column): the declaration order.
    pub source: crate::declaration::Source,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Adds one attribute's handler; called by static constructors at start-up.
pub fn register(entry: Entry) {
    REGISTRY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(entry);
}

/// A copy of the entries in declaration order, so that no lock is held while user
/// code runs.
///
/// Static constructors run in link order, which is not the source order; but Kopf's
/// semantics depend on the declaration order (which handler runs first in a cycle,
/// which of two same-id registrations wins), so the entries are sorted by where their
/// attributes are written: by file, then line and column.
fn entries() -> Vec<Entry> {
    let mut entries = REGISTRY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    crate::declaration::sort(&mut entries, |e| e.source);
    entries
}

/// Every registration, in registration order.
///
/// # Panics
/// When two different functions use the same handler id: the host cannot tell
/// which to call, so the guest refuses to load (the panic fails `describe`). Likewise
/// when a login handler's id is also another kind's (on the wire, a login handler is a
/// startup registration the guest names as a login handler), or an admission handler's
/// (an event registration named as an admission handler).
pub(crate) fn registrations() -> Vec<Registration> {
    let registry = entries();
    for (i, a) in registry.iter().enumerate() {
        for b in &registry[..i] {
            assert!(
                a.id != b.id || a.function == b.function,
                "handler id `{}` is used by two functions, `{}` and `{}`: give one an `id = \"...\"`",
                a.id,
                b.function,
                a.function,
            );
            assert!(
                a.id != b.id || (a.kind == HandlerKind::Login) == (b.kind == HandlerKind::Login),
                "handler id `{}` is a login handler's and another kind's: give one an `id = \"...\"`",
                a.id,
            );
            assert!(
                a.id != b.id || is_admission(a.kind) == is_admission(b.kind),
                "handler id `{}` is an admission handler's and another kind's: give one an `id = \"...\"`",
                a.id,
            );
        }
    }
    registry
        .iter()
        .map(|entry| (entry.registration)())
        .collect()
}

/// How the login handlers are named to the host, set by the first login attribute: a
/// guest without login handlers does not import the WIT's `login` interface.
static LOGIN_DECLARER: OnceLock<fn(&[String])> = OnceLock::new();

/// Makes `describe` name the login handlers to the host; called by the static
/// constructor of every `#[kapsel::on::login]`.
pub fn enable_logins() {
    LOGIN_DECLARER.get_or_init(|| crate::host::declare_logins);
}

/// Names the login handlers to the host (WIT `login.declare`), if there are any.
#[cfg(target_arch = "wasm32")]
pub(crate) fn declare_logins() {
    let Some(declare) = LOGIN_DECLARER.get() else {
        return;
    };
    let mut ids: Vec<String> = Vec::new();
    for entry in entries() {
        if entry.kind == HandlerKind::Login && !ids.iter().any(|id| id == entry.id) {
            ids.push(entry.id.to_owned());
        }
    }
    declare(&ids);
}

fn is_admission(kind: HandlerKind) -> bool {
    matches!(kind, HandlerKind::Validate | HandlerKind::Mutate)
}

/// How the admission handlers are named to the host, set by the first admission attribute:
/// a guest without them neither imports WIT `admission` nor links what declares them.
static ADMISSION_DECLARER: OnceLock<fn(&[Registration])> = OnceLock::new();

/// Makes `describe` name the admission handlers to the host, and the host's admission
/// calls reachable; called by the static constructor of every `#[kapsel::on::validate]`
/// and `#[kapsel::on::mutate]`.
pub fn enable_admission() {
    crate::admission::enable();
    ADMISSION_DECLARER.get_or_init(|| declare_admission_handlers);
}

/// Names the admission handlers to the host (WIT `admission.declare`), if there are any.
/// Panics as `admission::declarations` does: when two attributes of one id differ.
pub(crate) fn declare_admission(registrations: &[Registration]) {
    if let Some(declare) = ADMISSION_DECLARER.get() {
        declare(registrations);
    }
}

fn declare_admission_handlers(registrations: &[Registration]) {
    let handlers = registrations.iter().filter_map(|r| {
        let options = r.admission.as_ref()?;
        Some((r.id.as_str(), r.kind == HandlerKind::Mutate, options))
    });
    crate::admission::declare(&crate::admission::declarations(handlers));
}

/// How the handlers selecting every resource are named to the host, set by the first
/// attribute with `everything`: a guest without them does not import the WIT's
/// `selection` interface.
static EVERYTHING_DECLARER: OnceLock<fn(&[String])> = OnceLock::new();

/// Makes `describe` name the handlers selecting every resource to the host; called by
/// the static constructor of every attribute with `everything`.
pub fn enable_everything() {
    EVERYTHING_DECLARER.get_or_init(|| crate::host::declare_everything);
}

/// Names the handlers selecting every resource to the host (WIT `selection.everything`),
/// if there are any.
#[cfg(target_arch = "wasm32")]
pub(crate) fn declare_everything(registrations: &[Registration]) {
    let Some(declare) = EVERYTHING_DECLARER.get() else {
        return;
    };
    let mut ids: Vec<String> = Vec::new();
    for r in registrations.iter().filter(|r| r.everything) {
        if !ids.contains(&r.id) {
            ids.push(r.id.clone());
        }
    }
    declare(&ids);
}

/// How the handlers choosing their resources are named to the host, set by the first
/// attribute with `resource_filter`: a guest without them does not import the WIT's
/// `selection` interface for them.
static CHOSEN_DECLARER: OnceLock<fn(&[String])> = OnceLock::new();

/// Makes `describe` name the handlers choosing their resources to the host; called by
/// the static constructor of every attribute with `resource_filter`.
pub fn enable_chosen() {
    CHOSEN_DECLARER.get_or_init(|| crate::host::declare_chosen);
}

/// Names the handlers choosing their resources to the host (WIT `selection.chosen`), if
/// there are any.
#[cfg(target_arch = "wasm32")]
pub(crate) fn declare_chosen(registrations: &[Registration]) {
    let Some(declare) = CHOSEN_DECLARER.get() else {
        return;
    };
    let mut ids: Vec<String> = Vec::new();
    for r in registrations.iter().filter(|r| r.chosen) {
        if !ids.contains(&r.id) {
            ids.push(r.id.clone());
        }
    }
    declare(&ids);
}

/// Whether the handler named by the cause selects `resource` (its `resource_filter`);
/// false for a handler without one.
pub(crate) fn chooses(cause: &Cause, resource: &crate::ResourceInfo) -> bool {
    find(cause, cause.kind == HandlerKind::Index)
        .and_then(|entry| entry.resource_filter)
        .is_some_and(|filter| filter(resource))
}

/// The kind of the first handler registered under `id`.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn kind_of(id: &str) -> Option<HandlerKind> {
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    registry
        .iter()
        .find(|entry| entry.id == id)
        .map(|entry| entry.kind)
}

/// The handler registered under the cause's id, preferring one of its kind.
fn find(cause: &Cause, index: bool) -> Option<Entry> {
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let mut fallback = None;
    for entry in registry.iter() {
        if entry.id != cause.handler_id || matches!(entry.handler, Handler::Index(_)) != index {
            continue;
        }
        if entry.kind == cause.kind {
            return Some(*entry);
        }
        fallback.get_or_insert(*entry);
    }
    fallback
}

/// Calls the handler the cause names.
pub(crate) fn invoke(cause: &mut Cause) -> Outcome {
    let entry = find(cause, false);
    let admission = entry.as_ref().is_some_and(|entry| is_admission(entry.kind));
    if let Some(entry) = &entry
        && (entry.kind == HandlerKind::Login || admission)
    {
        // The host calls a login handler as the startup registration it is on the wire,
        // an admission handler as the event registration it is.
        cause.kind = entry.kind;
    }
    let outcome = match entry.map(|entry| entry.handler) {
        Some(Handler::Invoke(handler)) => crate::subhandlers::call_handler(cause, handler),
        _ => Outcome::Permanent(format!("unknown handler `{}`", cause.handler_id)),
    };
    // Kopf's AdmissionError: the refusal's code goes to the host beside the failure.
    if let Outcome::Rejected(_, code) = &outcome
        && admission
    {
        crate::admission::reject(*code);
    }
    outcome
}

/// Calls the index handler the cause names.
pub(crate) fn index(cause: &mut Cause) -> IndexOutcome {
    match find(cause, true).map(|entry| entry.handler) {
        Some(Handler::Index(handler)) => handler(cause),
        _ => IndexOutcome::Permanent(format!("unknown index handler `{}`", cause.handler_id)),
    }
}

/// Evaluates the `when` filter of the handler the cause names (`true` when it
/// has none: the guest does not filter what it does not know).
pub(crate) fn when(cause: &Cause) -> bool {
    let is_index = cause.kind == HandlerKind::Index;
    find(cause, is_index)
        .and_then(|entry| entry.when)
        .is_none_or(|when| when(cause))
}

/// The initial delay of the timer or daemon the cause names, when a function computes it.
pub(crate) fn initial_delay(cause: &Cause) -> Option<f64> {
    find(cause, false)
        .and_then(|entry| entry.initial_delay)
        .map(|delay| delay(cause))
}

/// JSON text of a `param`/`value` expression.
///
/// # Panics
/// When the value cannot be serialised (a map with non-string keys): this runs
/// in `describe`, so the guest fails to load with the message.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    match serde_json::to_string(value) {
        Ok(json) => json,
        Err(error) => panic!("a handler option cannot be serialised to JSON: {error}"),
    }
}

/// The index outcome of an index handler's error.
pub fn index_error<E: Into<Error>>(error: E) -> IndexOutcome {
    match error_outcome(error.into()) {
        Outcome::Temporary(message, delay) => IndexOutcome::Temporary(message, delay),
        Outcome::Permanent(message) | Outcome::Rejected(message, _) => {
            IndexOutcome::Permanent(message)
        }
        Outcome::Failed(message) | Outcome::Done(Some(message)) => IndexOutcome::Failed(message),
        Outcome::Done(None) => IndexOutcome::Keep,
    }
}

/// What an index handler's return value means (KOPF.md §7), chosen by
/// autoref specialisation: maps with any serialisable keys become entries
/// keyed by each key's JSON (so tuple and integer keys work); anything else goes
/// through serde: `null` keeps the object's values, an object becomes entries,
/// any other value is stored under the key `null`.
pub mod index_ret {
    use std::cell::Cell;
    use std::collections::{BTreeMap, HashMap};
    use std::hash::BuildHasher;

    use serde::Serialize;
    use serde_json::Value;

    use super::IndexOutcome;

    /// The returned value, taken out once by the chosen conversion.
    pub struct IndexRet<T>(Cell<Option<T>>);

    impl<T> IndexRet<T> {
        pub fn new(value: T) -> Self {
            Self(Cell::new(Some(value)))
        }

        fn take(&self) -> Option<T> {
            self.0.take()
        }
    }

    fn entries<K: Serialize, V: Serialize>(pairs: impl Iterator<Item = (K, V)>) -> IndexOutcome {
        let mut out = Vec::new();
        for (key, value) in pairs {
            match (serde_json::to_string(&key), serde_json::to_string(&value)) {
                (Ok(key), Ok(value)) => out.push((key, value)),
                (Err(error), _) | (_, Err(error)) => {
                    return IndexOutcome::Failed(format!("the index entry is not JSON: {error}"));
                }
            }
        }
        IndexOutcome::Entries(out)
    }

    /// Maps: entries keyed by each key's JSON.
    pub trait ViaKeyed {
        fn __kapsel_index(&self) -> IndexOutcome;
    }

    impl<K: Serialize, V: Serialize> ViaKeyed for IndexRet<BTreeMap<K, V>> {
        fn __kapsel_index(&self) -> IndexOutcome {
            self.take()
                .map_or(IndexOutcome::Keep, |map| entries(map.into_iter()))
        }
    }

    impl<K: Serialize, V: Serialize, S: BuildHasher> ViaKeyed for IndexRet<HashMap<K, V, S>> {
        fn __kapsel_index(&self) -> IndexOutcome {
            self.take()
                .map_or(IndexOutcome::Keep, |map| entries(map.into_iter()))
        }
    }

    impl<K: Serialize, V: Serialize> ViaKeyed for IndexRet<Option<BTreeMap<K, V>>> {
        fn __kapsel_index(&self) -> IndexOutcome {
            self.take()
                .flatten()
                .map_or(IndexOutcome::Keep, |map| entries(map.into_iter()))
        }
    }

    impl<K: Serialize, V: Serialize, S: BuildHasher> ViaKeyed for IndexRet<Option<HashMap<K, V, S>>> {
        fn __kapsel_index(&self) -> IndexOutcome {
            self.take()
                .flatten()
                .map_or(IndexOutcome::Keep, |map| entries(map.into_iter()))
        }
    }

    /// Anything else, through serde.
    pub trait ViaSerialize {
        fn __kapsel_index(&self) -> IndexOutcome;
    }

    impl<T: Serialize> ViaSerialize for &IndexRet<T> {
        fn __kapsel_index(&self) -> IndexOutcome {
            let Some(value) = self.take() else {
                return IndexOutcome::Keep;
            };
            match serde_json::to_value(&value) {
                Ok(Value::Null) => IndexOutcome::Keep,
                Ok(Value::Object(map)) => entries(map.into_iter()),
                Ok(other) => entries(std::iter::once((Value::Null, other))),
                Err(error) => IndexOutcome::Failed(format!("the index value is not JSON: {error}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde_json::json;

    use super::index_ret::{IndexRet, ViaKeyed as _, ViaSerialize as _};
    use super::*;

    #[test]
    #[allow(
        clippy::needless_borrow,
        reason = "written as the macro writes it: autoref specialisation"
    )]
    fn index_results_follow_kopf() {
        let keep: Option<u32> = None;
        assert_eq!((&IndexRet::new(keep)).__kapsel_index(), IndexOutcome::Keep);
        assert_eq!((&IndexRet::new(())).__kapsel_index(), IndexOutcome::Keep);
        let nones = BTreeMap::from([("key", Option::<u32>::None)]);
        assert_eq!(
            (&IndexRet::new(nones)).__kapsel_index(),
            IndexOutcome::Entries(vec![("\"key\"".into(), "null".into())])
        );
        let tuples = HashMap::from([(("ns", 1), "a")]);
        assert_eq!(
            (&IndexRet::new(tuples)).__kapsel_index(),
            IndexOutcome::Entries(vec![("[\"ns\",1]".into(), "\"a\"".into())])
        );
        assert_eq!(
            (&IndexRet::new(json!({"k": [1]}))).__kapsel_index(),
            IndexOutcome::Entries(vec![("\"k\"".into(), "[1]".into())])
        );
        assert_eq!(
            (&IndexRet::new("scalar")).__kapsel_index(),
            IndexOutcome::Entries(vec![("null".into(), "\"scalar\"".into())])
        );
    }

    #[test]
    fn index_errors() {
        assert_eq!(
            index_error(crate::PermanentError::new("p")),
            IndexOutcome::Permanent("p".into())
        );
        assert!(matches!(
            index_error("x".parse::<u8>().unwrap_err()),
            IndexOutcome::Failed(_)
        ));
    }
}
