//! `kapsel rbac GUEST...`: the RBAC manifests an operator of these guests needs
//! (KOPF.md §14), worked out from what the guests declare, resolved on a cluster.
//!
//! What is granted, and nothing more:
//! - the framework's needs: observing CRDs; posting Events; the peering resource of the
//!   mode in use (`clusterkopfpeerings` cluster-wide, `kopfpeerings` for `-n`, none
//!   `--standalone`) in each group the cluster serves it in (`kopf.dev`, the legacy
//!   `zalando.org`; `kopf.dev` when neither); listing namespaces when `-n` has globs;
//! - every resource a handler watches: `list`, `watch`, and `patch` when any handler
//!   but an index writes to its objects (results, progress records, finalizers), with
//!   `patch` on `<plural>/status` too when the resource has a status subresource (the
//!   gap in Kopf's documented example);
//! - every resource the guests' `kapsel::permit!` declarations name, with their verbs;
//! - for a handler selecting every resource (Kopf's `kopf.EVERYTHING`): `list` and
//!   `watch` on every resource of every group (`*`), cluster-wide, and `patch` on them and
//!   their `status` unless it is an index. A wildcard, because the operator serves the
//!   CRDs created after it started too; it includes Secrets, which the operator still
//!   hands such a handler only with its guest's `kapsel::permit!` for them (a comment at
//!   the top says so);
//! - for a handler whose guest chooses its resources (Kopf's callable selector): what
//!   the guest chooses of what the cluster serves now, asked as the operator asks it (a
//!   comment at the top says that CRDs created later are not covered);
//! - for admission handlers (`on::validate`, `on::mutate`), which watch nothing: `create`
//!   on `validatingwebhookconfigurations` and `mutatingwebhookconfigurations`, and `patch`
//!   on those of `--admission-managed`'s name (any without the flag); `create` on `secrets`
//!   and `get`, `update` on the one of a generated certificate (`--admission-secret`, by
//!   default `kapsel run`'s), in its namespace.
//!
//! Where: a ServiceAccount, and a ClusterRole with its binding for what is cluster-wide.
//! An operator restricted to named namespaces (`-n a -n b`) gets its namespaced grants
//! as a Role and RoleBinding in each; with globs (`-n 'team-*'`) the namespaces are not
//! known in advance, so those grants are cluster-wide.
//!
//! Selectors are resolved by discovery, as the operator resolves them when it runs, so
//! the CRDs must exist on the cluster asked (`kapsel rbac --crd` asks an in-process one
//! that serves the given CRDs); selectors that resolve to nothing are listed in a
//! comment at the top rather than guessed. A handler selecting Secrets without its
//! guest's `kapsel::permit!` for them is not served by the operator, so nothing is
//! granted for it either (listed in a comment too): the grants are exactly what the
//! operator lets the guests do.
//!
//! The modules, bottom to top: `needs` (what the guests need, resolved on a cluster),
//! `grants` (the rules that needs, where), `manifests` (the YAML).

mod grants;
mod manifests;
mod needs;
#[cfg(test)]
mod tests;

pub(crate) use grants::{Admission, Mode};
pub(crate) use manifests::{Subject, manifests};
pub(crate) use needs::guest_needs;
