//! The compiled guests' sizes, the examples' against the bounds.

use super::{Row, Section, Target};
use crate::results::Results;

pub(super) fn sizes(results: &Results) -> Section {
    let rows = match &results.guest_sizes {
        Ok(sizes) => sizes
            .iter()
            .map(|g| {
                let target = match (g.example, g.name.as_str()) {
                    (true, "minimal") => Some(Target::AtMost(128.0)),
                    (true, _) => Some(Target::AtMost(256.0)),
                    (false, _) => None,
                };
                let label = if g.example {
                    format!("{}.wasm (example)", g.name)
                } else {
                    format!("{}.wasm", g.name)
                };
                Row::new(label, "KiB", Some(g.kib()), None).target(target)
            })
            .collect(),
        Err(e) => vec![Row::new("guest sizes", "KiB", None, None).note(e.clone())],
    };
    Section {
        title: "Guest sizes (target/guests/wasm32-wasip2/release)".into(),
        baseline: None,
        rows,
    }
}
