//! A guest for the host's integration tests of Kopf's operator-wide memo (KOPF.md §1.13):
//! two startup handlers each leave a key in it, and a create handler on kopfexamples
//! labelled `kapsel.test/memo` returns what it finds in its object's memo, which starts
//! as the operator's.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-memo`.

use kapsel::{Cause, Value, json};

/// Leaves `greeting` in the operator's memo.
#[kapsel::on::startup]
fn greet(cause: &mut Cause) {
    cause.memo_mut()["greeting"] = json!("hello");
}

/// Leaves `count` in the operator's memo, beside `greet`'s (they run at once).
#[kapsel::on::startup]
fn count(cause: &mut Cause) {
    cause.memo_mut()["count"] = json!(1);
}

/// What the object's memo holds: the operator's, as the startup handlers and the
/// embedding application left it.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/memo" = present))]
fn remember(cause: &Cause) -> Value {
    cause.memo().clone()
}
