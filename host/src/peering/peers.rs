//! The peers in a peering object's status, and what they mean for us: who is
//! dead, who blocks whom (KOPF.md §8.3). Pure: every decision takes `now`.

use std::fmt;

use chrono::{DateTime, NaiveDateTime, TimeDelta, Timelike};
use serde_json::{Map, Value, json};

/// A peer's lifetime when its record does not say (Kopf's default).
const DEFAULT_LIFETIME_SECS: i64 = 60;

/// One peer record: `status.<identity> = {priority, lifetime, lastseen}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer {
    pub(crate) identity: String,
    pub(crate) priority: i64,
    /// Seconds after `lastseen` the peer counts as dead.
    pub(crate) lifetime: i64,
    /// Naive UTC, as Kopf compares it.
    pub(crate) lastseen: NaiveDateTime,
}

impl Peer {
    /// Reads a record as Kopf does: a missing priority is 0, a missing lifetime
    /// 60, a missing `lastseen` is now. Kopf would crash on a `lastseen` it
    /// cannot parse; here such a record counts as long dead, so it gets removed.
    pub(crate) fn parse(identity: &str, record: &Map<String, Value>, now: NaiveDateTime) -> Peer {
        let priority = record.get("priority").and_then(integer).unwrap_or(0);
        let lifetime = record
            .get("lifetime")
            .and_then(integer)
            .unwrap_or(DEFAULT_LIFETIME_SECS);
        let lastseen = match record.get("lastseen") {
            None | Some(Value::Null) => now,
            Some(value) => value
                .as_str()
                .and_then(parse_time)
                .unwrap_or(NaiveDateTime::MIN),
        };
        Peer {
            identity: identity.to_owned(),
            priority,
            lifetime,
            lastseen,
        }
    }

    /// When the peer counts as dead unless it is seen again.
    pub(crate) fn deadline(&self) -> NaiveDateTime {
        self.lastseen
            .checked_add_signed(TimeDelta::seconds(self.lifetime))
            .unwrap_or(NaiveDateTime::MAX)
    }

    /// Kopf's rule: dead when `lastseen + lifetime <= now`.
    pub(crate) fn is_dead(&self, now: NaiveDateTime) -> bool {
        self.deadline() <= now
    }

    /// The record as Kopf writes it.
    pub(crate) fn record(&self) -> Value {
        json!({
            "priority": self.priority,
            "lifetime": self.lifetime,
            "lastseen": format_time(self.lastseen),
        })
    }
}

/// As Kopf's `repr()` of a peer, which its log messages show.
impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<Peer {}: priority={}, lifetime={}, lastseen='{}'>",
            self.identity,
            self.priority,
            self.lifetime,
            format_time(self.lastseen)
        )
    }
}

/// Peers as a Python list prints them: `[<Peer a: ...>, <Peer b: ...>]`.
pub(crate) fn show(peers: &[Peer]) -> String {
    let items: Vec<String> = peers.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The identities of peers, for short messages.
pub(crate) fn identities(peers: &[Peer]) -> String {
    let items: Vec<&str> = peers.iter().map(|p| p.identity.as_str()).collect();
    items.join(", ")
}

/// Python's `int()` of a JSON value: integers, floats (truncated), numeric strings.
fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc() as i64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Python's `datetime.isoformat()` of a naive time: microseconds only when
/// non-zero (`2026-11-30T07:24:28.123456` or `2026-11-30T07:24:28`).
pub(crate) fn format_time(time: NaiveDateTime) -> String {
    let micros = time.nanosecond() / 1000;
    if micros == 0 {
        time.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        format!("{}.{micros:06}", time.format("%Y-%m-%dT%H:%M:%S"))
    }
}

/// ISO 8601 as Kopf's `iso8601.parse_date` reads it: naive times are UTC;
/// times with an offset are converted to UTC (Kopf drops the offset instead,
/// but Kopf itself only ever writes naive UTC, so both agree on real records).
pub(crate) fn parse_time(text: &str) -> Option<NaiveDateTime> {
    let text = text.trim();
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.naive_utc());
    }
    [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
}

/// Now, truncated to microseconds as Python keeps it.
pub(crate) fn now() -> NaiveDateTime {
    let now = chrono::Utc::now().naive_utc();
    now.with_nanosecond(now.nanosecond() / 1000 * 1000)
        .unwrap_or(now)
}

/// What a peering object's status means for one operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Review {
    /// Every peer in the status, ourselves included.
    pub(crate) all: Vec<Peer>,
    /// Peers to remove (ourselves included, if our record expired).
    pub(crate) dead: Vec<Peer>,
    /// Live other peers with a higher priority than ours.
    pub(crate) higher: Vec<Peer>,
    /// Live other peers with our priority.
    pub(crate) same: Vec<Peer>,
}

