//! Shards of a resource's objects as Kubernetes' sharded lists and watches name them
//! (KEP-5866, `ShardedListAndWatch`): the 64-bit FNV-1a hash of an object's uid (or
//! namespace) falls into contiguous ranges `[start, end)` of `[0, 2^64)`, and a shard
//! selector (`shardRange(object.metadata.uid, '0x…', '0x…') || …`) asks the API server for
//! the objects of some of them. The host and the server compute the same hash, so they
//! agree on every object.

use std::fmt;

/// The exclusive end of the hash space, 2^64.
const END: u128 = 1 << 64;

/// What an object is sharded by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardKey {
    /// `metadata.uid`: objects spread evenly whatever their namespaces.
    #[default]
    Uid,
    /// `metadata.namespace`: a namespace's objects stay together.
    Namespace,
}

impl ShardKey {
    /// The field as a shard selector names it.
    fn field(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }
}

/// A range `[start, end)` of the hash space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    start: u128,
    end: u128,
}

impl ShardRange {
    /// Shard `index` of `count` equal shards (the last ones one hash larger where
    /// 2^64 does not divide evenly), or `None` when `index` is not below `count`.
    pub fn of(index: u64, count: u64) -> Option<ShardRange> {
        if index >= count {
            return None;
        }
        let bound = |i: u64| END * u128::from(i) / u128::from(count);
        Some(ShardRange {
            start: bound(index),
            end: bound(index + 1),
        })
    }

    /// Whether `hash` falls into the range.
    pub fn contains(&self, hash: u64) -> bool {
        (self.start..self.end).contains(&u128::from(hash))
    }
}

/// The hash the API server shards by: 64-bit FNV-1a of the field's text (the empty text
/// where the object has none, as for a cluster-scoped object's namespace).
pub fn shard_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A shard selector for the ranges: adjacent ranges are joined into one `shardRange`,
/// the rest OR-ed with `||`, bounds in kube's form (`0x` and 16 hex digits, 2^64 as
/// `0x10000000000000000`).
pub struct ShardSelector<'a> {
    key: ShardKey,
    ranges: &'a [ShardRange],
}

/// The selector of `ranges` by `key` (see [`ShardSelector`]).
pub fn shard_selector(key: ShardKey, ranges: &[ShardRange]) -> ShardSelector<'_> {
    ShardSelector { key, ranges }
}

impl fmt::Display for ShardSelector<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sorted = self.ranges.to_vec();
        sorted.sort_by_key(|r| r.start);
        let mut joined: Vec<ShardRange> = Vec::new();
        for range in sorted {
            match joined.last_mut() {
                Some(last) if last.end >= range.start => last.end = last.end.max(range.end),
                _ => joined.push(range),
            }
        }
        for (i, range) in joined.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '0x{:016x}', '0x{:016x}')",
                self.key.field(),
                range.start,
                range.end
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_hash_is_fnv1a_64() {
        // The published test vectors of FNV-1a 64.
        assert_eq!(shard_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(shard_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(shard_hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn selectors_are_written_as_kube_reads_them() {
        let halves = [ShardRange::of(0, 2).unwrap(), ShardRange::of(1, 2).unwrap()];
        assert_eq!(
            shard_selector(ShardKey::Uid, &halves[..1]).to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
        );
        assert_eq!(
            shard_selector(ShardKey::Namespace, &halves[1..]).to_string(),
            "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
        );
        // Adjacent ranges are one; others are OR-ed.
        assert_eq!(
            shard_selector(ShardKey::Uid, &halves).to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        let quarters: Vec<ShardRange> = [3, 0]
            .iter()
            .map(|i| ShardRange::of(*i, 4).unwrap())
            .collect();
        assert_eq!(
            shard_selector(ShardKey::Uid, &quarters).to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || \
             shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"
        );
        assert_eq!(ShardRange::of(3, 3), None);
    }

    proptest! {
        /// The shards of any count cover the hash space, each hash in exactly one, and
        /// differ in size by at most one hash.
        #[test]
        fn shards_cover_the_space_once_and_evenly(count in 1_u64..10_000, hash: u64) {
            let shards: Vec<ShardRange> = (0..count).map(|i| ShardRange::of(i, count).unwrap()).collect();
            prop_assert_eq!(shards[0].start, 0);
            prop_assert_eq!(shards[shards.len() - 1].end, END);
            for pair in shards.windows(2) {
                prop_assert_eq!(pair[0].end, pair[1].start);
            }
            let sizes: Vec<u128> = shards.iter().map(|s| s.end - s.start).collect();
            let (least, most) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(most - least <= 1);
            prop_assert_eq!(shards.iter().filter(|s| s.contains(hash)).count(), 1);
        }
    }
}
