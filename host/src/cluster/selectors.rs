//! Resource selectors and their resolution against discovered resources (KOPF.md §2.2–§2.3).

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

#[cfg(feature = "testing")]
use kube::Client;

use super::discovery::Resource;

/// The name part of a selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Name {
    /// Kind, plural, singular or a short name.
    Any(String),
    Kind(String),
    Plural(String),
    Singular(String),
    Shortcut(String),
    Category(String),
    /// Every resource but Events (Kopf's `kopf.EVERYTHING`).
    Everything,
    /// The resources a guest chose (Kopf's callable selector), never Events.
    Chosen(Choices),
}

/// What a guest answered for one handler about each resource it was asked about (Kopf's
/// callable selector): asked once per resource, before the resources are resolved. Two
/// are the same only when they are one (a handler's).
#[derive(Debug, Clone, Default)]
pub(crate) struct Choices(Arc<Mutex<HashMap<String, bool>>>);

impl Choices {
    /// Whether the guest was asked about `r` already.
    pub(crate) fn answered(&self, r: &Resource) -> bool {
        self.answers().contains_key(&r.key())
    }

    /// Keeps the guest's answer about `r`.
    pub(crate) fn answer(&self, r: &Resource, chosen: bool) {
        self.answers().insert(r.key(), chosen);
    }

    fn chose(&self, r: &Resource) -> bool {
        self.answers().get(&r.key()).copied().unwrap_or(false)
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PartialEq for Choices {
    fn eq(&self, other: &Choices) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Choices {}

impl Hash for Choices {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).hash(state);
    }
}

/// The resources Kopf's `kopf.EVERYTHING` leaves out (group, plural): Events, which
/// handling itself produces, so that serving them would handle without end.
const NOT_EVERYTHING: [(&str, &str); 2] = [("", "events"), ("events.k8s.io", "events")];

/// Whether `r` is one of the resources no selector but a named one reaches: Events.
pub(crate) fn only_named(r: &Resource) -> bool {
    NOT_EVERYTHING
        .iter()
        .any(|(group, plural)| r.group == *group && r.plural == *plural)
}

/// One resource selector, as a guest declared it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Selector {
    /// None: any group; `""`: the core group.
    pub(crate) group: Option<String>,
    /// None: the group's preferred version.
    pub(crate) version: Option<String>,
    pub(crate) name: Name,
}

impl Selector {
    /// The selector a guest declared, as the contract carries it.
    pub(crate) fn from_wit(s: &crate::runtime::Selector) -> Selector {
        use crate::runtime::ResourceName;
        let name = match &s.name {
            ResourceName::Any(n) => Name::Any(n.clone()),
            ResourceName::Kind(n) => Name::Kind(n.clone()),
            ResourceName::Plural(n) => Name::Plural(n.clone()),
            ResourceName::Singular(n) => Name::Singular(n.clone()),
            ResourceName::Shortcut(n) => Name::Shortcut(n.clone()),
            ResourceName::Category(n) => Name::Category(n.clone()),
        };
        Selector {
            group: s.group.clone(),
            version: s.version.clone(),
            name,
        }
    }

    /// Kopf's `kopf.EVERYTHING`: the preferred version of every resource but Events.
    pub(crate) fn everything() -> Selector {
        Selector {
            group: None,
            version: None,
            name: Name::Everything,
        }
    }

    /// Kopf's callable selector: the resources the guest chooses, any version, never
    /// Events; `choices` keeps its answers.
    pub(crate) fn chosen(choices: Choices) -> Selector {
        Selector {
            group: None,
            version: None,
            name: Name::Chosen(choices),
        }
    }

    /// What the guest answered, if this is a callable selector.
    pub(crate) fn choices(&self) -> Option<&Choices> {
        match &self.name {
            Name::Chosen(choices) => Some(choices),
            _ => None,
        }
    }

    /// Whether this selector names one resource (rather than a category, everything or
    /// the resources a guest chose).
    fn is_specific(&self) -> bool {
        !matches!(
            self.name,
            Name::Category(_) | Name::Everything | Name::Chosen(_)
        )
    }

