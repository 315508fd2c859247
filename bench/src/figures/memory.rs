//! Memory across the runs: its growth per object between the smallest and the largest
//! N, and Kapsel's largest mappings after the largest N beside the same at idle.

use super::{Row, Section, find_backlog, find_running, mib};
use crate::operators::Kind;
use crate::procs::Sample;
use crate::results::Results;

/// RSS growth per object between the smallest and the largest N.
pub(super) fn growth(results: &Results) -> Option<Section> {
    let (&small, &large) = (
        results.settings.sizes.iter().min()?,
        results.settings.sizes.iter().max()?,
    );
    if large <= small {
        return None;
    }
    let per = (large - small) as f64;
    let grow = |a: Option<&Sample>, b: Option<&Sample>, f: fn(&Sample) -> u64| {
        Some((f(b?) as f64 - f(a?) as f64) / per)
    };
    let running = |kind, f: fn(&Sample) -> u64| {
        grow(
            find_running(results, kind, small).and_then(|r| r.after_created.as_ref()),
            find_running(results, kind, large).and_then(|r| r.after_created.as_ref()),
            f,
        )
    };
    let backlog = |kind, f: fn(&Sample) -> u64| {
        grow(
            find_backlog(results, kind, small).and_then(|r| r.after.as_ref()),
            find_backlog(results, kind, large).and_then(|r| r.after.as_ref()),
            f,
        )
    };
    let rows = vec![
        Row::new(
            "RSS growth per object, created while running",
            "KiB",
            running(Kind::Kapsel, |s| s.rss_kib),
            running(Kind::Kopf, |s| s.rss_kib),
        ),
        Row::new(
            "  anonymous",
            "KiB",
            running(Kind::Kapsel, |s| s.anon_kib),
            running(Kind::Kopf, |s| s.anon_kib),
        ),
        Row::new(
            "  file-backed",
            "KiB",
            running(Kind::Kapsel, |s| s.file_kib),
            running(Kind::Kopf, |s| s.file_kib),
        ),
        Row::new(
            "RSS growth per object, backlog",
            "KiB",
            backlog(Kind::Kapsel, |s| s.rss_kib),
            backlog(Kind::Kopf, |s| s.rss_kib),
        ),
        Row::new(
            "  anonymous",
            "KiB",
            backlog(Kind::Kapsel, |s| s.anon_kib),
            backlog(Kind::Kopf, |s| s.anon_kib),
        ),
    ];
    Some(Section {
        title: format!("Memory growth per object, between N = {small} and N = {large}"),
        baseline: Some("Kopf"),
        rows,
    })
}

/// Kapsel's largest mappings after the largest N created, beside the same at idle.
pub(super) fn mappings(results: &Results) -> Option<Section> {
    let n = *results.settings.sizes.iter().max()?;
    let run = find_running(results, Kind::Kapsel, n)?;
    if run.after_created_mappings.is_empty() {
        return None;
    }
    let rows = run
        .after_created_mappings
        .iter()
        .map(|m| {
            let idle = run
                .idle_mappings
                .iter()
                .find(|i| i.what == m.what)
                .map_or(0.0, |i| mib(i.rss_kib));
            let mut row = Row::new(
                format!("{} (anonymous {:.1} MiB)", m.what, mib(m.anon_kib)),
                "MiB",
                Some(mib(m.rss_kib)),
                Some(idle),
            );
            row.ratio = row.ratio.filter(|_| idle > 0.0);
            row
        })
        .collect();
    Some(Section {
        title: format!(
            "Kapsel's resident memory by mapping: after {n} created (Kapsel) beside idle (same run)"
        ),
        baseline: Some("idle"),
        rows,
    })
}
