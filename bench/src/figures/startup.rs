//! The first section: Kapsel's and Kopf's memory when idle, and their start-up times
//! (to watching, to the first existing object handled; with and without the cache).

use super::{Row, Section, Target, idle};
use crate::operators::{Kind, Startup};
use crate::results::Results;
use crate::scenarios::StartupRun;
use crate::stats::median;

/// The median spawn → first handled of the start-up runs.
fn startup(
    results: &Results,
    kind: Kind,
    variant: Startup,
    field: fn(&StartupRun) -> Option<f64>,
) -> Option<f64> {
    median(
        results
            .startup
            .iter()
            .filter(|r| r.operator == kind && r.variant == variant)
            .filter_map(field),
    )
}

pub(super) fn idle_and_startup(results: &Results) -> Section {
    let mut rows = vec![
        Row::new(
            "RSS idle (started, no objects)",
            "MiB",
            idle(results, Kind::Kapsel, |s| s.rss_kib),
            idle(results, Kind::Kopf, |s| s.rss_kib),
        )
        .target(Some(Target::Ratio(1.0 / 3.0))),
        Row::new(
            "  of which anonymous (RssAnon)",
            "MiB",
            idle(results, Kind::Kapsel, |s| s.anon_kib),
            idle(results, Kind::Kopf, |s| s.anon_kib),
        ),
        Row::new(
            "  of which file-backed (RssFile)",
            "MiB",
            idle(results, Kind::Kapsel, |s| s.file_kib),
            idle(results, Kind::Kopf, |s| s.file_kib),
        ),
        Row::new(
            "spawn → watching kopfexamples and pods",
            "s",
            median(
                results
                    .running
                    .iter()
                    .filter(|r| r.operator == Kind::Kapsel)
                    .filter_map(|r| r.spawn_to_watching_s),
            ),
            median(
                results
                    .running
                    .iter()
                    .filter(|r| r.operator == Kind::Kopf)
                    .filter_map(|r| r.spawn_to_watching_s),
            ),
        ),
    ];
    for &variant in Startup::ALL {
        rows.push(
            Row::new(
                format!(
                    "spawn → first existing object handled ({})",
                    variant.label()
                ),
                "s",
                startup(results, Kind::Kapsel, variant, |r| {
                    r.spawn_to_first_handled_s
                }),
                startup(results, Kind::Kopf, Startup::NoCache, |r| {
                    r.spawn_to_first_handled_s
                }),
            )
            .target(Some(match variant {
                Startup::NoCache => Target::Ratio(1.0),
                Startup::Cached => Target::Ratio(0.2),
            }))
            .note(match variant {
                Startup::NoCache => {
                    "never slower than Kopf without the cache (median of the repetitions)"
                }
                Startup::Cached => "≤ 1/5 of Kopf's with the cache (median of the repetitions)",
            }),
        );
        rows.push(Row::new(
            format!(
                "Kapsel: spawn → \"{}\" ({})",
                crate::operators::KAPSEL_RUNNING,
                variant.label()
            ),
            "s",
            startup(results, Kind::Kapsel, variant, |r| r.spawn_to_running_log_s),
            None,
        ));
    }
    Section {
        title: "Idle and start-up".into(),
        baseline: Some("Kopf"),
        rows,
    }
}
