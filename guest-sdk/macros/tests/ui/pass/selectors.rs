//! Every selector form of KOPF.md §2.1, stacked on one function.

use kapsel::json;

#[kapsel::on::event("kopfexamples")]
#[kapsel::on::event("kex")]
#[kapsel::on::event("KopfExample")]
#[kapsel::on::event("v1", "pods")]
#[kapsel::on::event("kopf.dev/v1", "kopfexamples")]
#[kapsel::on::event("kopf.dev", "kopfexamples")]
#[kapsel::on::event("kopf.dev", "v1", "kopfexamples")]
#[kapsel::on::event("", "v1", "pods")]
#[kapsel::on::event("pods.v1")]
#[kapsel::on::event("kopfexamples.v1.kopf.dev")]
#[kapsel::on::event("kopfexamples.kopf.dev")]
#[kapsel::on::event("deployments.apps")]
#[kapsel::on::event(group = "kopf.dev", version = "v1", plural = "kopfexamples")]
#[kapsel::on::event(kind = "KopfExample")]
#[kapsel::on::event(singular = "kopfexample")]
#[kapsel::on::event(shortcut = "kex")]
#[kapsel::on::event(category = "all")]
fn everything(_cause: &kapsel::Cause) {}

fn main() {
    let selectors: Vec<_> = kapsel::testing::registrations()
        .into_iter()
        .inspect(|r| assert_eq!(r["id"], "everything"))
        .map(|r| r["selectors"][0].clone())
        .collect();
    let sel = |group: Option<&str>, version: Option<&str>, name: kapsel::Value| {
        json!({"group": group, "version": version, "name": name})
    };
    let expected = [
        sel(None, None, json!({"any": "kopfexamples"})),
        sel(None, None, json!({"any": "kex"})),
        sel(None, None, json!({"any": "KopfExample"})),
        sel(Some(""), Some("v1"), json!({"any": "pods"})),
        sel(Some("kopf.dev"), Some("v1"), json!({"any": "kopfexamples"})),
        sel(Some("kopf.dev"), None, json!({"any": "kopfexamples"})),
        sel(Some("kopf.dev"), Some("v1"), json!({"any": "kopfexamples"})),
        sel(Some(""), Some("v1"), json!({"any": "pods"})),
        sel(None, Some("v1"), json!({"any": "pods"})),
        sel(Some("kopf.dev"), Some("v1"), json!({"any": "kopfexamples"})),
        sel(Some("kopf.dev"), None, json!({"any": "kopfexamples"})),
        sel(Some("apps"), None, json!({"any": "deployments"})),
        sel(Some("kopf.dev"), Some("v1"), json!({"plural": "kopfexamples"})),
        sel(None, None, json!({"kind": "KopfExample"})),
        sel(None, None, json!({"singular": "kopfexample"})),
        sel(None, None, json!({"shortcut": "kex"})),
        sel(None, None, json!({"category": "all"})),
    ];
    assert_eq!(selectors.len(), expected.len());
    for want in expected {
        assert!(selectors.contains(&want), "missing {want}");
    }
}
