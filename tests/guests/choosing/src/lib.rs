//! A guest for the host's integration tests of Kopf's callable resource selector (KOPF.md
//! §2.1–§2.2): its event handler chooses its resources by a function of their
//! description (the `kopf.dev` group and ConfigMaps) and logs what it is handed, as
//! `<plural> <name>`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-choosing`.

use kapsel::Cause;

/// Kopf: `@kopf.on.event(lambda resource: resource.group == 'kopf.dev' or
/// resource.plural == 'configmaps')`.
#[kapsel::on::event(resource_filter = kopf_dev_or_configmaps)]
fn chosen_fn(cause: &Cause) {
    kapsel::info!(
        "{} {}",
        cause.resource().plural,
        cause.name().unwrap_or_default()
    );
}

/// The resources `chosen_fn` selects: every version of the `kopf.dev` group, and core
/// ConfigMaps.
fn kopf_dev_or_configmaps(resource: &kapsel::ResourceInfo) -> bool {
    resource.group == "kopf.dev" || (resource.group.is_empty() && resource.plural == "configmaps")
}

#[cfg(test)]
mod tests {
    use kapsel::testing;

    /// The host's question, asked natively: kopf.dev in any version and ConfigMaps are
    /// chosen, Pods are not.
    #[test]
    fn chooses_kopf_dev_and_configmaps() {
        let cause = testing::cause()
            .handler_id("chosen_fn")
            .kind(kapsel::HandlerKind::Event)
            .build();
        let resource = |group: &str, version: &str, plural: &str| {
            let mut info = kapsel::ResourceInfo::default();
            info.group = group.to_owned();
            info.version = version.to_owned();
            info.plural = plural.to_owned();
            info
        };
        assert!(testing::chooses(
            &cause,
            &resource("kopf.dev", "v1beta1", "kopfexamples")
        ));
        assert!(testing::chooses(&cause, &resource("", "v1", "configmaps")));
        assert!(!testing::chooses(&cause, &resource("", "v1", "pods")));
    }
}
