//! A guest for the host's integration tests of Kopf's settings changed by a startup
//! handler (KOPF.md §1.12, §13): its startup handler serves only the pods labelled
//! `kapsel.test/served=yes` (`watching.label_selectors`) and merges what the operator's
//! memo has under `settings`, or, when the memo says `{"bad": true}`, makes a change the
//! host refuses; its event handler on pods logs
//! each pod with the selector in force, and that its own change is refused.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-settings`.

use kapsel::Cause;

/// Kopf: `settings.watching.label_selectors = {'kapsel.test/served': 'yes'}`.
#[kapsel::on::startup]
fn select(cause: &Cause) -> kapsel::Result<()> {
    if cause.memo()["bad"] == true {
        // An unknown setting: refused, and `?` fails this handler for good.
        kapsel::settings::merge(kapsel::json!({"watching": {"label_selector": "typo"}}))?;
    }
    kapsel::settings::set("watching.label_selectors", "kapsel.test/served=yes")?;
    match cause.memo().get("settings") {
        Some(more) => kapsel::settings::merge(more.clone()),
        None => Ok(()),
    }
}

/// Logs the pod with the selector in force, then tries to change a setting, which only
/// startup handlers may.
#[kapsel::on::event("v1", "pods")]
fn log_event(cause: &Cause) -> kapsel::Result<()> {
    let settings = kapsel::settings::get()?;
    let selector = &settings["watching"]["label_selectors"];
    kapsel::info!("saw {} with {selector}", cause.name().unwrap_or_default());
    if let Err(refused) = kapsel::settings::set("posting.level", "error") {
        kapsel::warn!("refused: {refused}");
    }
    Ok(())
}
