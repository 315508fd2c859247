//! A test guest for the host's runtime, written against the WIT contract with wit-bindgen
//! directly (not the SDK), so the host's sandbox tests do not depend on the SDK's progress.
//!
//! Each event handler misbehaves (or behaves) in one way the host must survive:
//! `ok` succeeds with a result and a patch, `spin` loops forever, `hog` allocates without
//! bound, `crash` panics, `log-and-lookup` calls the host's `log` and `index-lookup`,
//! `remember` reports what the previous call left in its statics, then overwrites them.

#[allow(
    unsafe_code,
    reason = "wit-bindgen's generated export glue is unsafe by nature"
)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit", world: "guest" });

    use super::Behaviours;
    export!(Behaviours with_types_in self);
}

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use bindings::kapsel::operator::host::{self, Level};
use bindings::kapsel::operator::types::{
    Cause, DescribeOutput, HandlerKind, IndexOutcome, Outcome, Registration, Reply, ResourceName,
    Selector,
};

struct Behaviours;

/// Set by the module's data (not zero), counted up by `remember`.
static CALLS: AtomicU32 = AtomicU32::new(7);

/// Zero in the module's image; filled by `remember`. Larger than what the host's pool
/// resets in place (128 KiB), so both the kept and the given-back pages are checked.
static SCRATCH: Mutex<[u8; 512 << 10]> = Mutex::new([0; 512 << 10]);

/// A registration for an event handler on `kopfexamples`, with the host's default budgets.
fn event_handler(id: &str) -> Registration {
    Registration {
        id: id.to_owned(),
        kind: HandlerKind::Event,
        selectors: vec![Selector {
            group: Some("kopf.dev".to_owned()),
            version: None,
            name: ResourceName::Plural("kopfexamples".to_owned()),
        }],
        labels: Vec::new(),
        annotations: Vec::new(),
        field: None,
        value: None,
        old_value: None,
        new_value: None,
        has_when: false,
        errors: None,
        timeout_seconds: None,
        retries: None,
        backoff_seconds: None,
        optional: false,
        deleted: false,
        interval_seconds: None,
        initial_delay_seconds: None,
        idle_seconds: None,
        sharp: false,
        param: None,
        deadline_ms: None,
        memory_mib: None,
    }
}

impl bindings::Guest for Behaviours {
    fn describe() -> DescribeOutput {
        let mut spin = event_handler("spin");
        // A short deadline keeps the timeout test fast.
        spin.deadline_ms = Some(200);
        let mut hog = event_handler("hog");
        // A small cap keeps the memory test fast.
        hog.memory_mib = Some(16);
        let mut lookup = event_handler("log-and-lookup");
        lookup.has_when = true;
        DescribeOutput {
            sdk_version: "raw-0".to_owned(),
            handlers: vec![
                event_handler("ok"),
                spin,
                hog,
                event_handler("crash"),
                lookup,
                event_handler("remember"),
            ],
            permissions: Vec::new(),
        }
    }

    fn invoke(cause: Cause) -> Reply {
        match cause.handler_id.as_str() {
            "ok" => {
                let name = serde_json::from_str::<serde_json::Value>(&cause.body)
                    .ok()
                    .and_then(|body| body["metadata"]["name"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let patch = serde_json::json!({"metadata": {"labels": {"seen-by": "raw"}}});
                Reply {
                    outcome: Outcome::Done(Some(serde_json::json!({"name": name}).to_string())),
                    patch: Some(patch.to_string()),
                    memo: None,
                }
            }
            "spin" => loop {
                // Never returns and never calls the host: only the epoch deadline stops it.
                std::hint::spin_loop();
            },
            "hog" => {
                let mut chunks: Vec<Vec<u8>> = Vec::new();
                loop {
                    // Touch every page so the allocation is real.
                    chunks.push(vec![1_u8; 1 << 20]);
                    // Keeps the optimiser from eliding allocations nobody reads.
                    std::hint::black_box(&chunks);
                }
            }
            "crash" => panic!("boom"),
            "log-and-lookup" => {
                host::log(Level::Info, "looking up the index");
                let found = host::index_lookup("by-namespace", "\"default\"");
                let keys = host::index_keys("by-namespace");
                eprintln!("stderr line from the guest");
                println!("stdout line from the guest");
                Reply {
                    outcome: Outcome::Done(Some(
                        serde_json::json!({"found": found, "keys": keys}).to_string(),
                    )),
                    patch: None,
                    memo: None,
                }
            }
            "remember" => {
                let calls_before = CALLS.fetch_add(1, Ordering::Relaxed);
                let mut scratch = SCRATCH.lock().unwrap_or_else(PoisonError::into_inner);
                let nonzero = scratch.iter().filter(|byte| **byte != 0).count();
                scratch.fill(0xAB);
                Reply {
                    outcome: Outcome::Done(Some(
                        serde_json::json!({"calls_before": calls_before, "nonzero": nonzero})
                            .to_string(),
                    )),
                    patch: None,
                    memo: None,
                }
            }
            other => Reply {
                outcome: Outcome::Permanent(format!("no handler {other}")),
                patch: None,
                memo: None,
            },
        }
    }

    fn index(cause: Cause) -> IndexOutcome {
        IndexOutcome::Entries(vec![(
            "\"key\"".to_owned(),
            serde_json::json!(cause.handler_id).to_string(),
        )])
    }

    fn when(cause: Cause) -> bool {
        cause.body.contains("yes")
    }
}
