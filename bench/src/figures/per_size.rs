//! The sections of one workload size N: N objects created while the operator runs (then
//! deleted), and a backlog of N handled at its start; both beside Kopf.

use super::{Row, Section, Target, find_backlog, find_running, mib};
use crate::operators::Kind;
use crate::procs::Sample;
use crate::results::Results;
use crate::scenarios::{Latency, Requests, RunningRun};
use crate::stats::per_object;

fn rss_target(n: usize) -> Option<Target> {
    match n {
        1000 => Some(Target::Ratio(0.25)),
        10_000 => Some(Target::AtMost(40.0)),
        _ => None,
    }
}

fn memory_rows(
    rows: &mut Vec<Row>,
    what: &str,
    n: usize,
    kapsel: Option<&Sample>,
    kopf: Option<&Sample>,
) {
    let get = |s: Option<&Sample>, f: fn(&Sample) -> u64| s.map(|s| mib(f(s)));
    rows.push(
        Row::new(
            format!("RSS {what}"),
            "MiB",
            get(kapsel, |s| s.rss_kib),
            get(kopf, |s| s.rss_kib),
        )
        .target(rss_target(n)),
    );
    rows.push(Row::new(
        "  of which anonymous",
        "MiB",
        get(kapsel, |s| s.anon_kib),
        get(kopf, |s| s.anon_kib),
    ));
    rows.push(Row::new(
        "  of which file-backed",
        "MiB",
        get(kapsel, |s| s.file_kib),
        get(kopf, |s| s.file_kib),
    ));
    rows.push(Row::new(
        "  peak RSS so far (VmHWM)",
        "MiB",
        get(kapsel, |s| s.peak_rss_kib),
        get(kopf, |s| s.peak_rss_kib),
    ));
}

