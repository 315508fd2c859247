//! The figures: from what was measured, each figure of Kapsel beside its baseline of the
//! same bench (Kopf, or the floor), their ratio, and the target for it.

use serde::Serialize;

use crate::operators::{Kind, Startup};
use crate::procs::Sample;
use crate::results::Results;
use crate::scenarios::{BacklogRun, Requests, RunningRun};
use crate::stats::{median, per_object};

/// A target of the issue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Target {
    /// Kapsel ÷ baseline at most this.
    Ratio(f64),
    /// Kapsel's value at most this (in the row's unit).
    AtMost(f64),
    /// Kapsel's value at least this (in the row's unit).
    AtLeast(f64),
}

impl Target {
    fn bound(self) -> f64 {
        match self {
            Target::Ratio(r) | Target::AtMost(r) | Target::AtLeast(r) => r,
        }
    }

    /// `≤ 1/3`, `≤ 1`, `≤ 40 MiB`.
    pub(crate) fn label(self, unit: &str) -> String {
        match self {
            Target::Ratio(r) if r < 1.0 => format!("≤ 1/{}", trim(1.0 / r)),
            Target::Ratio(r) => format!("≤ {}", trim(r)),
            Target::AtMost(v) => format!("≤ {} {unit}", trim(v)),
            Target::AtLeast(v) => format!("≥ {} {unit}", trim(v)),
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// One figure.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) figure: String,
    pub(crate) unit: &'static str,
    pub(crate) kapsel: Option<f64>,
    pub(crate) baseline: Option<f64>,
    /// Kapsel ÷ baseline.
    pub(crate) ratio: Option<f64>,
    pub(crate) target: Option<Target>,
    /// What the target measures (the ratio or Kapsel's value) ÷ its bound: met at ≤ 1.
    pub(crate) of_target: Option<f64>,
    pub(crate) met: Option<bool>,
    pub(crate) note: Option<String>,
}

impl Row {
    fn new(
        figure: impl Into<String>,
        unit: &'static str,
        kapsel: Option<f64>,
        baseline: Option<f64>,
    ) -> Row {
        let ratio = match (kapsel, baseline) {
            (Some(k), Some(b)) if b > 0.0 => Some(k / b),
            (Some(0.0), Some(_)) => Some(1.0),
            _ => None,
        };
        Row {
            figure: figure.into(),
            unit,
            kapsel,
            baseline,
            ratio,
            target: None,
            of_target: None,
            met: None,
            note: None,
        }
    }

    fn target(mut self, target: Option<Target>) -> Row {
        self.target = target;
        let measured = match target {
            Some(Target::Ratio(_)) => self.ratio,
            Some(Target::AtMost(_) | Target::AtLeast(_)) => self.kapsel,
            None => None,
        };
        match (target, measured) {
            (Some(Target::AtLeast(bound)), Some(m)) => {
                self.of_target = Some(if m > 0.0 { bound / m } else { f64::INFINITY });
                self.met = Some(m >= bound);
            }
            (Some(t), Some(m)) => {
                self.of_target = Some(m / t.bound());
                self.met = Some(m <= t.bound());
            }
            _ => {}
        }
        self
    }

    fn note(mut self, note: impl Into<String>) -> Row {
        self.note = Some(note.into());
        self
    }
}

/// A group of rows with the same baseline.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Section {
    pub(crate) title: String,
    /// What the baseline column is (`Kopf`, `floor`), or None for Kapsel's figures alone.
    pub(crate) baseline: Option<&'static str>,
    pub(crate) rows: Vec<Row>,
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

/// The median spawn → first handled of the start-up runs.
fn startup(
    results: &Results,
    kind: Kind,
    variant: Startup,
    field: fn(&crate::scenarios::StartupRun) -> Option<f64>,
) -> Option<f64> {
    median(
        results
            .startup
            .iter()
            .filter(|r| r.operator == kind && r.variant == variant)
            .filter_map(field),
    )
}

/// Every section of the report.
pub(crate) fn sections(results: &Results) -> Vec<Section> {
    let mut sections = vec![idle_and_startup(results)];
    for &n in &results.settings.sizes {
        sections.push(created(results, n));
        sections.push(backlog(results, n));
    }
    if let Some(growth) = growth(results) {
        sections.push(growth);
    }
    if let Some(mappings) = mappings(results) {
        sections.push(mappings);
    }
    sections.push(floors(results));
    sections.push(invocation(results));
    sections.push(sizes(results));
    sections
}

fn idle_and_startup(results: &Results) -> Section {
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

fn created(results: &Results, n: usize) -> Section {
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
    let latency = |r: Option<&RunningRun>, f: fn(&crate::scenarios::Latency) -> f64| {
        r.and_then(|r| r.latency.as_ref()).map(f)
    };
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
    request_rows(
        &mut rows,
        "created",
        kapsel.and_then(|r| r.requests_created.as_ref()),
        kopf.and_then(|r| r.requests_created.as_ref()),
        Some(Target::Ratio(1.0)),
    );
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
        &mut rows,
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
    Section {
        title: format!("N = {n}: created while running (then deleted)"),
        baseline: Some("Kopf"),
        rows,
    }
}

fn backlog(results: &Results, n: usize) -> Section {
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

/// RSS growth per object between the smallest and the largest N.
fn growth(results: &Results) -> Option<Section> {
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
fn mappings(results: &Results) -> Option<Section> {
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

fn floors(results: &Results) -> Section {
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

fn invocation(results: &Results) -> Section {
    let rows = match &results.invocation {
        Ok(i) => vec![
            Row::new(
                format!("one {} call on a {:.1} KB Pod", i.handler, i.body_bytes as f64 / 1000.0),
                "µs",
                Some(i.call_us),
                Some(i.native_us),
            )
            .target(Some(Target::Ratio(3.0)))
            .note("the cause handed over, a fresh sandboxed instance, the guest reads the name (the SDK scans the object for its members, then the metadata's for the name) and patches, the host reads the reply; native: the same logic, the name read with serde into a struct (which tokenises the rest), the same JSON back"),
            Row::new(
                "the same call beside native parsing the whole Pod",
                "µs",
                Some(i.call_us),
                Some(i.native_whole_us),
            )
            .note("as a native operator is handed the object: kube-rs deserialises every object it watches"),
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

fn sizes(results: &Results) -> Section {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_targets() {
        let row =
            Row::new("x", "MiB", Some(10.0), Some(40.0)).target(Some(Target::Ratio(1.0 / 3.0)));
        assert_eq!(row.ratio, Some(0.25));
        assert_eq!(row.met, Some(true));
        let row = Row::new("x", "MiB", Some(20.0), Some(40.0)).target(Some(Target::Ratio(0.25)));
        assert_eq!((row.met, row.of_target), (Some(false), Some(2.0)));
        let row = Row::new("x", "MiB", Some(50.0), None).target(Some(Target::AtMost(40.0)));
        assert_eq!((row.met, row.of_target), (Some(false), Some(1.25)));
        let row = Row::new("x", "req", Some(0.0), Some(0.0)).target(Some(Target::Ratio(1.0)));
        assert_eq!(row.met, Some(true));
        let row = Row::new("x", "s", None, Some(1.0)).target(Some(Target::Ratio(0.2)));
        assert_eq!(row.met, None);
        let row =
            Row::new("x", "calls/s", Some(20_000.0), None).target(Some(Target::AtLeast(30_000.0)));
        assert_eq!((row.met, row.of_target), (Some(false), Some(1.5)));
        let row =
            Row::new("x", "calls/s", Some(60_000.0), None).target(Some(Target::AtLeast(30_000.0)));
        assert_eq!((row.met, row.of_target), (Some(true), Some(0.5)));
    }

    #[test]
    fn target_labels() {
        assert_eq!(Target::Ratio(1.0 / 3.0).label("MiB"), "≤ 1/3");
        assert_eq!(Target::Ratio(0.1).label("ms"), "≤ 1/10");
        assert_eq!(Target::Ratio(1.0).label("req"), "≤ 1");
        assert_eq!(Target::AtMost(40.0).label("MiB"), "≤ 40 MiB");
        assert_eq!(
            Target::AtLeast(30_000.0).label("calls/s"),
            "≥ 30000 calls/s"
        );
    }
}
