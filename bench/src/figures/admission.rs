//! The admission figures: a validating handler's reviews through Kapsel's HTTPS webhook
//! server beside Kopf's `WebhookServer` with the same handler, on the same reviews.

use super::{Row, Section, Target};
use crate::operators::Kind;
use crate::results::Results;
use crate::scenarios::{AdmissionRun, LoadFigures, RATE};

fn offered(run: &AdmissionRun) -> Option<&LoadFigures> {
    run.offered.as_ref()
}

fn saturated(run: &AdmissionRun) -> Option<&LoadFigures> {
    run.saturated.as_ref()
}

pub(super) fn admission(results: &Results) -> Section {
    let run = |kind: Kind| results.admission.iter().find(|r| r.operator == kind);
    let (kapsel, kopf) = (run(Kind::Kapsel), run(Kind::Kopf));
    let figure = |load: fn(&AdmissionRun) -> Option<&LoadFigures>,
                  value: fn(&LoadFigures) -> Option<f64>| {
        let of = |r: Option<&AdmissionRun>| r.and_then(load).and_then(value);
        (of(kapsel), of(kopf))
    };
    let bytes = kapsel.or(kopf).map_or(0, |r| r.review_bytes);
    let (p50, p99) = (figure(offered, |l| l.p50_ms), figure(offered, |l| l.p99_ms));
    let throughput = figure(saturated, |l| Some(l.reviews_per_s));
    let per_core = figure(saturated, LoadFigures::per_core);
    let cpu_us = |per_core: Option<f64>| per_core.map(|r| 1e6 / r);
    let mut rows = vec![
        Row::new(format!("p50 latency, {RATE} reviews/s offered"), "ms", p50.0, p50.1)
            .note(format!("AdmissionReviews of a {:.1} KB kopfexample POSTed over HTTPS (keep-alive, 8 connections) to `check_field`; from each review's scheduled time to its answer", bytes as f64 / 1000.0)),
        Row::new(format!("p99 latency, {RATE} reviews/s offered"), "ms", p99.0, p99.1)
            .target(Some(Target::AtMost(2.0))),
        Row::new("reviews per second, as many as 8 connections carry", "reviews/s", throughput.0, throughput.1)
            .note("the load generator shares the machine's cores with the server; each at its default logging: Kopf two lines per review (aiohttp's access log, \"Webhook 'check_field' succeeded\"), Kapsel one (\"Webhook 'check_field' succeeded.\")"),
        Row::new("reviews per second per core of the server", "reviews/s", per_core.0, per_core.1)
            .note("answered reviews ÷ the server process's CPU seconds over the throughput load"),
        Row::new("server CPU per review", "µs", cpu_us(per_core.0), cpu_us(per_core.1))
            .target(Some(Target::Ratio(0.1)))
            .note("≤ 1/10: at least 10× Kopf's reviews per second per core"),
    ];
    for run in [kapsel, kopf].into_iter().flatten() {
        let failed: u64 = [&run.offered, &run.saturated]
            .into_iter()
            .flatten()
            .map(|l| l.failed)
            .sum();
        if let Some(e) = &run.error {
            rows.push(
                Row::new(format!("{} failed", run.operator.name()), "", None, None).note(e.clone()),
            );
        } else if failed > 0 {
            let first = [&run.offered, &run.saturated]
                .into_iter()
                .flatten()
                .find_map(|l| l.first_failure.clone())
                .unwrap_or_default();
            rows.push(
                Row::new(
                    format!("{} reviews failed", run.operator.name()),
                    "reviews",
                    Some(failed as f64),
                    None,
                )
                .note(first),
            );
        }
    }
    Section {
        title: "Admission: a validating handler's reviews over HTTPS, Kapsel's webhook server beside Kopf's".into(),
        baseline: Some("Kopf"),
        rows,
    }
}
