//! The invocation cost: one handler call through the host beside the same logic native.

use super::{Row, Section, Target};
use crate::results::Results;

pub(super) fn invocation(results: &Results) -> Section {
    let rows = match &results.invocation {
        Ok(i) => vec![
            Row::new(
                format!("one {} call on a {:.1} KB Pod", i.handler, i.body_bytes as f64 / 1000.0),
                "µs",
                Some(i.call_us),
                Some(i.native_us),
            )
            .note("no target: three quarters of it is wasmtime's instance life cycle, which a guest cannot move; the cause handed over, a fresh sandboxed instance, the guest reads the name (the SDK scans the object for its members, then the metadata's for the name) and patches, the host reads the reply; native: the same logic, the name read with serde into a struct (which tokenises the rest), the same JSON back"),
            Row::new(
                "the same call beside native parsing the whole Pod",
                "µs",
                Some(i.call_us),
                Some(i.native_whole_us),
            )
            .note("as a native operator is handed the object: kube-rs deserialises every object it watches"),
            Row::new("p99 of a fresh-instance call", "µs", Some(i.call_p99_us), None)
                .target(Some(Target::AtMost(100.0)))
                .note("each call timed alone, warm-up included: what a wasmtime upgrade must keep (the comment at KEEP_RESIDENT_PER_MEMORY says how to check)"),
            Row::new("calls per second, one core", "calls/s", Some(i.calls_per_second()), None)
                .target(Some(Target::AtLeast(30_000.0)))
                .note(format!("{} calls one after the other, in this process (the host's code as the bench is built)", i.calls)),
        ],
        Err(e) => vec![Row::new("one handler call", "µs", None, None).note(e.clone())],
    };
    Section {
        title: "Invocation cost: a handler call through the host beside the same logic native"
            .into(),
        baseline: Some("native"),
        rows,
    }
}
