//! A well-behaved guest for the containment tests (`tests/all/containment`), whose calls
//! the tests time while a hostile guest attacks the host.
//!
//! - `polite` (ConfigMaps labelled `kapsel.test/polite`): reads its own ConfigMap back
//!   through the API, and logs `polite <name>`;
//! - `sleepy` (ConfigMaps labelled `kapsel.test/sleepy`): a daemon that sleeps until it
//!   must stop (it holds a call slot meanwhile);
//! - `secret_seen` (Secrets labelled `kapsel.test/polite`, declared with `permit!`):
//!   logs `secret <name> seen` when one is created.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-polite`
//! (the component is `target/wasm32-wasip2/release/polite.wasm`).

use kapsel::Cause;
use kapsel::api::Api;

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