    /// KOPF.md §2.2: group and version must agree (an unversioned selector
    /// only matches preferred versions), and the name must match.
    pub(crate) fn matches(&self, r: &Resource) -> bool {
        if self.group.as_ref().is_some_and(|g| *g != r.group) {
            return false;
        }
        match &self.version {
            Some(v) if *v != r.version => return false,
            // A callable selector sees every version (Kopf skips the preferred-only rule).
            None if !r.preferred && !matches!(self.name, Name::Chosen(_)) => return false,
            _ => {}
        }
        match &self.name {
            Name::Any(n) => {
                *n == r.kind || *n == r.plural || *n == r.singular || r.short_names.contains(n)
            }
            Name::Kind(k) => *k == r.kind,
            Name::Plural(p) => *p == r.plural,
            Name::Singular(s) => *s == r.singular,
            Name::Shortcut(s) => r.short_names.contains(s),
            Name::Category(c) => r.categories.contains(c),
            Name::Everything => !only_named(r),
            Name::Chosen(choices) => !only_named(r) && choices.chose(r),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match &self.name {
            Name::Any(n) => n.clone(),
            Name::Kind(n) => format!("kind={n}"),
            Name::Plural(n) => format!("plural={n}"),
            Name::Singular(n) => format!("singular={n}"),
            Name::Shortcut(n) => format!("shortcut={n}"),
            Name::Category(n) => format!("category={n}"),
            Name::Everything => "EVERYTHING".to_owned(),
            Name::Chosen(_) => "the resources its guest chooses".to_owned(),
        };
        match (&self.group, &self.version) {
            (Some(g), Some(v)) if g.is_empty() => write!(f, "{v}/{name}"),
            (Some(g), Some(v)) => write!(f, "{g}/{v}/{name}"),
            (Some(g), None) if g.is_empty() => write!(f, "core/{name}"),
            (Some(g), None) => write!(f, "{g}/{name}"),
            (None, Some(v)) => write!(f, "{name}.{v}"),
            (None, None) => write!(f, "{name}"),
        }
    }
}

/// What one selector resolved to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolution {
    /// Served resources (one for a specific selector, any number for a category).
    Resolved(Vec<Resource>),
    /// A specific selector matched several resources: none is served.
    Ambiguous(Vec<Resource>),
    /// Nothing matched (yet: a CRD may come later).
    Unresolved,
}

/// KOPF.md §2.3: a specific selector prefers the core group (`pods` is
/// `v1/pods`, not `metrics.k8s.io/pods`); if it still matches several
/// resources it is ambiguous and serves none.
pub(crate) fn resolve(selector: &Selector, discovered: &[Resource]) -> Resolution {
    let mut matched: Vec<Resource> = discovered
        .iter()
        .filter(|r| selector.matches(r))
        .cloned()
        .collect();
    if selector.is_specific() && matched.iter().any(|r| r.group.is_empty()) {
        matched.retain(|r| r.group.is_empty());
    }
    matched.sort();
    matched.dedup();
    match matched.len() {
        0 => Resolution::Unresolved,
        1 => Resolution::Resolved(matched),
        _ if selector.is_specific() => Resolution::Ambiguous(matched),
        _ => Resolution::Resolved(matched),
    }
}

