//! What a run works out from the API server's counts and the bench's watch: the
//! operator's requests per object, the server's own cost, per-object latency.

use serde::Serialize;

use crate::cluster::Counts;
use crate::procs::Sample;
use crate::stats::{per_object, percentile};

/// The API server's own cost during a phase.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ServerCost {
    pub(crate) requests: u64,
    pub(crate) cpu_s: f64,
    /// CPU per request, µs.
    pub(crate) cpu_per_request_us: Option<f64>,
}

impl ServerCost {
    pub(super) fn between(before: (&Counts, &Sample), after: (&Counts, &Sample)) -> ServerCost {
        let requests = after.0.since(before.0).total();
        let cpu_s = after.1.cpu_s - before.1.cpu_s;
        ServerCost {
            requests,
            cpu_s,
            cpu_per_request_us: (requests > 0).then(|| cpu_s / requests as f64 * 1e6),
        }
    }
}

/// The operator's requests during a phase, per object of the workload.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Requests {
    pub(crate) total_per_object: f64,
    /// By verb, per object.
    pub(crate) by_verb: std::collections::BTreeMap<String, f64>,
    /// By verb and resource (`patch kopfexamples/status`), per object.
    pub(crate) by_what: std::collections::BTreeMap<String, f64>,
    /// Answers ≥ 400 (counts, not per object): conflicts, throttling, errors.
    pub(crate) failures: std::collections::BTreeMap<String, u64>,
    /// The operator's client names (user agents) seen.
    pub(crate) clients: Vec<String>,
}

impl Requests {
    pub(super) fn of(delta: &Counts, n: usize) -> Requests {
        let operator = delta.operator();
        let per = |map: std::collections::BTreeMap<String, u64>| {
            map.into_iter()
                .map(|(k, v)| (k, per_object(v as f64, n)))
                .collect()
        };
        Requests {
            total_per_object: per_object(operator.total() as f64, n),
            by_verb: per(operator.by_verb()),
            by_what: per(operator.by_what()),
            failures: operator.failures(),
            clients: operator.clients(),
        }
    }
}

/// Per-object latency, create sent → handled seen, seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50_s: f64,
    pub(crate) p95_s: f64,
    pub(crate) max_s: f64,
    pub(crate) samples: usize,
}

pub(super) fn latency(samples: &mut [f64]) -> Option<Latency> {
    samples.sort_by(f64::total_cmp);
    Some(Latency {
        p50_s: percentile(samples, 50.0)?,
        p95_s: percentile(samples, 95.0)?,
        max_s: *samples.last()?,
        samples: samples.len(),
    })
}