/// The decision of a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A live peer has a higher priority: we pause in its favour.
    Yield,
    /// A live peer has our priority: everyone pauses (no peer knows who should run).
    Conflict,
    /// Nobody blocks us.
    Run,
}

impl Review {
    /// Reviews `status` for the operator `own` of priority `priority`.
    /// Entries that are not objects (no peer writes them) are ignored.
    pub(crate) fn of(status: &Value, own: &str, priority: i64, now: NaiveDateTime) -> Review {
        let all: Vec<Peer> = status
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(id, record)| record.as_object().map(|r| Peer::parse(id, r, now)))
            .collect();
        let dead = all.iter().filter(|p| p.is_dead(now)).cloned().collect();
        let live_others = || {
            all.iter()
                .filter(move |p| !p.is_dead(now) && p.identity != own)
        };
        let higher = live_others()
            .filter(|p| p.priority > priority)
            .cloned()
            .collect();
        let same = live_others()
            .filter(|p| p.priority == priority)
            .cloned()
            .collect();
        Review {
            all,
            dead,
            higher,
            same,
        }
    }

    pub(crate) fn verdict(&self) -> Verdict {
        if !self.higher.is_empty() {
            Verdict::Yield
        } else if !self.same.is_empty() {
            Verdict::Conflict
        } else {
            Verdict::Run
        }
    }

    /// When the first of the blocking peers expires, if none of them is seen
    /// again: the moment to look again (Kopf touches itself then).
    pub(crate) fn next_expiry(&self) -> Option<NaiveDateTime> {
        self.higher
            .iter()
            .chain(&self.same)
            .map(Peer::deadline)
            .min()
    }
}

/// The merge patch that writes our record, or removes it when `lifetime` is 0
/// (a peer with no lifetime is dead at once: Kopf's way to leave).
pub(crate) fn touch_patch(
    identity: &str,
    priority: i64,
    lifetime: i64,
    now: NaiveDateTime,
) -> Value {
    let peer = Peer {
        identity: identity.to_owned(),
        priority,
        lifetime,
        lastseen: now,
    };
    let record = if peer.is_dead(now) {
        Value::Null
    } else {
        peer.record()
    };
    json!({ "status": { identity: record } })
}

/// The merge patch that removes these peers.
pub(crate) fn clean_patch(peers: &[Peer]) -> Value {
    let records: Map<String, Value> = peers
        .iter()
        .map(|p| (p.identity.clone(), Value::Null))
        .collect();
    json!({ "status": records })
}

