//! Host memory: everything a guest hands the host is bounded before it is kept or
//! parsed, and the excess fails the call with an error naming the limit; the declared
//! memory caps of the calls running at once share one budget; and nothing a guest
//! asks for runs long on the executor (WASI randomness).

use std::time::{Duration, Instant};

use kapsel_host::Record;
use kapsel_tests::*;
use kube::api::Api;

use super::{Figure, Stage, assert_no_events, refused_at_load, rss_mib, sample, test_limits};

/// The size a failure says was refused (`... of <n> bytes, above the limit ...`, or
/// `more than <n> Events`), for the figures; `?` when it names none.
fn refused_size(failure: &str) -> String {
    let digits_before = |text: &str| {
        let digits: String = text
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.chars().rev().collect::<String>()
    };
    failure
        .split_once(" bytes, above the limit")
        .map(|(before, _)| digits_before(before))
        .filter(|size| !size.is_empty())
        .unwrap_or_else(|| "?".to_owned())
}

/// Measured: one call logging 200 MiB kept +205 MiB (512 MiB of debug lines under `-q`:
/// +528 MiB); memos 8 × 40 MB kept +322 MiB; index entries 8 × 20 MB +162 MiB; 500
/// Events of 4 MiB peaked at 718 MiB; a 50 MB result disappeared after the handler
/// "succeeded"; four guests asking WASI for 64 MiB of random bytes made `/healthz` take
/// 3.7–8 s; one call posted 10,000 Events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_data_is_bounded_before_it_is_kept() {
    let mut limits = test_limits();
    // Below the guest's API burst, so that the Events per call are refused by their own
    // limit and not by the pace.
    limits.max_events_per_call = 10;
    let stage = Stage::start(&["hostile", "polite"], limits.clone(), &[]).await;
    let rss_before = rss_mib();
    let baseline = stage.baseline().await;
    let (_, _, health_baseline) = stage.health().await;

    // (handler, attack, what the failure must name, the limit)
    let attacks = [
        // First, so that liveness is asked while these calls run.
        (
            "random",
            "random",
            "--max-random-bytes",
            limits.max_random_bytes,
        ),
        (
            "log_line",
            "log-line",
            "--max-log-line-bytes",
            limits.max_log_line_bytes as u64,
        ),
        (
            "log_flood",
            "log-flood",
            "--max-log-bytes-per-call",
            limits.max_log_bytes_per_call as u64,
        ),
        (
            "empty_lines",
            "empty-lines",
            "--max-log-bytes-per-call",
            limits.max_log_bytes_per_call as u64,
        ),
        (
            "memo_hog",
            "memo-hog",
            "--max-memo-bytes",
            limits.max_memo_bytes as u64,
        ),
        (
            "index_hog",
            "index-hog",
            "--max-index-bytes",
            limits.max_index_bytes as u64,
        ),
        (
            "event_hog",
            "event-hog",
            "--max-event-bytes",
            limits.max_event_bytes as u64,
        ),
        (
            "event_flood",
            "event-flood",
            "--max-events-per-call",
            u64::from(limits.max_events_per_call),
        ),
        (
            "big_result",
            "big-result",
            "--max-result-bytes",
            limits.max_result_bytes as u64,
        ),
        (
            "big_patch",
            "big-patch",
            "--max-patch-bytes",
            limits.max_patch_bytes as u64,
        ),
        (
            "big_request",
            "big-request",
            "--max-patch-bytes",
            limits.max_patch_bytes as u64,
        ),
    ];
    for round in 0..4 {
        for (_, attack, _, _) in attacks {
            stage.attack(&format!("{attack}-{round}"), attack).await;
        }
    }
    // Liveness answers in time while the calls run: nothing a guest asks for (64 MiB of
    // random bytes) holds up the executor.
    let allowed = (health_baseline * 25).max(Duration::from_secs(1));
    let mut took = Duration::ZERO;
    let polling = Instant::now();
    while polling.elapsed() < Duration::from_secs(3) {
        let (code, body, answered) = stage.health().await;
        assert_eq!(code, 200, "{body}");
        took = took.max(answered);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        took <= allowed,
        "liveness took {took:?} (baseline {health_baseline:?})"
    );
    for (handler, attack, flag, limit) in attacks {
        let failure = stage.failure_of(handler, &format!("{attack}-0")).await;
        assert!(failure.contains(flag), "{handler}: {failure}");
        Figure::new(attack)
            .with("refused_bytes", refused_size(&failure))
            .with("bound", limit)
            .with("flag", flag)
            .print();
    }

    // Nothing of it was kept: no log line above the limit, no annotation, no result.
    let longest = stage
        .journal
        .records()
        .iter()
        .filter_map(|r| match r {
            Record::GuestLog { message, .. } => Some(message.len()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    assert!(
        longest <= 16 << 10,
        "a log line of {longest} bytes was kept"
    );

    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(stage.client.clone(), "default");
    let patched = configmaps.get("big-patch-0").await.expect("the object");
    let annotations = patched.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("hostile/big"),
        "the 2 MiB patch landed"
    );
    let created = configmaps
        .get_opt("big-request-0-big")
        .await
        .expect("a lookup");
    assert!(created.is_none(), "the 2 MiB ConfigMap was created");
    // The handler with the big result failed, so the object is not handled: no diff-base.
    let unhandled = configmaps.get("big-result-0").await.expect("the object");
    let annotations = unhandled.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("kopf.zalando.org/last-handled-configuration"),
        "{annotations:?}"
    );
    // No Event of 4 MiB, and no more Events of one call than the limit.
    assert_no_events(&stage.client, &["Hog"]).await;
    let flood =
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(stage.client.clone(), "default")
            .list(&Default::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("Flood")
                    && e.involved_object.name.as_deref() == Some("event-flood-0")
            })
            .count();
    assert!(
        flood <= limits.max_events_per_call as usize,
        "{flood} Events of one call"
    );

    let under = stage.assert_polite("after-data", baseline).await;
    stage.assert_healthy().await;
    let grown = rss_mib().saturating_sub(rss_before);
    assert!(grown < 256, "RSS grew by {grown} MiB");
    Figure::new("guest-data")
        .polite(baseline, &[under])
        .ms("healthz_baseline", health_baseline)
        .ms("healthz_under_attack", took)
        .ms("healthz_allowed", allowed)
        .with("flood_events_posted", flood)
        .with("rss_grown_mib", grown)
        .with("rss_bound_mib", 256)
        .print();
    stage.stop().await;
}

