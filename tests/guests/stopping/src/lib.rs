//! A guest for the host's tests of how timers and daemons stop as Kopf stops them
//! (KOPF.md §1.9, §1.10), on `kopfexamples`. Each handler is filtered on its own label
//! `kapsel.test/<name>` being present, so one object opts into exactly one behaviour.
//! It permits no Kubernetes call at all.
//!
//! - `long_tick` (`kapsel.test/long-tick`): a timer (every 60 s) whose tick sleeps until
//!   it must stop, then logs `long tick of <name> stopped: <reasons>`;
//! - `stubborn` (`kapsel.test/stubborn`): a daemon with a 1 s `cancellation_timeout` that
//!   never returns: it ignores its stop, and logs `stubborn <name> sees <reasons>` each
//!   time the reasons it reads change (checking every 50 ms of wall-clock time);
//! - `patient` (`kapsel.test/patient`): the same, with a 1.5 s `cancellation_backoff`
//!   before the 1 s timeout (logs `patient <name> sees <reasons>`);
//! - `lingering` (`kapsel.test/lingering`): a daemon with a 0.5 s `cancellation_polling`
//!   and no timeout that takes 2 s (of wall-clock time) to exit once it must stop: logs
//!   `lingering <name> started`, then `lingering <name> exits: <reasons>` and returns;
//! - `watcher` (`kapsel.test/watcher`): a daemon that logs `watcher <name> starts at
//!   size <n>` (its cause's `spec.size`), then every 0.2 s reads the latest body and
//!   logs `watcher <name> sees size <n>` when `spec.size` changed, until it must stop;
//! - `late` (`kapsel.test/late`): a daemon whose initial delay is the object's
//!   `spec.delay` seconds (computed by the guest); logs `late <name> started` and returns;
//! - `sharp_tick` (`kapsel.test/sharp`): a sharp timer every 10 s whose tick takes 3 s
//!   (of handler time: it sleeps); logs `sharp tick <n> of <name>`, n counted in the memo.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-stopping`.

use std::time::Duration;

use kapsel::{Cause, StopReasons, Value, json};

/// A timer whose tick lasts until it must stop.
#[kapsel::on::timer("kopfexamples", interval = 60, labels("kapsel.test/long-tick" = present))]
fn long_tick(cause: &Cause) {
    let name = cause.name().unwrap_or_default();
    kapsel::info!("long tick of {name} started");
    while cause.sleep_unless_stopped(60.0) {}
    kapsel::info!("long tick of {name} stopped: {}", cause.stop_reasons());
}

/// Logs the stop reasons each time they change, never returning (a compiled guest stuck
/// in its own work, which no stop reaches).
fn ignore_the_stop(cause: &Cause, what: &str) {
    let name = cause.name().unwrap_or_default();
    kapsel::info!("{what} {name} started");
    let mut seen = StopReasons::empty();
    loop {
        let reasons = cause.stop_reasons();
        if reasons != seen {
            kapsel::info!("{what} {name} sees {reasons}");
            seen = reasons;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ignores its stop: abandoned 1 s after it was cancelled.
#[kapsel::on::daemon(
    "kopfexamples",
    cancellation_timeout = 1.0,
    deadline_ms = 60000,
    labels("kapsel.test/stubborn" = present)
)]
fn stubborn(cause: &Cause) {
    ignore_the_stop(cause, "stubborn");
}

/// Ignores its stop: signalled for 1.5 s, cancelled for 1 s, then abandoned.
#[kapsel::on::daemon(
    "kopfexamples",
    cancellation_backoff = 1.5,
    cancellation_timeout = 1.0,
    deadline_ms = 60000,
    labels("kapsel.test/patient" = present)
)]
fn patient(cause: &Cause) {
    ignore_the_stop(cause, "patient");
}

/// Exits 2 s after it was asked to: waited for, checked every 0.5 s meanwhile.
#[kapsel::on::daemon(
    "kopfexamples",
    cancellation_polling = 0.5,
    deadline_ms = 60000,
    labels("kapsel.test/lingering" = present)
)]
fn lingering(cause: &Cause) {
    let name = cause.name().unwrap_or_default();
    kapsel::info!("lingering {name} started");
    while cause.sleep_unless_stopped(60.0) {}
    std::thread::sleep(Duration::from_secs(2));
    kapsel::info!("lingering {name} exits: {}", cause.stop_reasons());
}