/// How long to wait between keep-alives: slightly less than the lifetime
/// (`lifetime - jitter`, the jitter being Kopf's random 5..=10 s), at least 1 s.
pub(crate) fn keepalive_period(lifetime: i64, jitter: i64) -> i64 {
    (lifetime - jitter).max(1).min(lifetime.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        parse_time(text).unwrap()
    }

    #[test]
    fn times_are_formatted_as_python_isoformat() {
        assert_eq!(
            format_time(at("2026-11-30T07:24:28.123456")),
            "2026-11-30T07:24:28.123456"
        );
        assert_eq!(
            format_time(at("2026-11-30T07:24:28.000100")),
            "2026-11-30T07:24:28.000100"
        );
        assert_eq!(
            format_time(at("2026-11-30T07:24:28")),
            "2026-11-30T07:24:28"
        );
    }

    #[test]
    fn times_with_an_offset_are_read_as_utc() {
        assert_eq!(at("2026-11-30T09:24:28+02:00"), at("2026-11-30T07:24:28"));
        assert_eq!(at("2026-11-30T07:24:28Z"), at("2026-11-30T07:24:28"));
        assert_eq!(
            at("2026-11-30 07:24:28.5"),
            at("2026-11-30T07:24:28.500000")
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn a_peer_dies_at_lastseen_plus_lifetime() {
        let now = at("2026-11-30T07:00:00");
        let record = json!({"priority": 5, "lifetime": 60, "lastseen": "2026-11-30T06:59:00"});
        let peer = Peer::parse("p", record.as_object().unwrap(), now);
        assert_eq!(peer.priority, 5);
        assert!(peer.is_dead(now), "exactly at the deadline it is dead");
        assert!(!peer.is_dead(at("2026-11-30T06:59:59.999999")));
    }

    #[test]
    fn missing_fields_take_kopf_defaults() {
        let now = at("2026-11-30T07:00:00");
        let peer = Peer::parse("p", &Map::new(), now);
        assert_eq!((peer.priority, peer.lifetime, peer.lastseen), (0, 60, now));
        let odd = json!({"priority": "7", "lifetime": 30.9, "lastseen": "garbage"});
        let peer = Peer::parse("p", odd.as_object().unwrap(), now);
        assert_eq!((peer.priority, peer.lifetime), (7, 30));
        assert!(peer.is_dead(now), "an unreadable lastseen counts as dead");
    }

    #[test]
    fn a_higher_live_peer_makes_us_yield() {
        let now = at("2026-11-30T07:00:00");
        let review = Review::of(
            &json!({
                "us": {"priority": 0, "lifetime": 60, "lastseen": "2026-11-30T06:59:30"},
                "dev": {"priority": 666, "lifetime": 60, "lastseen": "2026-11-30T06:59:50"},
                "low": {"priority": -1, "lifetime": 60, "lastseen": "2026-11-30T06:59:50"},
            }),
            "us",
            0,
            now,
        );
        assert_eq!(review.verdict(), Verdict::Yield);
        assert_eq!(identities(&review.higher), "dev");
        assert!(review.dead.is_empty());
        assert_eq!(review.next_expiry(), Some(at("2026-11-30T07:00:50")));
    }

    #[test]
    fn the_higher_peer_is_not_blocked_by_lower_ones() {
        let now = at("2026-11-30T07:00:00");
        let review = Review::of(
            &json!({
                "us": {"priority": 0, "lifetime": 60, "lastseen": "2026-11-30T06:59:30"},
                "dev": {"priority": 666, "lifetime": 60, "lastseen": "2026-11-30T06:59:50"},
            }),
            "dev",
            666,
            now,
        );
        assert_eq!(review.verdict(), Verdict::Run);
        assert_eq!(review.next_expiry(), None);
    }

    #[test]
    fn equal_priorities_conflict_and_ourselves_never_count() {
        let now = at("2026-11-30T07:00:00");
        let both = json!({
            "a": {"priority": 3, "lifetime": 60, "lastseen": "2026-11-30T06:59:30"},
            "b": {"priority": 3, "lifetime": 60, "lastseen": "2026-11-30T06:59:30"},
        });
        assert_eq!(Review::of(&both, "a", 3, now).verdict(), Verdict::Conflict);
        assert_eq!(Review::of(&both, "b", 3, now).verdict(), Verdict::Conflict);
        let alone =
            json!({"a": {"priority": 3, "lifetime": 60, "lastseen": "2026-11-30T06:59:30"}});
        assert_eq!(Review::of(&alone, "a", 3, now).verdict(), Verdict::Run);
    }

    #[test]
    fn expired_peers_are_dead_and_block_nobody() {
        let now = at("2026-11-30T07:00:00");
        let review = Review::of(
            &json!({
                "old": {"priority": 100, "lifetime": 10, "lastseen": "2026-11-30T06:59:50"},
                "us": {"priority": 0, "lifetime": 60, "lastseen": "2026-11-30T06:59:59"},
                "junk": "not a record",
            }),
            "us",
            0,
            now,
        );
        assert_eq!(review.verdict(), Verdict::Run);
        assert_eq!(identities(&review.dead), "old");
        assert_eq!(review.all.len(), 2);
        assert_eq!(clean_patch(&review.dead), json!({"status": {"old": null}}));
    }

    #[test]
    fn touching_writes_kopf_records_and_lifetime_zero_removes() {
        let now = at("2026-11-30T07:00:00.250000");
        assert_eq!(
            touch_patch("me@host", 100, 30, now),
            json!({"status": {"me@host": {
                "priority": 100, "lifetime": 30, "lastseen": "2026-11-30T07:00:00.250000"
            }}})
        );
        assert_eq!(
            touch_patch("me@host", 100, 0, now),
            json!({"status": {"me@host": null}})
        );
    }

    #[test]
    fn peers_print_as_kopf_logs_them() {
        let peer = Peer {
            identity: "dev@laptop".into(),
            priority: 666,
            lifetime: 60,
            lastseen: at("2026-11-30T07:00:00.5"),
        };
        assert_eq!(
            show(&[peer]),
            "[<Peer dev@laptop: priority=666, lifetime=60, lastseen='2026-11-30T07:00:00.500000'>]"
        );
    }

    #[test]
    fn keepalives_come_before_the_lifetime_ends() {
        assert_eq!(keepalive_period(60, 5), 55);
        assert_eq!(keepalive_period(60, 10), 50);
        assert_eq!(keepalive_period(3, 7), 1);
        assert_eq!(keepalive_period(1, 5), 1);
        assert_eq!(keepalive_period(0, 5), 1);
    }
}
