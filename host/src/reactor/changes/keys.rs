//! Annotation keys as Kopf forms them (KOPF.md §4.3).
//!
//! Kopf stores every handler's progress, the diff-base and the touch marker under
//! `<prefix>/<name>` keys. Kubernetes limits the name part to 63 characters, so long
//! ids are cut and suffixed with a short BLAKE2b hash. Two generations coexist: V2
//! (name part ≤ 63, always written and read first) and V1 (whole key ≤ 63, written
//! too while `v1` is on). Kapsel must form the same keys bit for bit, or a migrated
//! operator would not find its state. The keys of a ReplicaSet owned by a Deployment
//! get Kopf's `-ofDRS` mark ([`collision_marked`]).

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::Value;

use crate::persistence::Persistence;

/// Forms the annotation keys of one storage prefix (borrowed from its storage: the keys
/// are formed for every handler of every object, the prefix is never copied for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyScheme<'a> {
    /// The annotation prefix, without the slash (`kopf.zalando.org`).
    pub(crate) prefix: &'a str,
    /// Whether the legacy V1 keys are also written (Kopf's default `v1=True`).
    pub(crate) v1: bool,
    /// Whether every key gets Kopf's `-ofDRS` mark ([`collision_marked`]).
    pub(crate) marked: bool,
}

/// Kopf's `mark_key` (its `CollisionEvadingConvention`): Kubernetes copies a Deployment's
/// annotations onto the ReplicaSets it owns, so an operator serving both would read the
/// Deployment's records on its ReplicaSets. Kopf marks the keys of such a ReplicaSet with
/// `-ofDRS` (before the V1/V2 forming), and so does Kapsel, so that they stay apart.
pub(crate) fn collision_marked(body: &Value) -> bool {
    body.get("kind").and_then(Value::as_str) == Some("ReplicaSet")
        && body
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|owners| {
                owners
                    .iter()
                    .any(|o| o.get("kind").and_then(Value::as_str) == Some("Deployment"))
            })
}

/// The longest name part Kubernetes allows.
const MAX_NAME: usize = 63;

impl KeyScheme<'_> {
    /// The keys to write for a record key: V2 first, then V1 when it differs.
    /// Reads try them in the same order.
    pub(crate) fn keys(&self, key: &str) -> Vec<String> {
        let key: Cow<'_, str> = if self.marked {
            Cow::Owned(format!("{key}-ofDRS"))
        } else {
            Cow::Borrowed(key)
        };
        let key = key.as_ref();
        // Most record keys (`create_fn`, `last-handled-configuration`) are safe and short
        // enough for both generations, which then write the key as it is, once: formed
        // for every handler of every object, this spares the work of the general case.
        if !key.contains(['/', '<', '>'])
            && key.len() <= MAX_NAME
            && (!self.v1 || key.chars().count() <= self.v1_room())
        {
            return vec![format!("{}/{key}", self.prefix)];
        }
        self.formed_keys(key)
    }

    /// [`KeyScheme::keys`] formed by the general rules, whatever the key.
    fn formed_keys(&self, key: &str) -> Vec<String> {
        let v2 = self.v2_key(key);
        let mut keys = vec![v2.clone()];
        if self.v1 {
            let v1 = self.v1_key(key);
            if v1 != v2 {
                keys.push(v1);
            }
        }
        keys
    }

    /// The V2 key: only the name part is limited; the hash is of the *unsafe* key.
    pub(crate) fn v2_key(&self, key: &str) -> String {
        let suffix = if key.chars().count() > MAX_NAME {
            hash_suffix(key)
        } else {
            String::new()
        };
        let limit = MAX_NAME.saturating_sub(suffix.len());
        let safe: String = safe_key(key).chars().take(limit).collect();
        format!("{}/{safe}{suffix}", self.prefix)
    }

    /// The V1 key: the whole key incl. the prefix is limited; the hash is of the *safe* key.
    pub(crate) fn v1_key(&self, key: &str) -> String {
        let safe = safe_key(key);
        let room = self.v1_room();
        let suffix = if safe.chars().count() <= room {
            String::new()
        } else {
            hash_suffix(&safe)
        };
        let cut: String = safe
            .chars()
            .take(room.saturating_sub(suffix.len()))
            .collect();
        format!("{}/{cut}{suffix}", self.prefix)
    }

    /// The characters a V1 key leaves its name after the prefix and the slash.
    fn v1_room(&self) -> usize {
        MAX_NAME.saturating_sub(self.prefix.chars().count() + 1)
    }

    /// The marker that brands a non-`kopf.` prefix as Kopf-managed, so that other
    /// Kopf-based operators exclude its annotations from their essences.
    pub(crate) fn marker_key(&self) -> Option<String> {
        (!self.prefix.starts_with("kopf.")).then(|| format!("{}/kopf-managed", self.prefix))
    }

    /// Kopf warns about prefixes that could make keys exceed 253 characters.
    pub(crate) fn prefix_too_long(&self) -> bool {
        self.prefix.chars().count() > 253 - MAX_NAME - 1
    }
}

