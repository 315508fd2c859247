//! `Accept` header negotiation for discovery and OpenAPI documents, as kube-apiserver's
//! negotiation does it: media ranges in order of preference (`q`), a range's parameters
//! must all be offered (so `application/json;g=apidiscovery.k8s.io;v=v2;as=...` does not
//! match plain JSON), and nothing acceptable is 406 Not Acceptable.

use crate::status::ApiError;

/// One media range of an `Accept` header.
#[derive(Debug)]
struct Range<'a> {
    ty: &'a str,
    params: Vec<(&'a str, &'a str)>,
    q: f32,
}

fn ranges(accept: &str) -> Vec<Range<'_>> {
    let mut out: Vec<Range<'_>> = accept
        .split(',')
        .filter_map(|r| {
            let mut parts = r.split(';').map(str::trim);
            let ty = parts.next().filter(|t| !t.is_empty())?;
            let mut q = 1.0;
            let mut params = Vec::new();
            for p in parts {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                let (k, v) = (k.trim(), v.trim().trim_matches('"'));
                if k.eq_ignore_ascii_case("q") {
                    q = v.parse().unwrap_or(0.0);
                } else if !k.is_empty() {
                    params.push((k, v));
                }
            }
            Some(Range { ty, params, q })
        })
        .filter(|r| r.q > 0.0)
        .collect();
    // Stable: equally preferred ranges keep the client's order.
    out.sort_by(|a, b| b.q.total_cmp(&a.q));
    out
}

fn matches(range: &Range<'_>, offer: &str) -> bool {
    let (offer_ty, offer_params) = match offer.split_once(';') {
        Some((t, p)) => (t, p),
        None => (offer, ""),
    };
    let type_ok = range.ty == "*/*"
        || range.ty.eq_ignore_ascii_case(offer_ty)
        || range.ty.strip_suffix("/*").is_some_and(|major| {
            offer_ty
                .split_once('/')
                .is_some_and(|(m, _)| m.eq_ignore_ascii_case(major))
        });
    type_ok
        && range.params.iter().all(|(k, v)| {
            offer_params
                .split(';')
                .filter_map(|p| p.split_once('='))
                .any(|(ok, ov)| ok.trim() == *k && ov.trim() == *v)
        })
}

/// The offer to answer `accept` with (offers in the server's order of preference), or the
/// 406 kube-apiserver answers when none is acceptable. An empty header accepts anything.
pub(crate) fn negotiate(accept: &str, offers: &[&'static str]) -> Result<&'static str, ApiError> {
    let rs = ranges(accept);
    if accept.trim().is_empty() {
        return offers
            .first()
            .copied()
            .ok_or_else(|| not_acceptable(offers));
    }
    rs.iter()
        .find_map(|r| offers.iter().find(|o| matches(r, o)).copied())
        .ok_or_else(|| not_acceptable(offers))
}

fn not_acceptable(offers: &[&str]) -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: {}",
            offers.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &[&str] = &["application/json"];
    const V2: &[&str] = &[
        "application/json",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    ];

    #[test]
    fn picks_by_preference_and_parameters() {
        // kubectl's discovery: aggregated first, legacy JSON last.
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(kubectl, JSON).unwrap(), "application/json");
        let aggregated_only =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let e = negotiate(aggregated_only, JSON).unwrap_err();
        assert_eq!((e.code, e.reason), (406, "NotAcceptable"));
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json"
        );
        // client-go's OpenAPI v2 request names only the protobuf form.
        let pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        assert_eq!(negotiate(pb, V2).unwrap(), pb);
        assert_eq!(negotiate(pb, JSON).unwrap_err().code, 406);
        assert_eq!(negotiate("", V2).unwrap(), "application/json");
        assert_eq!(negotiate("*/*", V2).unwrap(), "application/json");
        assert_eq!(
            negotiate("application/*", JSON).unwrap(),
            "application/json"
        );
        assert_eq!(
            negotiate("application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", V2).unwrap(),
            pb
        );
        assert_eq!(
            negotiate("application/json;q=0", JSON).unwrap_err().code,
            406
        );
        assert_eq!(negotiate("text/html", JSON).unwrap_err().code, 406);
    }
}
