//! The host's one `bindgen!` over `wit/` (world `kapsel:operator/guest`), and small
//! conversions of the generated types.

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "guest",
        // Every import may trap, but only on a host bug: guest-visible failures travel in
        // the WIT `result`s. Imports that reach the network or sleep are async.
        imports: {
            "kapsel:operator/host.post-event": async | trappable,
            "kapsel:operator/host.get": async | trappable,
            "kapsel:operator/host.list": async | trappable,
            "kapsel:operator/host.create": async | trappable,
            "kapsel:operator/host.patch": async | trappable,
            "kapsel:operator/host.delete": async | trappable,
            "kapsel:operator/host.sleep-unless-stopped": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        // Tests and the operator compare replies and registrations.
        additional_derives: [PartialEq],
    });
}

pub(super) use generated::kapsel::operator::admission::Host as AdmissionImports;
pub(crate) use generated::kapsel::operator::admission::{
    Declaration as AdmissionDeclaration, Request as AdmissionRequest, Webhook,
};
pub(crate) use generated::kapsel::operator::host::{
    Host as HostImports, Level, StopReasons as WitStopReasons,
};
pub(super) use generated::kapsel::operator::login::Host as LoginImports;
pub(super) use generated::kapsel::operator::resources::Host as ResourcesImports;
pub(crate) use generated::kapsel::operator::resources::ResourceInfo;
pub(super) use generated::kapsel::operator::selection::Host as SelectionImports;
pub(super) use generated::kapsel::operator::settings::Host as SettingsImports;
pub(super) use generated::kapsel::operator::spawning::Host as SpawningImports;
pub(crate) use generated::kapsel::operator::spawning::Options as SpawningOptions;
pub(super) use generated::kapsel::operator::subhandlers::Host as SubhandlerImports;
pub(crate) use generated::kapsel::operator::subhandlers::{Declaration, Due};
pub(super) use generated::kapsel::operator::types::Host as TypesImports;
pub(crate) use generated::kapsel::operator::types::{
    Cause, DescribeOutput, ErrorsMode, EventType, HandlerKind, IndexOutcome, KubeError, Matcher,
    MetaFilter, Outcome, Permission, Registration, Reply, Resource, ResourceName, Selector,
};
pub(super) use generated::{Guest as GuestWorld, GuestPre as GuestWorldPre};

/// The exports a component must have to be a Kapsel guest.
pub(super) const REQUIRED_EXPORTS: [&str; 4] = ["describe", "invoke", "index", "when"];

/// The WIT package a guest's `host` and `types` imports must come from.
pub(super) const PACKAGE: &str = "kapsel:operator";

impl HandlerKind {
    /// The kind as the WIT spells it (`event`, `index`, ...), for logs and JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HandlerKind::Event => "event",
            HandlerKind::Index => "index",
            HandlerKind::Create => "create",
            HandlerKind::Update => "update",
            HandlerKind::Delete => "delete",
            HandlerKind::Resume => "resume",
            HandlerKind::Field => "field",
            HandlerKind::Timer => "timer",
            HandlerKind::Daemon => "daemon",
            HandlerKind::Probe => "probe",
            HandlerKind::Startup => "startup",
            HandlerKind::Cleanup => "cleanup",
        }
    }

    /// Operator-level kinds have no resource selectors.
    pub(crate) fn is_operator_level(self) -> bool {
        matches!(
            self,
            HandlerKind::Probe | HandlerKind::Startup | HandlerKind::Cleanup
        )
    }
}

impl Level {
    /// The level as the WIT spells it (`debug`, `info`, `warning`, `error`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

impl ErrorsMode {
    /// The mode as the WIT spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorsMode::Temporary => "temporary",
            ErrorsMode::Permanent => "permanent",
            ErrorsMode::Ignored => "ignored",
        }
    }
}

impl ResourceName {
    /// The variant's name as the WIT spells it, and the value.
    pub(crate) fn parts(&self) -> (&'static str, &str) {
        match self {
            ResourceName::Any(name) => ("any", name),
            ResourceName::Kind(name) => ("kind", name),
            ResourceName::Plural(name) => ("plural", name),
            ResourceName::Singular(name) => ("singular", name),
            ResourceName::Shortcut(name) => ("shortcut", name),
            ResourceName::Category(name) => ("category", name),
        }
    }
}

impl std::fmt::Display for Selector {
    /// Kopf's dotted spelling: `name.version.group`, leaving out what is unset.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (variant, name) = self.name.parts();
        if variant == "any" {
            f.write_str(name)?;
        } else {
            write!(f, "{variant}={name}")?;
        }
        if let Some(version) = &self.version {
            write!(f, ".{version}")?;
        }
        match self.group.as_deref() {
            Some("") => f.write_str(" (core group)"),
            Some(group) => write!(f, ".{group}"),
            None => Ok(()),
        }
    }
}

impl KubeError {
    /// An error for a request that never reached the API server.
    pub(crate) fn local(reason: &str, message: impl Into<String>) -> Self {
        Self {
            code: 0,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}