/// The prefixes long enough to make keys of long handler ids too long (Kopf's
/// warning: "The annotations prefix is too long. It can cause errors when PATCHing.").
pub(crate) fn long_prefixes(persistence: &Persistence) -> Vec<&str> {
    let mut prefixes = persistence.progress_storage.prefixes();
    prefixes.extend(persistence.diffbase_storage.prefixes());
    prefixes.retain(|prefix| {
        KeyScheme {
            prefix,
            v1: false,
            marked: false,
        }
        .prefix_too_long()
    });
    prefixes.dedup();
    prefixes
}

/// `/` → `.`, `<` and `>` → `_`: characters Kubernetes refuses in annotation names.
pub(crate) fn safe_key(key: &str) -> String {
    key.replace('/', ".").replace(['<', '>'], "_")
}

/// `-<base64(blake2b(key, 4 bytes), altchars '-.')>` with trailing `=`, `-`, `.` stripped.
pub(crate) fn hash_suffix(key: &str) -> String {
    let digest = blake2b(key.as_bytes(), 4);
    let encoded = base64(&digest);
    format!("-{encoded}")
        .trim_end_matches(['=', '-', '.'])
        .to_owned()
}

/// Prefixes whose annotations belong to some Kopf-based operator (Kopf's
/// `_detect_marked_prefixes`): `kopf.zalando.org`, `*.kopf.zalando.org`, and any
/// prefix with a `<prefix>/kopf-managed` annotation.
pub(crate) fn marked_prefixes<'a>(keys: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut prefixes = BTreeSet::new();
    for key in keys {
        let Some((prefix, name)) = key.split_once('/') else {
            continue;
        };
        if name == "kopf-managed"
            || prefix == "kopf.zalando.org"
            || prefix.ends_with(".kopf.zalando.org")
        {
            prefixes.insert(prefix.to_owned());
        }
    }
    prefixes
}

/// Standard base64 with Kopf's altchars `-` and `.` instead of `+` and `/`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// BLAKE2b (RFC 7693) without a key, for a short digest. A dozen lines are cheaper
/// than a new dependency for hashing annotation names; verified against Python's
/// `hashlib.blake2b` in the tests.
fn blake2b(data: &[u8], digest_size: u8) -> Vec<u8> {
    const IV: [u64; 8] = [
        0x6a09_e667_f3bc_c908,
        0xbb67_ae85_84ca_a73b,
        0x3c6e_f372_fe94_f82b,
        0xa54f_f53a_5f1d_36f1,
        0x510e_527f_ade6_82d1,
        0x9b05_688c_2b3e_6c1f,
        0x1f83_d9ab_fb41_bd6b,
        0x5be0_cd19_137e_2179,
    ];
    let mut h = IV;
    h[0] ^= 0x0101_0000 ^ u64::from(digest_size);
    let mut counter: u128 = 0;
    let blocks = data.len().div_ceil(128).max(1);
    for i in 0..blocks {
        let start = i * 128;
        let end = (start + 128).min(data.len());
        let mut block = [0u8; 128];
        block[..end - start].copy_from_slice(&data[start..end]);
        counter += (end - start) as u128;
        compress(&mut h, &block, counter, i + 1 == blocks);
    }
    h.iter()
        .flat_map(|w| w.to_le_bytes())
        .take(usize::from(digest_size))
        .collect()
}

