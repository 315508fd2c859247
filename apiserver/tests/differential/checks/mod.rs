//! Every check of the differential suite: a named sequence of requests, sent alike to both
//! servers, each in its own namespace. A check never branches on an answer (both servers
//! get the same requests); it may carry a value forward (a resourceVersion).

mod apply;
mod configmaps;
mod custom;
mod discovery;
mod errors;
mod lifecycle;
mod patches;
mod selection;
mod watching;

use crate::run::Run;
use futures::future::BoxFuture;

/// A check: its name (the key of the known differences) and its requests.
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) run: fn(&mut Run) -> BoxFuture<'_, ()>,
}

/// All checks, in the order they run.
pub(crate) const ALL: &[Check] = &[
    Check {
        name: "configmap-crud",
        run: configmaps::crud,
    },
    Check {
        name: "configmap-generate-name",
        run: configmaps::generate_name,
    },
    Check {
        name: "configmap-dry-run",
        run: configmaps::dry_run,
    },
    Check {
        name: "delete-preconditions",
        run: configmaps::preconditions,
    },
    Check {
        name: "table",
        run: configmaps::table,
    },
    Check {
        name: "errors-not-found",
        run: errors::not_found,
    },
    Check {
        name: "errors-conflict",
        run: errors::conflict,
    },
    Check {
        name: "errors-invalid",
        run: errors::invalid,
    },
    Check {
        name: "errors-bad-request",
        run: errors::bad_request,
    },
    Check {
        name: "merge-patch",
        run: patches::merge,
    },
    Check {
        name: "json-patch",
        run: patches::json_patch,
    },
    Check {
        name: "strategic-merge-patch",
        run: patches::strategic,
    },
    Check {
        name: "server-side-apply",
        run: apply::apply,
    },
    Check {
        name: "apply-conflicts",
        run: apply::conflicts,
    },
    Check {
        name: "label-selectors",
        run: selection::labels,
    },
    Check {
        name: "field-selectors",
        run: selection::fields,
    },
    Check {
        name: "list-paging",
        run: selection::paging,
    },
    Check {
        name: "watch-from-resource-version",
        run: watching::from_resource_version,
    },
    Check {
        name: "watch-initial-events",
        run: watching::initial_events,
    },
    Check {
        name: "watch-too-old",
        run: watching::too_old,
    },
    Check {
        name: "watch-selected",
        run: watching::selected,
    },
    Check {
        name: "finalizers",
        run: lifecycle::finalizers,
    },
    Check {
        name: "namespaces",
        run: lifecycle::namespaces,
    },
    Check {
        name: "crd",
        run: custom::crd,
    },
    Check {
        name: "custom-objects",
        run: custom::objects,
    },
    Check {
        name: "custom-validation",
        run: custom::validation,
    },
    Check {
        name: "custom-generation",
        run: custom::generation,
    },
    Check {
        name: "discovery",
        run: discovery::documents,
    },
    Check {
        name: "aggregated-discovery",
        run: discovery::aggregated,
    },
];
