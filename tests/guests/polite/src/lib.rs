//! A well-behaved guest for the containment tests (`tests/all/containment`), whose calls
//! the tests time while a hostile guest attacks the host.
//!
//! - `polite` (ConfigMaps labelled `kapsel.test/polite`): reads its own ConfigMap back
//!   through the API, and logs `polite <name>`;
//! - `sleepy` (ConfigMaps labelled `kapsel.test/sleepy`): a daemon that sleeps until it
//!   must stop (it holds a call slot meanwhile);
//! - `secret_seen` (Secrets labelled `kapsel.test/polite`, declared with `permit!`):
//!   logs `secret <name> seen` when one is created;
//! - `step_01` … `step_12` (ConfigMaps labelled `kapsel.test/steps`): twelve create
//!   handlers, each setting an annotation of its own: an ordinary operator going through
//!   its handlers, one per cycle, each writing.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-polite`
//! (the component is `target/wasm32-wasip2/release/polite.wasm`).

use kapsel::api::Api;
use kapsel::{Cause, json};

kapsel::permit!("v1", "configmaps", verbs = ["get"]);
kapsel::permit!("v1", "secrets", verbs = ["list", "watch", "patch"]);

#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/polite" = present))]
fn polite(cause: &Cause) -> kapsel::Result<()> {
    let name = cause.name().unwrap_or_default();
    Api::new("v1", "configmaps").get(name)?;
    kapsel::info!("polite {name}");
    Ok(())
}

#[kapsel::on::daemon("v1", "configmaps", labels("kapsel.test/sleepy" = present))]
fn sleepy(cause: &Cause) {
    while cause.sleep_unless_stopped(3600.0) {}
}

#[kapsel::on::create("v1", "secrets", labels("kapsel.test/polite" = present))]
fn secret_seen(cause: &Cause) {
    kapsel::info!("secret {} seen", cause.name().unwrap_or_default());
}

/// Twelve create handlers, each marking the object with its own annotation.
macro_rules! steps {
    ($($step:ident),*) => {$(
        #[kapsel::on::create("v1", "configmaps", labels("kapsel.test/steps" = present))]
        fn $step(cause: &mut Cause) {
            let key = concat!("steps.kapsel.test/", stringify!($step));
            cause.patch.set_at(&["metadata", "annotations", key], json!("done"));
        }
    )*};
}

steps!(
    step_01, step_02, step_03, step_04, step_05, step_06, step_07, step_08, step_09, step_10,
    step_11, step_12
);