fn compress(h: &mut [u64; 8], block: &[u8; 128], counter: u128, last: bool) {
    const SIGMA: [[usize; 16]; 10] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
        [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
        [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
        [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
        [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
        [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
        [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
        [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
        [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    ];
    let mut m = [0u64; 16];
    for (i, word) in m.iter_mut().enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&block[i * 8..i * 8 + 8]);
        *word = u64::from_le_bytes(bytes);
    }
    let mut v = [0u64; 16];
    v[..8].copy_from_slice(h);
    v[8..].copy_from_slice(&[
        0x6a09_e667_f3bc_c908,
        0xbb67_ae85_84ca_a73b,
        0x3c6e_f372_fe94_f82b,
        0xa54f_f53a_5f1d_36f1,
        0x510e_527f_ade6_82d1,
        0x9b05_688c_2b3e_6c1f,
        0x1f83_d9ab_fb41_bd6b,
        0x5be0_cd19_137e_2179,
    ]);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "splitting the 128-bit counter into words"
    )]
    {
        v[12] ^= counter as u64;
        v[13] ^= (counter >> 64) as u64;
    }
    if last {
        v[14] = !v[14];
    }
    for round in 0..12 {
        let s = &SIGMA[round % 10];
        let mut g = |a: usize, b: usize, c: usize, d: usize, x: u64, y: u64| {
            v[a] = v[a].wrapping_add(v[b]).wrapping_add(x);
            v[d] = (v[d] ^ v[a]).rotate_right(32);
            v[c] = v[c].wrapping_add(v[d]);
            v[b] = (v[b] ^ v[c]).rotate_right(24);
            v[a] = v[a].wrapping_add(v[b]).wrapping_add(y);
            v[d] = (v[d] ^ v[a]).rotate_right(16);
            v[c] = v[c].wrapping_add(v[d]);
            v[b] = (v[b] ^ v[c]).rotate_right(63);
        };
        g(0, 4, 8, 12, m[s[0]], m[s[1]]);
        g(1, 5, 9, 13, m[s[2]], m[s[3]]);
        g(2, 6, 10, 14, m[s[4]], m[s[5]]);
        g(3, 7, 11, 15, m[s[6]], m[s[7]]);
        g(0, 5, 10, 15, m[s[8]], m[s[9]]);
        g(1, 6, 11, 12, m[s[10]], m[s[11]]);
        g(2, 7, 8, 13, m[s[12]], m[s[13]]);
        g(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for i in 0..8 {
        h[i] ^= v[i] ^ v[i + 8];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kopf() -> KeyScheme<'static> {
        KeyScheme {
            prefix: "kopf.zalando.org",
            v1: true,
            marked: false,
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn blake2b_matches_python_hashlib() {
        // python3 -c "import hashlib; print(hashlib.blake2b(b'abc').hexdigest())" etc.
        assert_eq!(
            hex(&blake2b(b"abc", 64)),
            "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1\
             7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"
        );
        assert_eq!(hex(&blake2b(b"abc", 4)), "63906248");
        assert_eq!(hex(&blake2b(b"", 4)), "1271cf25");
        assert_eq!(
            hex(&blake2b(&[b'x'; 300], 4)),
            "b12499e1",
            "multi-block input"
        );
    }

    #[test]
    fn suffixes_match_kopf() {
        // Values from Kopf's own `make_suffix`, run in Python 3.11.
        assert_eq!(hash_suffix(&"a".repeat(50)), "-koaVtw");
        assert_eq!(hash_suffix(&"x".repeat(50)), "-5yByEg");
        assert_eq!(hash_suffix("create_fn"), "-AZjFuA");
        assert_eq!(
            hash_suffix("fn/spec.field"),
            "-6c.C2g",
            "altchars kept inside"
        );
        assert_eq!(hash_suffix(""), "-EnHPJQ");
    }

    #[test]
    fn the_kopf_md_example_of_a_50_char_id() {
        let id = "a".repeat(50);
        assert_eq!(
            kopf().keys(&id),
            vec![
                format!("kopf.zalando.org/{id}"),
                format!("kopf.zalando.org/{}-koaVtw", "a".repeat(39))
            ]
        );
    }

    #[test]
    fn short_ids_and_safe_keys() {
        assert_eq!(
            kopf().keys("create_fn"),
            vec!["kopf.zalando.org/create_fn".to_owned()]
        );
        assert_eq!(
            kopf().keys("fn/spec.field"),
            vec!["kopf.zalando.org/fn.spec.field".to_owned()]
        );
        assert_eq!(safe_key("a/b<c>"), "a.b_c_");
        let no_v1 = KeyScheme {
            v1: false,
            ..kopf()
        };
        assert_eq!(no_v1.keys(&"a".repeat(50)).len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn the_short_way_forms_the_keys_the_rules_form(
            key in "[a-z_./<>-]{0,70}|[a-z_]{30,70}|.{0,70}",
            prefix in "kopf.zalando.org|[a-z.]{1,60}",
            v1: bool,
        ) {
            let scheme = KeyScheme { prefix: &prefix, v1, marked: false };
            proptest::prop_assert_eq!(scheme.keys(&key), scheme.formed_keys(&key));
        }
    }

    /// Kopf's own `make_keys(key, body=...)` (kopf 1.45.2) gave these.
    #[test]
    fn replicasets_of_deployments_have_marked_keys() {
        let owned = serde_json::json!({
            "kind": "ReplicaSet",
            "metadata": {"ownerReferences": [{"kind": "Deployment", "name": "web"}]},
        });
        assert!(collision_marked(&owned));
        for unmarked in [
            serde_json::json!({"kind": "ReplicaSet", "metadata": {}}),
            serde_json::json!({"kind": "Pod", "metadata": owned["metadata"].clone()}),
            serde_json::json!({"kind": "ReplicaSet", "metadata": {"ownerReferences": [{"kind": "Other"}]}}),
        ] {
            assert!(!collision_marked(&unmarked), "{unmarked}");
        }
        let marked = KeyScheme {
            marked: true,
            ..kopf()
        };
        assert_eq!(
            marked.keys("create_fn"),
            ["kopf.zalando.org/create_fn-ofDRS"]
        );
        assert_eq!(
            marked.keys("parent/sub"),
            ["kopf.zalando.org/parent.sub-ofDRS"]
        );
        assert_eq!(
            marked.keys(&"a".repeat(60)),
            [
                format!("kopf.zalando.org/{}-SGMMug", "a".repeat(56)),
                format!("kopf.zalando.org/{}-SGMMug", "a".repeat(39)),
            ]
        );
        assert_eq!(
            marked.marker_key(),
            kopf().marker_key(),
            "the marker is not marked"
        );
    }

    #[test]
    fn long_ids_hash_in_both_generations() {
        // Python: make_v2_key / make_v1_key of Kopf's StorageKeyFormingConvention.
        let id = "a".repeat(64);
        assert_eq!(
            kopf().keys(&id),
            vec![
                format!("kopf.zalando.org/{}-5Keq3A", "a".repeat(56)),
                format!("kopf.zalando.org/{}-5Keq3A", "a".repeat(39)),
            ]
        );
        // V2 hashes the raw id, V1 the safe one: the suffixes differ.
        let id = format!("parent/sub<1>/{}", "z".repeat(60));
        assert_eq!(
            kopf().keys(&id),
            vec![
                format!("kopf.zalando.org/parent.sub_1_.{}-93itxA", "z".repeat(42)),
                format!("kopf.zalando.org/parent.sub_1_.{}-FqaZcw", "z".repeat(25)),
            ]
        );
        let name = kopf().v2_key(&id);
        assert_eq!(name.split_once('/').map(|(_, n)| n.len()), Some(63));
    }

    #[test]
    fn markers_and_marked_prefixes() {
        assert_eq!(kopf().marker_key(), None);
        let custom = KeyScheme {
            prefix: "example.com",
            v1: true,
            marked: false,
        };
        assert_eq!(
            custom.marker_key().as_deref(),
            Some("example.com/kopf-managed")
        );
        let found = marked_prefixes([
            "kopf.zalando.org/x",
            "my.kopf.zalando.org/y",
            "other.io/kopf-managed",
            "other.io/z",
            "unrelated.io/a",
            "noslash",
        ]);
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            vec!["kopf.zalando.org", "my.kopf.zalando.org", "other.io"]
        );
        assert!(!kopf().prefix_too_long());
    }

    #[test]
    fn prefixes_too_long_for_long_ids_are_found_for_kopfs_warning() {
        use crate::persistence::{AnnotationsProgress, ProgressStorage};
        assert!(long_prefixes(&Persistence::default()).is_empty());
        let long = format!("{}.example.com", "a".repeat(180));
        let persistence = Persistence {
            progress_storage: ProgressStorage::Annotations(AnnotationsProgress {
                prefix: long.clone(),
                ..AnnotationsProgress::default()
            }),
            ..Persistence::default()
        };
        assert_eq!(persistence.check(), Ok(()), "Kopf only warns");
        assert_eq!(long_prefixes(&persistence), vec![long.as_str()]);
    }
}
