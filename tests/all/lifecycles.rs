//! Kopf's lifecycles (`execution.lifecycle`, KOPF.md §1.15): which of the due changing
//! handlers run in one processing cycle, each cycle ending with a patch. Each test creates
//! an object with the `changes` guest's three `lifecycle` creation handlers and reads, from
//! every version of it the API server wrote, how many of their results had landed.

use kapsel_cli::Runner;
use kapsel_host::Settings;
use kapsel_host::testing::RunningOperator;
use kapsel_tests::*;
use serde_json::json;

const HANDLERS: [&str; 3] = ["lifecycle_one", "lifecycle_two", "lifecycle_three"];

/// How many of the three results each version of `name` showed, from the first with
/// one on, each count once: `[1, 2, 3]` is a cycle per handler, `[3]` one cycle for all.
fn steps(s: &Scene, name: &str) -> Vec<usize> {
    let mut steps: Vec<usize> = s
        .tracker
        .versions(name)
        .iter()
        .map(|seen| {
            HANDLERS
                .iter()
                .filter(|h| !status(&seen.body, h).is_null())
                .count()
        })
        .filter(|&count| count > 0)
        .collect();
    steps.dedup();
    steps
}

/// The handlers in the order they were called for `object`.
fn order(operator: &RunningOperator, object: &str) -> Vec<String> {
    operator
        .journal()
        .records()
        .iter()
        .filter_map(|r| match r {
            kapsel_host::Record::HandlerFinished {
                handler,
                object: Some(o),
                ..
            } if o == object && HANDLERS.contains(&handler.as_str()) => Some(handler.clone()),
            _ => None,
        })
        .collect()
}