/// Follows `spec.size` in the latest body, without asking the API.
#[kapsel::on::daemon("kopfexamples", labels("kapsel.test/watcher" = present))]
fn watcher(cause: &Cause) {
    let name = cause.name().unwrap_or_default();
    let mut size = cause.spec()["size"].clone();
    kapsel::info!("watcher {name} starts at size {size}");
    while cause.sleep_unless_stopped(0.2) {
        let latest = cause.latest_body().unwrap_or_default();
        if latest["spec"]["size"] != size {
            size = latest["spec"]["size"].clone();
            kapsel::info!("watcher {name} sees size {size}");
        }
    }
}

/// The object's `spec.delay`, in seconds.
fn delay_of(cause: &Cause) -> f64 {
    cause.spec()["delay"].as_f64().unwrap_or(0.0)
}

/// Starts `spec.delay` seconds after the object is first seen.
#[kapsel::on::daemon("kopfexamples", initial_delay = delay_of, labels("kapsel.test/late" = present))]
fn late(cause: &Cause) -> Value {
    kapsel::info!("late {} started", cause.name().unwrap_or_default());
    json!({"started": true})
}

/// A sharp timer whose ticks take 3 s: they start every 10 s all the same.
#[kapsel::on::timer(
    "kopfexamples",
    interval = 10,
    sharp,
    labels("kapsel.test/sharp" = present)
)]
fn sharp_tick(cause: &mut Cause) {
    let memo = cause.memo_mut();
    if !memo.is_object() {
        *memo = json!({});
    }
    let n = memo["ticks"].as_u64().unwrap_or(0) + 1;
    memo["ticks"] = n.into();
    let name = cause.name().unwrap_or_default().to_owned();
    kapsel::info!("sharp tick {n} of {name}");
    cause.sleep_unless_stopped(3.0);
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Outcome};
    use kapsel::{HandlerKind, StopReasons, json};

    fn cause(id: &str, kind: HandlerKind, spec: kapsel::Value) -> kapsel::Cause {
        testing::cause()
            .handler_id(id)
            .kind(kind)
            .body(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"namespace": "default", "name": "ex1"},
                         "spec": spec}))
            .build()
    }

    /// The options the host needs to stop them as Kopf does are declared.
    #[test]
    fn stopping_options_are_declared() {
        let registrations = testing::registrations();
        let find = |id: &str| {
            registrations
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no registration {id}"))
                .clone()
        };
        assert_eq!(find("stubborn")["cancellation-timeout-seconds"], 1.0);
        assert_eq!(
            find("stubborn")["cancellation-backoff-seconds"],
            json!(null)
        );
        assert_eq!(find("patient")["cancellation-backoff-seconds"], 1.5);
        assert_eq!(find("late")["initial-delay-callback"], true);
        assert_eq!(find("late")["initial-delay-seconds"], json!(null));
        assert_eq!(find("sharp_tick")["sharp"], true);
    }

    /// The long tick reports why it stopped.
    #[test]
    fn the_long_tick_says_why_it_stopped() {
        testing::reset();
        testing::stop_daemons_because(StopReasons::FILTERS_MISMATCH);
        let reply = testing::invoke(&mut cause("long_tick", HandlerKind::Timer, json!({})));
        assert_eq!(reply.outcome, Outcome::Done(None));
        let logs: Vec<String> = testing::logs().into_iter().map(|l| l.message).collect();
        assert_eq!(
            logs,
            [
                "long tick of ex1 started",
                "long tick of ex1 stopped: FILTERS_MISMATCH"
            ]
        );
    }

    /// The late daemon's initial delay is its object's.
    #[test]
    fn the_initial_delay_is_the_objects() {
        let late = cause("late", HandlerKind::Daemon, json!({"delay": 30}));
        assert_eq!(testing::initial_delay(&late), Some(30.0));
        let sharp = cause("sharp_tick", HandlerKind::Timer, json!({}));
        assert_eq!(testing::initial_delay(&sharp), None);
    }
}
