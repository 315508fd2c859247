//! The admission handlers of the loaded guests, and which of them answer a review: by the
//! URL path the review came to (one handler's, or the root for all), the webhook kind,
//! the operation, the subresource, the resource and the handler's data filters (its
//! `when` filter is the guest's: asked by `dispatch`).

use serde_json::Value;

use super::review::Review;
use crate::cluster::Resource;
use crate::handlers::HandlerSpec;
use crate::limits::Limits;
use crate::runtime::{AdmissionDeclaration, Guest, HandlerKind, Webhook};

/// One admission handler of one guest: its declaration and its registrations.
#[derive(Debug, Clone)]
pub(crate) struct AdmissionHandler {
    pub(crate) guest: Guest,
    pub(crate) declaration: AdmissionDeclaration,
    /// Its event registrations (several when attributes are stacked), as the host uses them.
    pub(crate) specs: Vec<HandlerSpec>,
}

impl AdmissionHandler {
    /// Its URL path below the server's root: `<guest>/<id>`, each part percent-encoded.
    pub(crate) fn path(&self) -> String {
        format!(
            "{}/{}",
            percent_encoded(self.guest.name()),
            percent_encoded(&self.declaration.id)
        )
    }

    pub(crate) fn id(&self) -> &str {
        &self.declaration.id
    }

    pub(crate) fn is_mutating(&self) -> bool {
        self.declaration.webhook == Webhook::Mutating
    }

    /// Whether `resource` is one of its resources: a registration's selector matches it.
    pub(crate) fn selects(&self, resource: &Resource) -> bool {
        self.specs
            .iter()
            .any(|spec| spec.selectors.iter().any(|s| s.matches(resource)))
    }

    /// Whether it answers `review` of `resource`, as far as the host can tell without
    /// the guest (its `when` filter aside): the operation, the subresource, the resource,
    /// and its label, annotation and field filters on the body.
    ///
    /// The operations are checked here too, not only in the webhooks' rules (as Kopf does),
    /// so that a review sent to the root path reaches only the handlers declared for its
    /// operation. A mutating handler sees a DELETE only when declared for DELETE alone
    /// (Kopf's rule: mutating an object being deleted is rarely meant).
    pub(crate) fn answers(&self, review: &Review, resource: &Resource) -> bool {
        let operations = &self.declaration.operations;
        let operation = operations.is_empty() || operations.contains(&review.operation);
        let deletion = review.operation == "DELETE";
        let only_deletion = !operations.is_empty() && operations.iter().all(|o| o == "DELETE");
        let subresource = match self.declaration.subresource.as_deref() {
            Some("*") => true,
            declared => declared == review.subresource.as_deref(),
        };
        operation
            && (!self.is_mutating() || !deletion || only_deletion)
            && subresource
            && self.specs.iter().any(|spec| {
                spec.selectors.iter().any(|s| s.matches(resource))
                    // The body is parsed only for a handler that filters it.
                    && (spec.filters.is_empty() || spec.filters.matches_body(review.body()))
            })
    }

    /// Whether its guest must be asked through `when` too.
    pub(crate) fn has_when(&self) -> bool {
        self.specs.iter().any(|spec| spec.has_when)
    }
}

/// Every admission handler of `guests`, in the order they declared them.
pub(crate) fn admission_handlers(guests: &[Guest], limits: &Limits) -> Vec<AdmissionHandler> {
    guests
        .iter()
        .flat_map(|guest| {
            guest
                .admissions()
                .iter()
                .map(|declaration| AdmissionHandler {
                    guest: guest.clone(),
                    declaration: declaration.clone(),
                    specs: guest
                        .describe()
                        .handlers
                        .iter()
                        .filter(|r| r.id == declaration.id && r.kind == HandlerKind::Event)
                        .map(|r| HandlerSpec::of(r, limits))
                        .collect(),
                })
        })
        .collect()
}

/// Which handlers a URL path names: the root names all, `<guest>/<id>` one.
pub(crate) fn named_by<'a>(
    handlers: &'a [AdmissionHandler],
    path: &str,
) -> Option<Vec<&'a AdmissionHandler>> {
    let path = path.trim_matches('/');
    if path.is_empty() {
        return Some(handlers.iter().collect());
    }
    let named: Vec<&AdmissionHandler> = handlers.iter().filter(|h| h.path() == path).collect();
    (!named.is_empty()).then_some(named)
}

/// The resource a review is about: as discovered, else as the review describes it (a
/// resource discovery has not seen yet still gets its handlers by kind and plural).
pub(crate) fn resource_of(review: &Review, discovered: &[Resource]) -> Resource {
    discovered
        .iter()
        .find(|r| {
            r.group == review.group && r.version == review.version && r.plural == review.plural
        })
        .cloned()
        .unwrap_or_else(|| Resource {
            group: review.group.clone(),
            version: review.version.clone(),
            plural: review.plural.clone(),
            kind: review.kind.clone(),
            singular: review.kind.to_lowercase(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced: review
                .identity()
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .is_some_and(|ns| !ns.is_empty()),
            verbs: Vec::new(),
            subresources: Vec::new(),
            preferred: true,
        })
}

/// Whether discovery knows the review's resource.
pub(crate) fn discovered(review: &Review, discovered: &[Resource]) -> bool {
    discovered.iter().any(|r| {
        r.group == review.group && r.version == review.version && r.plural == review.plural
    })
}

/// `text` with everything but RFC 3986's unreserved characters percent-encoded, so that a
/// guest's name or a handler's id is one segment of a URL path.
pub(crate) fn percent_encoded(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_one_segment_of_a_path() {
        assert_eq!(percent_encoded("validate_fn"), "validate_fn");
        assert_eq!(percent_encoded("a/b c"), "a%2Fb%20c");
        assert_eq!(percent_encoded("ä"), "%C3%A4");
    }
}