/// Creates `name` with the three handlers and waits until all three are done.
async fn create_and_handle(s: &Scene, name: &str) {
    s.create(kopfexample(
        name,
        &["lifecycle"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    s.tracker
        .wait_for(name, "all three handled", |b| handled_with(b, &HANDLERS))
        .await;
}

/// An operator of the `changes` guest with `execution.lifecycle` set to `lifecycle`.
fn operator_with(s: &Scene, lifecycle: &str) -> RunningOperator {
    let mut settings = Settings::default();
    settings
        .set("execution.lifecycle", lifecycle)
        .expect("a lifecycle");
    s.cluster
        .start_operator(changes_operator().settings(settings))
}

/// Kopf's default, `asap`: one handler per cycle, in declaration order as none has
/// failed, so the results land one version at a time.
#[tokio::test]
async fn asap_runs_one_handler_per_cycle() {
    let s = Scene::start("lifecycle-asap").await;
    let operator = s.operator();
    create_and_handle(&s, "asap").await;
    assert_eq!(steps(&s, "asap"), [1, 2, 3], "{}", s.tracker.dump("asap"));
    assert_eq!(order(&operator, &s.object("asap")), HANDLERS);
    operator.stop().await.unwrap();
    s.shutdown().await;
}

/// `one_by_one` takes the first due handler in declaration order, where `asap` takes the
/// one with the fewest retries: when `lifecycle_one` fails its first attempt with a retry
/// due at once, `one_by_one` runs it again before the others, and `asap` runs the two
/// others (no retries) before it. Retries are not floored here, so that the failed
/// handler is due in the very next cycle.
#[tokio::test]
async fn one_by_one_takes_the_first_due_where_asap_takes_the_fewest_retries() {
    for (lifecycle, expected) in [
        (
            "asap",
            [
                "lifecycle_one",
                "lifecycle_two",
                "lifecycle_three",
                "lifecycle_one",
            ],
        ),
        (
            "one_by_one",
            [
                "lifecycle_one",
                "lifecycle_one",
                "lifecycle_two",
                "lifecycle_three",
            ],
        ),
    ] {
        let s = Scene::start(&format!("retried-{}", lifecycle.replace('_', "-"))).await;
        let mut settings = Settings::default();
        settings.set("execution.lifecycle", lifecycle).unwrap();
        let mut limits = kapsel_host::Limits::default();
        limits.min_retry_delay = std::time::Duration::ZERO;
        let operator = s.cluster.start_operator(
            kapsel_host::Operator::new([guest("changes")])
                .limits(limits)
                .settings(settings),
        );
        s.create(kopfexample(
            "retried",
            &["lifecycle"],
            json!({}),
            json!({}),
            json!({"first_fails": true}),
        ))
        .await;
        s.tracker
            .wait_for("retried", "all three handled", |b| {
                handled_with(b, &HANDLERS)
            })
            .await;
        assert_eq!(
            order(&operator, &s.object("retried")),
            expected,
            "{lifecycle}: {}",
            s.tracker.dump("retried")
        );
        operator.stop().await.unwrap();
        s.shutdown().await;
    }
}

/// `all_at_once`: every due handler in one cycle, so the one patch that ends it brings
/// all three results.
#[tokio::test]
async fn all_at_once_runs_every_handler_in_one_cycle() {
    let s = Scene::start("lifecycle-all").await;
    let operator = operator_with(&s, "all_at_once");
    create_and_handle(&s, "all").await;
    assert_eq!(steps(&s, "all"), [3], "{}", s.tracker.dump("all"));
    assert_eq!(order(&operator, &s.object("all")), HANDLERS);
    operator.stop().await.unwrap();
    s.shutdown().await;
}

/// `randomized` (one handler at random per cycle) and `shuffled` (all of them in one
/// cycle, in a random order), set on the command line: every handler runs, in as many
/// cycles as each says. Which order is chosen is the unit tests' matter (with a
/// seeded random source).
#[tokio::test]
async fn randomized_and_shuffled_run_every_handler() {
    for (lifecycle, cycles) in [("randomized", vec![1, 2, 3]), ("shuffled", vec![3])] {
        let s = Scene::start(&format!("lifecycle-{lifecycle}")).await;
        let changes = guest("changes");
        let setting = format!("execution.lifecycle={lifecycle}");
        let runner = Runner::start_on(
            s.client.clone(),
            [
                "run",
                "-A",
                "--standalone",
                "--setting",
                &setting,
                &changes.to_string_lossy(),
            ],
        )
        .await
        .expect("started");
        create_and_handle(&s, lifecycle).await;
        assert_eq!(
            steps(&s, lifecycle),
            cycles,
            "{lifecycle}: {}",
            s.tracker.dump(lifecycle)
        );
        let result = runner.stop().await;
        assert_eq!(result.exit_code, 0, "{}", result.output);
        s.shutdown().await;
    }
}

/// From a startup handler, as Kopf's `settings` in `@kopf.on.startup`: the `settings`
/// guest merges the operator's memo's `settings` (here `execution.lifecycle`; it also
/// serves only the objects labelled `kapsel.test/served=yes`), and the `changes` guest's
/// handlers then run all at once.
#[tokio::test]
async fn a_startup_handler_sets_the_lifecycle() {
    let s = Scene::start("lifecycle-startup").await;
    let operator = s.cluster.start_operator(
        kapsel_host::Operator::new([guest("changes"), guest("settings")])
            .memo(json!({"settings": {"execution": {"lifecycle": "all_at_once"}}})),
    );
    s.create(kopfexample(
        "started",
        &["lifecycle"],
        json!({"kapsel.test/served": "yes"}),
        json!({}),
        json!({}),
    ))
    .await;
    s.tracker
        .wait_for("started", "all three handled", |b| {
            handled_with(b, &HANDLERS)
        })
        .await;
    assert_eq!(steps(&s, "started"), [3], "{}", s.tracker.dump("started"));
    operator.stop().await.unwrap();
    s.shutdown().await;
}

/// The lifecycle plans sub-handlers too: under `all_at_once`, the `subhandlers` guest's
/// parent runs all three of its sub-handlers in its first call and completes in it, where
/// `asap` takes a call per sub-handler (`subhandlers`).
#[tokio::test]
async fn all_at_once_runs_every_sub_handler_in_one_call() {
    let s = Scene::start("lifecycle-subhandlers").await;
    let mut settings = Settings::default();
    settings.set("execution.lifecycle", "all_at_once").unwrap();
    let operator = s
        .cluster
        .start_operator(kapsel_host::Operator::new([guest("subhandlers")]).settings(settings));
    s.create(kopfexample(
        "parent",
        &[],
        json!({}),
        json!({}),
        json!({"items": ["a", "b", "c"]}),
    ))
    .await;
    let done = s
        .tracker
        .wait_for("parent", "creation handled", |b| {
            handled_with(b, &["create_fn"]) && progress_keys(b).is_empty()
        })
        .await;
    for item in ["a", "b", "c"] {
        assert_eq!(
            status(&done, &format!("create_fn/item-{item}")),
            &json!({"item": item})
        );
    }
    s.settled(&operator, &["parent"]).await;
    assert_calls(
        &operator.journal().records(),
        &s.object("parent"),
        &[("create_fn", 1)],
    );
    operator.stop().await.unwrap();
    s.shutdown().await;
}
