//! The figures: from what was measured, each figure of Kapsel beside its baseline of the
//! same bench (Kopf, or the floor), their ratio, and the target for it.
//!
//! `row` is what a figure is; each other module makes the sections of one part of the
//! report: `startup` (idle and start-up), `per_size` (each N: created while running, a
//! backlog), `memory` (growth between the sizes, mappings), `floors`, `invocation`,
//! `admission` (reviews over HTTPS beside Kopf's webhook server) and `guest_sizes`.

mod admission;
mod floors;
mod guest_sizes;
mod invocation;
mod memory;
mod per_size;
mod row;
mod startup;

pub(crate) use row::{Row, Section, Target};

use crate::operators::Kind;
use crate::procs::Sample;
use crate::results::Results;
use crate::scenarios::{BacklogRun, RunningRun};
use crate::stats::median;

/// Every section of the report.
pub(crate) fn sections(results: &Results) -> Vec<Section> {
    let mut sections = vec![startup::idle_and_startup(results)];
    for &n in &results.settings.sizes {
        sections.push(per_size::created(results, n));
        sections.push(per_size::backlog(results, n));
    }
    if let Some(growth) = memory::growth(results) {
        sections.push(growth);
    }
    if let Some(mappings) = memory::mappings(results) {
        sections.push(mappings);
    }
    sections.push(floors::floors(results));
    sections.push(invocation::invocation(results));
    if !results.admission.is_empty() {
        sections.push(admission::admission(results));
    }
    sections.push(guest_sizes::sizes(results));
    sections
}

const MIB: f64 = 1024.0;

fn mib(kib: u64) -> f64 {
    kib as f64 / MIB
}

fn find_running(results: &Results, kind: Kind, n: usize) -> Option<&RunningRun> {
    results
        .running
        .iter()
        .find(|r| r.operator == kind && r.n == n)
}

fn find_backlog(results: &Results, kind: Kind, n: usize) -> Option<&BacklogRun> {
    results
        .backlog
        .iter()
        .find(|r| r.operator == kind && r.n == n)
}

/// The idle samples of an operator's `running` runs, their median per field.
fn idle(results: &Results, kind: Kind, field: fn(&Sample) -> u64) -> Option<f64> {
    median(
        results
            .running
            .iter()
            .filter(|r| r.operator == kind)
            .filter_map(|r| r.idle.as_ref().map(|s| mib(field(s)))),
    )
}