/// Why no one resource answers to a name.
#[cfg(feature = "testing")]
#[derive(Debug, thiserror::Error)]
pub(crate) enum FindError {
    #[error("discovery failed: {0}")]
    Discovery(#[source] super::discovery::Error),
    #[error("{name} is ambiguous: {} (add the group)", candidates.join(", "))]
    Ambiguous {
        name: String,
        /// The resources it could mean, by key.
        candidates: Vec<String>,
    },
    #[error("the cluster serves no resource {name}")]
    Unserved { name: String },
}

/// The one resource a name means, as kubectl and case files write it: a plural, kind,
/// singular or short name, optionally followed by its group (`kopfexamples.kopf.dev`).
#[cfg(feature = "testing")]
pub(crate) async fn find_resource(client: &Client, name: &str) -> Result<Resource, FindError> {
    let (name_part, group) = match name.split_once('.') {
        Some((n, g)) => (n, Some(g.to_owned())),
        None => (name, None),
    };
    let selector = Selector {
        group,
        version: None,
        name: Name::Any(name_part.to_owned()),
    };
    find(client, &selector, name).await
}

/// The resource of objects with this `apiVersion` and `kind`.
#[cfg(feature = "testing")]
pub(crate) async fn find_kind(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Resource, FindError> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let selector = Selector {
        group: Some(group.to_owned()),
        version: Some(version.to_owned()),
        name: Name::Kind(kind.to_owned()),
    };
    find(client, &selector, &format!("{kind} ({api_version})")).await
}

#[cfg(feature = "testing")]
async fn find(client: &Client, selector: &Selector, name: &str) -> Result<Resource, FindError> {
    let discovered = super::discovery::scan(client)
        .await
        .map_err(FindError::Discovery)?;
    let ambiguous = |found: Vec<Resource>| FindError::Ambiguous {
        name: name.to_owned(),
        candidates: found.iter().map(Resource::key).collect(),
    };
    match resolve(selector, &discovered) {
        Resolution::Resolved(found) => <[Resource; 1]>::try_from(found)
            .map(|[one]| one)
            .map_err(ambiguous),
        Resolution::Ambiguous(found) => Err(ambiguous(found)),
        Resolution::Unresolved => Err(FindError::Unserved {
            name: name.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(group: &str, version: &str, plural: &str, kind: &str, preferred: bool) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            singular: kind.to_lowercase(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            verbs: vec!["list".into(), "watch".into()],
            subresources: vec![],
            preferred,
        }
    }

    fn cluster() -> Vec<Resource> {
        let mut kex = res("kopf.dev", "v1", "kopfexamples", "KopfExample", true);
        kex.short_names = vec!["kopfexes".into(), "kex".into()];
        kex.categories = vec!["all".into()];
        let mut pods = res("", "v1", "pods", "Pod", true);
        pods.categories = vec!["all".into()];
        vec![
            pods,
            res("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", true),
            kex,
            res("kopf.dev", "v1beta1", "kopfexamples", "KopfExample", false),
            res("a.example", "v1", "widgets", "Widget", true),
            res("b.example", "v1", "widgets", "Widget", true),
        ]
    }

    fn sel(group: Option<&str>, version: Option<&str>, name: Name) -> Selector {
        Selector {
            group: group.map(Into::into),
            version: version.map(Into::into),
            name,
        }
    }

    fn served(r: Resolution) -> Vec<String> {
        match r {
            Resolution::Resolved(v) => v.iter().map(Resource::key).collect(),
            other => panic!("not resolved: {other:?}"),
        }
    }

    #[test]
    fn core_group_wins_for_specific_names() {
        let r = resolve(&sel(None, None, Name::Any("pods".into())), &cluster());
        assert_eq!(served(r), vec!["pods.v1"]);
    }

    #[test]
    fn any_name_matches_kind_plural_singular_and_short_names() {
        for name in [
            "kopfexamples",
            "kopfexample",
            "KopfExample",
            "kex",
            "kopfexes",
        ] {
            let r = resolve(&sel(None, None, Name::Any(name.into())), &cluster());
            assert_eq!(served(r), vec!["kopfexamples.v1.kopf.dev"], "{name}");
        }
    }

    #[test]
    fn unversioned_selectors_take_the_preferred_version_only() {
        let r = resolve(
            &sel(Some("kopf.dev"), None, Name::Any("kopfexamples".into())),
            &cluster(),
        );
        assert_eq!(served(r), vec!["kopfexamples.v1.kopf.dev"]);
        let r = resolve(
            &sel(
                Some("kopf.dev"),
                Some("v1beta1"),
                Name::Plural("kopfexamples".into()),
            ),
            &cluster(),
        );
        assert_eq!(served(r), vec!["kopfexamples.v1beta1.kopf.dev"]);
    }

    #[test]
    fn ambiguity_and_no_match_serve_nothing() {
        let r = resolve(&sel(None, None, Name::Any("widgets".into())), &cluster());
        assert!(matches!(r, Resolution::Ambiguous(v) if v.len() == 2));
        let r = resolve(&sel(None, None, Name::Any("gadgets".into())), &cluster());
        assert_eq!(r, Resolution::Unresolved);
    }

    #[test]
    fn everything_serves_every_preferred_version_but_events() {
        let mut discovered = cluster();
        discovered.push(res("", "v1", "events", "Event", true));
        discovered.push(res("events.k8s.io", "v1", "events", "Event", true));
        let r = resolve(&Selector::everything(), &discovered);
        assert_eq!(
            served(r),
            // Not kopfexamples.v1beta1 (not preferred), nor either Events.
            vec![
                "pods.v1",
                "widgets.v1.a.example",
                "widgets.v1.b.example",
                "kopfexamples.v1.kopf.dev",
                "pods.v1beta1.metrics.k8s.io",
            ]
        );
    }

    #[test]
    fn chosen_serves_what_the_guest_chose_in_any_version_but_events() {
        let mut discovered = cluster();
        let events = res("", "v1", "events", "Event", true);
        discovered.push(events.clone());
        let choices = Choices::default();
        for r in &discovered {
            assert!(!choices.answered(r));
            // Kopf: `lambda r: r.group == 'kopf.dev' or r.plural == 'events'`.
            choices.answer(r, r.group == "kopf.dev" || r.plural == "events");
        }
        assert!(choices.answered(&events));
        let r = resolve(&Selector::chosen(choices.clone()), &discovered);
        assert_eq!(
            served(r),
            vec!["kopfexamples.v1.kopf.dev", "kopfexamples.v1beta1.kopf.dev"]
        );
        assert_ne!(
            Selector::chosen(choices),
            Selector::chosen(Choices::default())
        );
    }

    #[test]
    fn categories_serve_many() {
        let r = resolve(&sel(None, None, Name::Category("all".into())), &cluster());
        assert_eq!(served(r), vec!["pods.v1", "kopfexamples.v1.kopf.dev"]);
    }

    #[test]
    fn keyword_forms_match_only_their_field() {
        let c = cluster();
        assert_eq!(
            resolve(&sel(None, None, Name::Kind("kex".into())), &c),
            Resolution::Unresolved
        );
        assert_eq!(
            served(resolve(&sel(None, None, Name::Shortcut("kex".into())), &c)),
            vec!["kopfexamples.v1.kopf.dev"]
        );
        assert_eq!(
            served(resolve(
                &sel(Some(""), Some("v1"), Name::Plural("pods".into())),
                &c
            )),
            vec!["pods.v1"]
        );
    }
}
