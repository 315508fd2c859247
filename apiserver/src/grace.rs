//! Graceful deletion of pods: kube's `BeforeDelete` with the pod strategy's
//! `CheckGracefulDelete`, as a decision on the stored pod and the DELETE's
//! `gracePeriodSeconds` (the deletion itself is `gc`'s).

use crate::meta::{meta_mut, meta_str};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

/// What a DELETE does to a pod.
#[derive(Debug, PartialEq)]
pub(crate) enum Grace {
    /// Not graceful: deleted as any object (at once, or held by its finalizers).
    Now,
    /// A graceful deletion already runs and the request does not shorten it: nothing changes.
    Pending,
    /// The pod, marked with its (new or shortened) `deletionTimestamp` and
    /// `deletionGracePeriodSeconds`, stays until its kubelet confirms the deletion; with a
    /// period of 0 it goes now, unless finalizers hold it.
    Mark(Value, i64),
}

/// kube's timestamp format (seconds).
fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A pod's `metadata.deletionTimestamp`, if it has one that parses.
pub(crate) fn deletion_time(pod: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(meta_str(pod, "deletionTimestamp"))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The deletion of `pod` that a DELETE with `requested` (its `gracePeriodSeconds`) makes.
pub(crate) fn decide(pod: &Value, requested: Option<i64>, now: DateTime<Utc>) -> Grace {
    // A negative period is one second (kube's BeforeDelete).
    let requested = requested.map(|p| if p < 0 { 1 } else { p });
    if let Some(deleting) = deletion_time(pod) {
        return shorten(pod, deleting, requested, now);
    }
    let period = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    let terminated = matches!(phase, Some("Succeeded" | "Failed"));
    if !scheduled || terminated || period == 0 {
        // Never scheduled or already terminated: nothing runs that a kubelet must stop.
        return Grace::Now;
    }
    let period = period.max(1);
    let mut marked = pod.clone();
    let generation = marked
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let meta = meta_mut(&mut marked);
    meta.insert(
        "deletionTimestamp".into(),
        json!(stamp(now + chrono::Duration::seconds(period))),
    );
    meta.insert("deletionGracePeriodSeconds".into(), json!(period));
    if let Some(g) = generation.filter(|g| *g > 0) {
        meta.insert("generation".into(), json!(g + 1));
    }
    Grace::Mark(marked, period)
}

/// A DELETE of a pod whose deletion runs already: only a shorter period changes it.
fn shorten(
    pod: &Value,
    deleting: DateTime<Utc>,
    requested: Option<i64>,
    now: DateTime<Utc>,
) -> Grace {
    let current = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if current <= 0 {
        return Grace::Now;
    }
    let Some(mut period) = requested.filter(|p| *p < current) else {
        return Grace::Pending;
    };
    let mut at = deleting - chrono::Duration::seconds(current) + chrono::Duration::seconds(period);
    if at < now {
        at = now;
        if period != 0 {
            period = 1;
        }
    }
    let mut marked = pod.clone();
    let meta = meta_mut(&mut marked);
    meta.insert("deletionTimestamp".into(), json!(stamp(at)));
    meta.insert("deletionGracePeriodSeconds".into(), json!(period));
    Grace::Mark(marked, period)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn pod(node: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30}, "status": {"phase": phase}})
    }

    #[test]
    fn a_scheduled_pod_waits_for_its_grace_period() {
        let now = at("2026-01-01T00:00:00Z");
        let Grace::Mark(marked, 30) = decide(&pod("n", "Running"), None, now) else {
            panic!("not graceful")
        };
        assert_eq!(
            marked["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:30Z"
        );
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
        // A second DELETE without a shorter period changes nothing; a shorter one moves
        // the deadline; 0 is the kubelet's confirmation.
        assert_eq!(decide(&marked, None, now), Grace::Pending);
        assert_eq!(decide(&marked, Some(60), now), Grace::Pending);
        let Grace::Mark(shorter, 5) = decide(&marked, Some(5), now) else {
            panic!("not shortened")
        };
        assert_eq!(
            shorter["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:05Z"
        );
        let later = at("2026-01-01T00:00:10Z");
        let Grace::Mark(confirmed, 0) = decide(&shorter, Some(0), later) else {
            panic!("not confirmed")
        };
        assert_eq!(
            confirmed["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:10Z"
        );
    }

    #[test]
    fn unscheduled_terminated_or_zero_means_now() {
        let now = at("2026-01-01T00:00:00Z");
        assert_eq!(decide(&pod("", "Pending"), None, now), Grace::Now);
        assert_eq!(decide(&pod("n", "Succeeded"), None, now), Grace::Now);
        assert_eq!(decide(&pod("n", "Running"), Some(0), now), Grace::Now);
        assert!(matches!(
            decide(&pod("n", "Running"), Some(-3), now),
            Grace::Mark(_, 1)
        ));
    }
}
