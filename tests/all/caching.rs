//! The compiled-guest cache (`--cache-dir`): a restart loads the guest's machine code
//! from it instead of compiling, faster; a damaged entry is not trusted: the guest is
//! compiled again and the entry rewritten.

use std::path::{Path, PathBuf};

use kapsel_host::testing::Cluster;
use kapsel_host::{Operator, Record};
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