fn request_rows(
    rows: &mut Vec<Row>,
    what: &str,
    kapsel: Option<&Requests>,
    kopf: Option<&Requests>,
    target: Option<Target>,
) {
    let mut kinds: Vec<&String> = kapsel
        .iter()
        .chain(kopf.iter())
        .flat_map(|r| r.by_what.keys())
        .collect();
    kinds.sort();
    kinds.dedup();
    let total = Row::new(
        format!("API requests per {what} object"),
        "req",
        kapsel.map(|r| r.total_per_object),
        kopf.map(|r| r.total_per_object),
    )
    .target(target);
    rows.push(if kinds.iter().any(|kind| kind.starts_with("list ")) {
        // Why N objects listed cost Kapsel N/500 list requests where Kopf makes one.
        total.note(
            "Kapsel's watches list in pages of 500 (kube-runtime's and client-go's default: \
             no list is held whole in memory), Kopf's unpaged; the writes per object are \
             KOPF.md §4.9's",
        )
    } else {
        total
    });
    for kind in kinds {
        let get = |r: Option<&Requests>| r.map(|r| r.by_what.get(kind).copied().unwrap_or(0.0));
        rows.push(Row::new(format!("  {kind}"), "req", get(kapsel), get(kopf)));
    }
    let failures = |r: Option<&Requests>| {
        r.map(|r| {
            r.failures
                .iter()
                .map(|(k, v)| format!("{v}× {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|s| !s.is_empty())
    };
    if let Some(f) = failures(kapsel) {
        rows.push(Row::new("  Kapsel's failed requests", "req", None, None).note(f));
    }
    if let Some(f) = failures(kopf) {
        rows.push(Row::new("  Kopf's failed requests", "req", None, None).note(f));
    }
}

pub(super) fn created(results: &Results, n: usize) -> Section {
    let kapsel = find_running(results, Kind::Kapsel, n);
    let kopf = find_running(results, Kind::Kopf, n);
    let mut rows = Vec::new();
    memory_rows(
        &mut rows,
        &format!("after {n} created while running"),
        n,
        kapsel.and_then(|r| r.after_created.as_ref()),
        kopf.and_then(|r| r.after_created.as_ref()),
    );
    handling_rows(&mut rows, n, kapsel, kopf);
    request_rows(
        &mut rows,
        "created",
        kapsel.and_then(|r| r.requests_created.as_ref()),
        kopf.and_then(|r| r.requests_created.as_ref()),
        Some(Target::Ratio(1.0)),
    );
    server_and_log_rows(&mut rows, n, kapsel, kopf);
    deletion_rows(&mut rows, n, kapsel, kopf);
    Section {
        title: format!("N = {n}: created while running (then deleted)"),
        baseline: Some("Kopf"),
        rows,
    }
}

/// How the creations were handled: the operator's CPU, the time until all were
/// handled, and each one's latency.
fn handling_rows(
    rows: &mut Vec<Row>,
    n: usize,
    kapsel: Option<&RunningRun>,
    kopf: Option<&RunningRun>,
) {
    rows.push(
        Row::new(
            "operator CPU per handled object",
            "ms",
            kapsel.and_then(|r| r.cpu_per_object_ms),
            kopf.and_then(|r| r.cpu_per_object_ms),
        )
        .target(Some(Target::Ratio(0.1))),
    );
    rows.push(
        Row::new(
            format!("first create → all {n} handled"),
            "s",
            kapsel.and_then(|r| r.first_create_to_all_handled_s),
            kopf.and_then(|r| r.first_create_to_all_handled_s),
        )
        .target((n == 1000).then_some(Target::Ratio(0.2))),
    );
    let latency =
        |r: Option<&RunningRun>, f: fn(&Latency) -> f64| r.and_then(|r| r.latency.as_ref()).map(f);
    rows.push(Row::new(
        "per-object latency p50 (create → handled)",
        "s",
        latency(kapsel, |l| l.p50_s),
        latency(kopf, |l| l.p50_s),
    ));
    rows.push(
        Row::new(
            "per-object latency p95",
            "s",
            latency(kapsel, |l| l.p95_s),
            latency(kopf, |l| l.p95_s),
        )
        .target(Some(Target::Ratio(0.2))),
    );
}

/// The API server's own cost during the creations, and how much the operator logged.
fn server_and_log_rows(
    rows: &mut Vec<Row>,
    n: usize,
    kapsel: Option<&RunningRun>,
    kopf: Option<&RunningRun>,
) {
    let server = |r: Option<&RunningRun>| {
        r.and_then(|r| r.server_created.as_ref())
            .and_then(|s| s.cpu_per_request_us)
    };
    rows.push(
        Row::new(
            "API server CPU per request (all clients) during creations",
            "µs",
            server(kapsel),
            server(kopf),
        )
        .note("the server's own cost, so that a slow server is not blamed on the operator"),
    );
    let lines = |r: Option<&RunningRun>| {
        r.and_then(|r| r.output.as_ref())
            .map(|o| per_object(o.lines as f64, n))
    };
    rows.push(Row::new(
        "operator log lines per object (create and delete)",
        "lines",
        lines(kapsel),
        lines(kopf),
    ));
}

/// The deletions: how long until all were gone, their requests, and the memory left.
fn deletion_rows(
    rows: &mut Vec<Row>,
    n: usize,
    kapsel: Option<&RunningRun>,
    kopf: Option<&RunningRun>,
) {
    rows.push(
        Row::new(
            format!("first delete → all {n} gone"),
            "s",
            kapsel.and_then(|r| r.first_delete_to_all_gone_s),
            kopf.and_then(|r| r.first_delete_to_all_gone_s),
        )
        .note(
            "requests counted until then: the delete handler's Events do not hold it, and go out \
             at the guest's Event pace (--guest-event-rate) afterwards",
        ),
    );
    request_rows(
        rows,
        "deleted",
        kapsel.and_then(|r| r.requests_deleted.as_ref()),
        kopf.and_then(|r| r.requests_deleted.as_ref()),
        None,
    );
    rows.push(Row::new(
        "RSS after all deleted",
        "MiB",
        kapsel
            .and_then(|r| r.after_deleted.as_ref())
            .map(|s| mib(s.rss_kib)),
        kopf.and_then(|r| r.after_deleted.as_ref())
            .map(|s| mib(s.rss_kib)),
    ));
}

pub(super) fn backlog(results: &Results, n: usize) -> Section {
    let kapsel = find_backlog(results, Kind::Kapsel, n);
    let kopf = find_backlog(results, Kind::Kopf, n);
    let mut rows = vec![
        Row::new(
            format!("spawn → first of {n} existing objects handled"),
            "s",
            kapsel.and_then(|r| r.spawn_to_first_handled_s),
            kopf.and_then(|r| r.spawn_to_first_handled_s),
        ),
        Row::new(
            format!("spawn → all {n} handled"),
            "s",
            kapsel.and_then(|r| r.spawn_to_all_handled_s),
            kopf.and_then(|r| r.spawn_to_all_handled_s),
        ),
    ];
    memory_rows(
        &mut rows,
        &format!("after a backlog of {n} handled"),
        n,
        kapsel.and_then(|r| r.after.as_ref()),
        kopf.and_then(|r| r.after.as_ref()),
    );
    rows.push(
        Row::new(
            "operator CPU per object (since spawn, start-up included)",
            "ms",
            kapsel.and_then(|r| r.cpu_per_object_ms),
            kopf.and_then(|r| r.cpu_per_object_ms),
        )
        .target(Some(Target::Ratio(0.1))),
    );
    request_rows(
        &mut rows,
        "backlog",
        kapsel.and_then(|r| r.requests.as_ref()),
        kopf.and_then(|r| r.requests.as_ref()),
        Some(Target::Ratio(1.0)),
    );
    Section {
        title: format!("N = {n}: a backlog handled at start"),
        baseline: Some("Kopf"),
        rows,
    }
}
