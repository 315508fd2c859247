//! Contract (WIT) types → the operator's own model, in one place.

use super::filters::{Filters, Matcher};
use super::registry::{ErrorsMode, HandlerSpec, Kind};
use super::selector::{Name, Selector};
use crate::runtime;

pub(crate) fn handler_spec(reg: &runtime::Registration) -> HandlerSpec {
    HandlerSpec {
        id: reg.id.clone(),
        kind: kind(reg.kind),
        selectors: reg.selectors.iter().map(selector).collect(),
        filters: Filters {
            labels: reg
                .labels
                .iter()
                .map(|f| (f.key.clone(), matcher(&f.matcher)))
                .collect(),
            annotations: reg
                .annotations
                .iter()
                .map(|f| (f.key.clone(), matcher(&f.matcher)))
                .collect(),
            field: reg.field.as_ref().map(|f| {
                f.split('.')
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            }),
            value: reg.value.as_ref().map(matcher),
        },
        has_when: reg.has_when,
        errors: reg.errors.map(|e| match e {
            runtime::ErrorsMode::Temporary => ErrorsMode::Temporary,
            runtime::ErrorsMode::Permanent => ErrorsMode::Permanent,
            runtime::ErrorsMode::Ignored => ErrorsMode::Ignored,
        }),
        backoff_seconds: reg.backoff_seconds,
        timeout_seconds: reg.timeout_seconds,
        retries: reg.retries,
        optional: reg.optional,
        deleted: reg.deleted,
        old: reg.old_value.as_ref().map(matcher),
        new: reg.new_value.as_ref().map(matcher),
        param: reg.param.clone(),
        schedule: super::registry::Schedule {
            interval: positive(reg.interval_seconds),
            initial_delay: positive(reg.initial_delay_seconds),
            idle: positive(reg.idle_seconds),
            sharp: reg.sharp,
        },
    }
}

/// A number of seconds, if it is one (absent, negative, zero or NaN: not set).
fn positive(seconds: Option<f64>) -> Option<f64> {
    seconds.filter(|s| s.is_finite() && *s > 0.0)
}

pub(crate) fn selector(s: &runtime::Selector) -> Selector {
    let name = match &s.name {
        runtime::ResourceName::Any(n) => Name::Any(n.clone()),
        runtime::ResourceName::Kind(n) => Name::Kind(n.clone()),
        runtime::ResourceName::Plural(n) => Name::Plural(n.clone()),
        runtime::ResourceName::Singular(n) => Name::Singular(n.clone()),
        runtime::ResourceName::Shortcut(n) => Name::Shortcut(n.clone()),
        runtime::ResourceName::Category(n) => Name::Category(n.clone()),
    };
    Selector {
        group: s.group.clone(),
        version: s.version.clone(),
        name,
    }
}

fn matcher(m: &runtime::Matcher) -> Matcher {
    match m {
        runtime::Matcher::Equals(v) => Matcher::Equals(v.clone()),
        runtime::Matcher::Present => Matcher::Present,
        runtime::Matcher::Absent => Matcher::Absent,
    }
}

pub(crate) fn kind(k: runtime::HandlerKind) -> Kind {
    use runtime::HandlerKind as K;
    match k {
        K::Event => Kind::Event,
        K::Index => Kind::Index,
        K::Create => Kind::Create,
        K::Update => Kind::Update,
        K::Delete => Kind::Delete,
        K::Resume => Kind::Resume,
        K::Field => Kind::Field,
        K::Timer => Kind::Timer,
        K::Daemon => Kind::Daemon,
        K::Probe => Kind::Probe,
        K::Startup => Kind::Startup,
        K::Cleanup => Kind::Cleanup,
    }
}

pub(crate) fn wit_kind(k: Kind) -> runtime::HandlerKind {
    use runtime::HandlerKind as K;
    match k {
        Kind::Event => K::Event,
        Kind::Index => K::Index,
        Kind::Create => K::Create,
        Kind::Update => K::Update,
        Kind::Delete => K::Delete,
        Kind::Resume => K::Resume,
        Kind::Field => K::Field,
        Kind::Timer => K::Timer,
        Kind::Daemon => K::Daemon,
        Kind::Probe => K::Probe,
        Kind::Startup => K::Startup,
        Kind::Cleanup => K::Cleanup,
    }
}
