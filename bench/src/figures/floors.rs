//! The floors: Kapsel beside a bare kube-rs watcher of the same resources, which lists
//! and watches but keeps nothing; what no operator can do for less.

use super::{Row, Section, find_running, idle, mib};
use crate::operators::Kind;
use crate::results::Results;
use crate::scenarios::RunningRun;

pub(super) fn floors(results: &Results) -> Section {
    let mut rows = vec![Row::new(
        "RSS idle",
        "MiB",
        idle(results, Kind::Kapsel, |s| s.rss_kib),
        idle(results, Kind::Watcher, |s| s.rss_kib),
    )];
    for &n in &results.settings.sizes {
        let kapsel = find_running(results, Kind::Kapsel, n);
        let floor = find_running(results, Kind::Watcher, n);
        let rss = |r: Option<&RunningRun>| {
            r.and_then(|r| r.after_created.as_ref())
                .map(|s| mib(s.rss_kib))
        };
        rows.push(Row::new(
            format!("RSS after {n} created"),
            "MiB",
            rss(kapsel),
            rss(floor),
        ));
        rows.push(Row::new(
            format!("CPU per object, {n} created"),
            "ms",
            kapsel.and_then(|r| r.cpu_per_object_ms),
            floor.and_then(|r| r.cpu_per_object_ms),
        ));
        let server = |r: Option<&RunningRun>| {
            r.and_then(|r| r.server_created.as_ref())
                .and_then(|s| s.cpu_per_request_us)
        };
        rows.push(
            Row::new(
                format!("API server CPU per request, {n} created"),
                "µs",
                server(kapsel),
                server(floor),
            )
            .note("the floor's run: the bench's requests alone"),
        );
    }
    Section {
        title: "Floors: a bare kube-rs watcher of kopfexamples and pods (lists, watches, keeps nothing)".into(),
        baseline: Some("floor"),
        rows,
    }
}
