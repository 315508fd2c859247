//! What the guests' selectors, permissions and admission handlers need of a cluster,
//! resolved by its discovery as the operator resolves them.

use crate::cluster::{self, DiscoveryError, Resolution, Resource, Selector};
use crate::handlers::{Handler, HandlerSpec, Registry, declaration, undeclared};
use crate::peering::resources as peering;
use crate::runtime::{Guest, HandlerKind};

/// What the guests' selectors and permissions mean on a cluster (KOPF.md §2.3), for
/// `kapsel rbac`.
#[derive(Debug, Default)]
pub(crate) struct GuestNeeds {
    /// Resources the guests' handlers watch, and whether they patch them (results,
    /// progress records, finalizers: every kind but index handlers).
    pub(crate) watched: Vec<(Resource, bool)>,
    /// Resources the guests' Kubernetes calls may use, with the verbs declared.
    pub(crate) permitted: Vec<(Resource, Vec<String>)>,
    /// Selectors that resolve to nothing (or ambiguously), as written.
    pub(crate) unresolved: Vec<String>,
    /// Handlers the operator will not serve on a resource (Secrets not declared), and
    /// what their guest must declare for it.
    pub(crate) refused: Vec<String>,
    /// The peering resources the cluster serves, of both modes.
    pub(crate) peering: Vec<Resource>,
    /// Handlers selecting every resource (`handler "id" of guest "name"`), and whether
    /// they patch what they are handed.
    pub(crate) everything: Vec<(String, bool)>,
    /// Handlers whose guests chose their resources on this cluster.
    pub(crate) chosen: Vec<String>,
    /// Admission handlers (`on::validate`, `on::mutate`): they watch nothing, but their
    /// webhook server manages its configurations and keeps its certificate in a Secret.
    pub(crate) admission: Vec<String>,
}

/// Resolves every handler selector and every permission of `guests` on the cluster.
///
/// # Errors
/// When discovery fails.
pub(crate) async fn guest_needs(
    client: &kube::Client,
    guests: &[Guest],
) -> Result<GuestNeeds, DiscoveryError> {
    let discovered = cluster::scan(client).await?;
    let mut needs = GuestNeeds {
        peering: [true, false]
            .into_iter()
            .flat_map(|clusterwide| peering::served(&discovered, clusterwide))
            .collect(),
        ..GuestNeeds::default()
    };
    let resolve = |selector: &Selector, needs: &mut GuestNeeds| {
        match cluster::resolve(selector, &discovered) {
            Resolution::Resolved(found) => found,
            Resolution::Ambiguous(_) | Resolution::Unresolved => {
                // Named once, however many handlers use it.
                let written = selector.to_string();
                if !needs.unresolved.contains(&written) {
                    needs.unresolved.push(written);
                }
                Vec::new()
            }
        }
    };
    for guest in guests {
        let described = guest.describe();
        for registration in &described.handlers {
            let patches = registration.kind != HandlerKind::Index;
            let named = format!("handler {:?} of guest {:?}", registration.id, guest.name());
            // Admission handlers answer the webhook server's reviews, never a watch.
            if guest.is_admission(&registration.id) {
                needs.admission.push(named);
                continue;
            }
            if guest.selects_everything(&registration.id) {
                needs.everything.push((named.clone(), patches));
            }
            let mut selectors: Vec<Selector> = registration
                .selectors
                .iter()
                .map(Selector::from_wit)
                .collect();
            if guest.chooses_resources(&registration.id) {
                // Asked as the operator asks it.
                let spec = HandlerSpec::of(registration, guest.runtime().limits())
                    .choosing_resources(true);
                let registry = Registry::new(vec![Handler {
                    guest: guest.clone(),
                    spec,
                }]);
                registry.choose(&discovered).await;
                selectors = registry.selectors();
                needs.chosen.push(named);
            }
            for selector in &selectors {
                for resource in resolve(selector, &mut needs) {
                    match undeclared(guest, registration.kind, &resource, &discovered) {
                        Some(verbs) => needs.refused.push(format!(
                            "handler {:?} of guest {:?} on {}: declare {}",
                            registration.id,
                            guest.name(),
                            resource.plural,
                            declaration(&resource, verbs)
                        )),
                        None => needs.watched.push((resource, patches)),
                    }
                }
            }
        }
        for permission in &described.permissions {
            for resource in resolve(&Selector::from_wit(&permission.target), &mut needs) {
                needs.permitted.push((resource, permission.verbs.clone()));
            }
        }
    }
    Ok(needs)
}