/// Measured: four objects failing with 4 MiB messages logged 117 MB and kept +234 MiB in
/// 25 s, and the progress annotation's patch then failed with 413. A message is cut to
/// what a log line may be; the failure stays what the handler said (temporary, with its
/// delay), and its record is stored on the object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_message_is_cut_to_a_log_line_and_its_record_stored() {
    let limits = test_limits();
    let stage = Stage::start(&["hostile"], limits.clone(), &[]).await;
    stage.attack("big-error-0", "big-error").await;
    let failure = stage.failure_of("big_error", "big-error-0").await;
    assert!(
        failure.len() <= limits.max_log_line_bytes + 256,
        "a failure of {} bytes was kept",
        failure.len()
    );
    assert!(
        failure.contains("[4194304 bytes in all, cut to --max-log-line-bytes]"),
        "{}",
        &failure[failure.len().saturating_sub(200)..]
    );
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(stage.client.clone(), "default");
    fn record(cm: Option<&k8s_openapi::api::core::v1::ConfigMap>) -> Option<serde_json::Value> {
        let annotations = cm?.metadata.annotations.as_ref()?;
        let text = annotations.get("kopf.zalando.org/big_error")?;
        serde_json::from_str(text).ok()
    }
    fn stored(cm: Option<&k8s_openapi::api::core::v1::ConfigMap>) -> bool {
        record(cm).is_some()
    }
    tokio::time::timeout(
        PATIENCE,
        kube::runtime::wait::await_condition(configmaps.clone(), "big-error-0", stored),
    )
    .await
    .expect("the progress record is stored")
    .expect("a watch");
    let stored = configmaps.get("big-error-0").await.expect("the object");
    let stored = record(Some(&stored)).expect("the record");
    let message = stored["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with("cut to --max-log-line-bytes]"),
        "{stored}"
    );
    assert_eq!(stored["success"], false);
    assert_eq!(stored["failure"], false, "still temporary: {stored}");
    assert!(
        stored["delayed"].is_string(),
        "retried after its delay: {stored}"
    );
    Figure::new("big-error")
        .with("message_bytes", 4 << 20)
        .with("kept_bytes", failure.len())
        .with("bound", limits.max_log_line_bytes)
        .print();
    stage.stop().await;
}

/// Measured: 8 lists of 54 MB each added ~530 MiB to the host, read whole outside every
/// budget. A list is read page by page (500 objects a page) and refused past
/// `--max-list-bytes`, before more is read; one under the bound arrives whole, every page
/// of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_answers_are_paged_and_bounded() {
    let mut limits = test_limits();
    limits.max_list_bytes = 1 << 20;
    let stage = Stage::start(&["hostile"], limits.clone(), &[]).await;
    // 600 small ConfigMaps: more than a page, less than the bound.
    for n in 0..600 {
        stage
            .configmap(
                &format!("filler-{n}"),
                serde_json::json!({"kapsel.test/filler": "yes"}),
            )
            .await;
    }
    let lists_before = list_requests(&stage);
    stage.attack("big-list", "big-list").await;
    let line = wait_for_line(&stage, "big-list all: ").await;
    // Every ConfigMap: the 600, big-list's own, and what the cluster has besides.
    let listed: usize = line
        .split("all: listed ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(listed >= 601, "{line}");
    assert!(line.ends_with("own: listed 1"), "{line}");
    assert!(
        list_requests(&stage) - lists_before >= 3,
        "the 601 were read in pages"
    );
    // 300 ConfigMaps of 4 KB more: the whole no longer fits, its own list still does.
    for n in 0..300 {
        create(
            &stage.client,
            &core("ConfigMap", "configmaps"),
            Some("default"),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("bulky-{n}")}, "data": {"x": "b".repeat(4000)}}),
        )
        .await;
    }
    stage.attack("big-list-2", "big-list").await;
    let line = wait_for_line(&stage, "big-list all: refused").await;
    assert!(
        line.contains("413") && line.contains("--max-list-bytes"),
        "{line}"
    );
    assert!(line.ends_with("own: listed 2"), "{line}");
    Figure::new("big-list")
        .with("listed_under_bound", listed)
        .with("bound", limits.max_list_bytes)
        .print();
    stage.stop().await;
}

