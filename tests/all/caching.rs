//! The compiled-guest cache (`--cache-dir`): a restart loads the guest's machine code
//! from it instead of compiling, faster; a damaged entry is not trusted: the guest is
//! compiled again and the entry rewritten; the cache keeps the guests served and is
//! bounded at start and after each reload (`--max-cache-mib`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kapsel_host::testing::Cluster;
use kapsel_host::{Limits, Operator, Record};
use kapsel_tests::*;

/// How the guest was loaded by one run of the operator: (from the cache, seconds).
async fn load_once(cluster: &Cluster, guest_file: &Path, cache: &Path) -> (bool, f64) {
    let operator = cluster.start_operator(Operator::new([guest_file]).cache_dir(cache));
    let journal = operator.journal().clone();
    let mut loaded = None;
    journal
        .wait_for(PATIENCE * 3, |records| {
            loaded = records.iter().find_map(|r| match r {
                Record::GuestLoaded {
                    cached, seconds, ..
                } => Some((*cached, *seconds)),
                _ => None,
            });
            loaded.is_some()
        })
        .await
        .unwrap_or_else(|records| panic!("the guest never loaded: {records:#?}"));
    // It serves, whichever way its code was made.
    journal
        .wait_for(PATIENCE, |r| !calls(r, "log_event").is_empty())
        .await
        .unwrap_or_else(|records| panic!("the guest never ran: {records:#?}"));
    operator.stop().await.expect("a clean stop");
    loaded.expect("the record the wait ended with")
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(cache)
        .expect("the cache folder")
        .map(|e| e.expect("an entry").path())
        .collect()
}

#[tokio::test]
async fn a_restart_loads_the_compiled_guest_from_the_cache() {
    let cache = std::env::temp_dir().join(format!("kapsel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let cluster = Cluster::start().await.expect("cluster");
    create(
        &cluster.client(),
        &core("Pod", "pods"),
        Some("default"),
        pod("p"),
    )
    .await;
    let seed = guest("seed");

    let (cached, compiled_in) = load_once(&cluster, &seed, &cache).await;
    assert!(!cached, "nothing cached yet");
    let stored = entries(&cache);
    assert_eq!(stored.len(), 1, "one entry: {stored:?}");

    let (cached, loaded_in) = load_once(&cluster, &seed, &cache).await;
    assert!(cached, "the restart reads the cache");
    assert!(
        loaded_in < compiled_in,
        "reading the cache ({loaded_in} s) is faster than compiling ({compiled_in} s)"
    );

    // One byte damaged: the entry is set aside, the guest compiled, the entry rewritten.
    let mut bytes = std::fs::read(&stored[0]).expect("the entry");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&stored[0], &bytes).expect("damaged");
    let (cached, _) = load_once(&cluster, &seed, &cache).await;
    assert!(!cached, "a damaged entry is not used");
    let (cached, _) = load_once(&cluster, &seed, &cache).await;
    assert!(cached, "the entry was written again");

    cluster.shutdown().await.expect("shutdown");
    std::fs::remove_dir_all(&cache).ok();
}

/// `component` with a custom section that holds `version`: another file, another
/// digest, the same guest.
fn version_of(component: &[u8], version: u8) -> Vec<u8> {
    let name = b"kapsel-test-version";
    let mut bytes = component.to_vec();
    // Section id 0 (custom), its size, then the name's length, the name, the payload;
    // every length below 128 is one LEB128 byte.
    bytes.extend_from_slice(&[0, u8::try_from(name.len() + 2).expect("short")]);
    bytes.push(u8::try_from(name.len()).expect("short"));
    bytes.extend_from_slice(name);
    bytes.push(version);
    bytes
}

/// How many reloads the journal has recorded.
fn reloads(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, Record::GuestReloaded { change, .. } if change == "replaced"))
        .count()
}

/// A hundred entries no guest served uses (left by earlier versions, or another
/// operator's) are removed at start, and after each reload the replaced version's entry
/// goes; the entry of the version served is never removed (`--max-cache-mib 0`).
#[tokio::test]
async fn the_cache_keeps_the_guests_served_and_is_bounded_at_start_and_after_each_reload() {
    let dir = std::env::temp_dir().join(format!("kapsel-bounded-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (folder, cache) = (dir.join("guests"), dir.join("cache"));
    std::fs::create_dir_all(&folder).expect("the guests' folder");
    std::fs::create_dir_all(&cache).expect("the cache");
    let long_ago = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..100u32 {
        let file = cache.join(format!("{i:064x}-{:016x}.cwasm", 0));
        std::fs::write(&file, [0u8; 4096]).expect("a stale entry");
        let opened = std::fs::File::options()
            .append(true)
            .open(&file)
            .expect("open");
        opened.set_modified(long_ago).expect("dated");
    }
    let seed = std::fs::read(guest("seed")).expect("the seed guest");
    let file = folder.join("seed.wasm");
    std::fs::write(&file, version_of(&seed, 0)).expect("copied");

    let cluster = Cluster::start().await.expect("cluster");
    let mut limits = Limits::default();
    limits.max_cache_mib = 0;
    let operator = cluster.start_operator(
        Operator::new([&folder])
            .cache_dir(&cache)
            .limits(limits)
            .reload_interval(Duration::from_millis(100)),
    );
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE * 3, |r| {
            r.iter().any(|r| matches!(r, Record::GuestLoaded { .. }))
        })
        .await
        .unwrap_or_else(|records| panic!("the guest never loaded: {records:#?}"));
    let mut served = entries(&cache);
    assert_eq!(
        served.len(),
        1,
        "the served guest's entry alone: {served:?}"
    );

    for version in 1..=5u8 {
        std::fs::write(&file, version_of(&seed, version)).expect("a new version");
        journal
            .wait_for(PATIENCE * 3, |r| reloads(r) == usize::from(version))
            .await
            .unwrap_or_else(|records| panic!("version {version} never served: {records:#?}"));
        let now = entries(&cache);
        assert_eq!(now.len(), 1, "version {version}'s entry alone: {now:?}");
        assert_ne!(now, served, "version {version} has an entry of its own");
        served = now;
    }
    operator.stop().await.expect("a clean stop");
    cluster.shutdown().await.expect("shutdown");
    std::fs::remove_dir_all(&dir).ok();
}