/// How many lists of ConfigMaps the cluster has answered.
fn list_requests(stage: &Stage) -> u64 {
    stage
        .cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.verb == "list" && c.kind.resource == "configmaps")
        .map(|c| c.count)
        .sum()
}

/// The first line the hostile guest logged that starts with `prefix`.
async fn wait_for_line(stage: &Stage, prefix: &str) -> String {
    let found = |records: &[Record]| {
        records.iter().find_map(|r| match r {
            Record::GuestLog { message, .. } if message.starts_with(prefix) => {
                Some(message.clone())
            }
            _ => None,
        })
    };
    stage
        .journal
        .wait_for(PATIENCE * 2, |records| found(records).is_some())
        .await
        .unwrap_or_else(|_| panic!("never logged {prefix:?}"));
    found(&stage.journal.records()).unwrap_or_default()
}

/// Measured: six handlers declaring 512 MiB each took 2.9 GiB. Each `greedy` call
/// declares 64 MiB, four slots of 16 MiB: a handler holds at most four of the eight
/// slots, so one runs at a time, holding 48 MiB for 1.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_memory_shares_one_budget() {
    let stage = Stage::start(&["hostile", "polite"], test_limits(), &[]).await;
    let rss_before = rss_mib();
    let baseline = stage.baseline().await;
    for i in 0..6 {
        stage.attack(&format!("greedy-{i}"), "greedy").await;
    }
    let started = Instant::now();
    let mut peak_rss = 0;
    let mut peak_busy = 0.0_f64;
    let mut seen_waiting = false;
    loop {
        let metrics = stage.metrics().await;
        let busy = sample(&metrics, "kapsel_call_slots_busy{pool=\"handlers\"}").unwrap_or(0.0);
        let waiting =
            sample(&metrics, "kapsel_call_slots_waiting{pool=\"handlers\"}").unwrap_or(0.0);
        peak_busy = peak_busy.max(busy);
        seen_waiting |= waiting >= 1.0;
        peak_rss = peak_rss.max(rss_mib());
        let records = stage.journal.records();
        let done = (0..6)
            .filter(|i| !outcomes(&records, "greedy", &format!("default/greedy-{i}")).is_empty())
            .count();
        if done == 6 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE * 3,
            "the greedy calls never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    assert!(
        peak_busy <= 4.0,
        "greedy calls held {peak_busy} slots at once"
    );
    assert!(seen_waiting, "greedy calls never waited for one another");
    let grown = peak_rss.saturating_sub(rss_before);
    // Six at once would be 6 × 48 MiB; one at a time is 48 MiB.
    assert!(grown < 200, "RSS grew by {grown} MiB");
    // One at a time: the six calls of 1.5 s each take 9 s (the first may have started
    // while the others were created). Four at once (one slot each, as many as the
    // handler's share) would take two rounds, 3 s, within the ceiling above.
    assert!(
        took >= Duration::from_millis(7000),
        "six greedy calls ended within {took:?}: several ran at once (RSS grew by \
         {grown} MiB)"
    );
    let under = stage.assert_polite("beside-greedy", baseline).await;
    stage.assert_healthy().await;
    Figure::new("declared-memory")
        .polite(baseline, &[under])
        .with("peak_slots_busy", peak_busy)
        .ms("six_calls_took", took)
        .ms("six_calls_at_least", Duration::from_millis(7000))
        .with("peak_rss_grown_mib", grown)
        .with("rss_bound_mib", 200)
        .print();
    stage.stop().await;
}

/// Measured: six handlers declaring 512 MiB each took 2.9 GiB. A handler may declare no
/// more than its share of the slots holds (here 2 of 4 slots of 16 MiB: 32 MiB), so the
/// slots bound the sum of the caps; a guest declaring more (the hostile one: 64 MiB) is
/// refused at load, and the others run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_declare_more_memory_than_its_share() {
    let mut limits = test_limits();
    limits.call_slots = 4;
    let stage = Stage::start(&["hostile", "polite"], limits, &[]).await;
    let rejected = refused_at_load(&stage.journal, "hostile is refused at load").await;
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected[0].contains("hostile.wasm")
            && rejected[0].contains("asks for 64 MiB of memory")
            && rejected[0].contains("maximum of 32 MiB"),
        "{rejected:?}"
    );
    let latency = stage.polite_latency("beside-refused").await;
    stage.assert_healthy().await;
    Figure::new("declared-memory-at-load")
        .with("declared_mib", 64)
        .with("bound_mib", 32)
        .with("refused_at_load", rejected.len())
        .ms("polite_after_refusal", latency)
        .print();
    stage.stop().await;
}
