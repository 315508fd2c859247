//! `kapsel test` itself: case files run against real guests, each on a fresh embedded
//! cluster, with time advanced instead of waited for.

use std::path::PathBuf;

use kapsel_host::testing::{CaseSummary, run_cases};
use kapsel_tests::guest;

fn case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("cases")
        .join(name)
}

async fn run(name: &str) -> (Result<CaseSummary, String>, String) {
    let mut out = Vec::new();
    let result = run_cases(&guest("misbehaving"), &[case(name)], &mut out)
        .await
        .map_err(|e| e.to_string());
    (result, String::from_utf8_lossy(&out).into_owned())
}

/// Under `kapsel test` handler time moves only when a case advances it, so this case
/// can pass only if `advance` woke the delayed handler: no wall-clock bound is needed.
#[tokio::test]
async fn a_one_minute_retry_delay_passes_instantly() {
    let (result, report) = run("slow-retry.yaml").await;
    assert_eq!(
        result,
        Ok(CaseSummary {
            passed: 1,
            failed: 0
        }),
        "{report}"
    );
}

/// After `advance`, every handler call that fell due within it has run before the next
/// step is checked: a count that misses the retry at 60 s fails the case.
#[tokio::test]
async fn a_count_after_an_advance_sees_the_calls_that_fell_due() {
    let (result, report) = run("counted-after-advance.yaml").await;
    assert_eq!(
        result,
        Ok(CaseSummary {
            passed: 0,
            failed: 1
        }),
        "{report}"
    );
    assert!(report.contains("step 3, "), "{report}");
}

#[tokio::test]
async fn a_wrong_expectation_fails_the_case_with_a_diff() {
    let (result, report) = run("broken-expectation.yaml").await;
    assert_eq!(
        result,
        Ok(CaseSummary {
            passed: 0,
            failed: 1
        }),
        "{report}"
    );
    assert!(
        report.contains("FAIL  a wrong expectation fails with a diff"),
        "{report}"
    );
    assert!(report.contains("step 3, "), "{report}");
    assert!(
        report.contains("- metadata.annotations.kapsel.test/attempts: expected \"3\", got \"2\""),
        "{report}"
    );
    // --verbose: what the operator did.
    assert!(
        report.contains("called slow_retry for default/patient"),
        "{report}"
    );
}

#[tokio::test]
async fn malformed_case_files_are_reported_with_their_location() {
    let (result, report) = run("malformed.yaml").await;
    let error = result.expect_err("a malformed case is an input error");
    assert!(
        error.ends_with(
            "tests/cases/malformed.yaml:7:5: steps[1]: expected a duration like 60s, 500ms, 2m or 1h, got \"soon\""
        ),
        "{error}"
    );
    assert!(report.is_empty(), "nothing runs: {report}");
}

/// `not-called: slow_retyr` would pass forever: a handler the guest does not declare is
/// an input error at its place, and nothing runs.
#[tokio::test]
async fn expectations_about_undeclared_handlers_are_refused_before_running() {
    let (result, report) = run("undeclared-handler.yaml").await;
    let error = result.expect_err("an undeclared handler is an input error");
    assert!(
        error.ends_with(
            "tests/cases/undeclared-handler.yaml:10:26: the guest declares no handler \"slow_retyr\" (it declares: crash, hog, ok, slow_retry, spin)"
        ),
        "{error}"
    );
    assert!(report.is_empty(), "nothing runs: {report}");
}

/// The README shows the tour case verbatim, and the tour passes.
#[tokio::test]
async fn the_readmes_case_example_is_the_tour_and_passes() {
    let workspace = kapsel_tests::workspace();
    let tour_path = workspace.join("examples/lifecycle/tests/cases/tour.yaml");
    let tour = std::fs::read_to_string(&tour_path).expect("the tour exists");
    let readme = std::fs::read_to_string(workspace.join("README.md")).expect("a README");
    let shown = readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|block| block.split_once("```\n").map(|(yaml, _)| yaml))
        .find(|yaml| yaml.starts_with("# examples/lifecycle/tests/cases/tour.yaml"))
        .expect("the README shows the tour");
    assert_eq!(shown, tour, "the README's case is not the tour file");
    kapsel_tests::case_file_passes("lifecycle", &tour_path).await;
}

/// The case files of `tests/cases/admission/` (or examples/admission's own) run against
/// examples/admission.
async fn run_admission(paths: &[PathBuf]) -> (Result<CaseSummary, String>, String) {
    let mut out = Vec::new();
    let result = run_cases(&kapsel_tests::guest("admission"), paths, &mut out)
        .await
        .map_err(|e| e.to_string());
    (result, String::from_utf8_lossy(&out).into_owned())
}

/// examples/admission's cases pass: reviews answered by its handlers (refused with the
/// message and code, labelled by the patch), and writes through the cluster refused or
/// stored labelled.
#[tokio::test]
async fn the_admission_examples_cases_pass() {
    let cases = kapsel_tests::workspace().join("examples/admission/tests/cases");
    let (result, report) = run_admission(&[cases]).await;
    assert_eq!(
        result,
        Ok(CaseSummary {
            passed: 2,
            failed: 0
        }),
        "{report}"
    );
}

/// Each way an admission step can fail says what differs, under the step.
#[tokio::test]
async fn admission_steps_that_do_not_hold_fail_saying_what_differs() {
    let (result, report) = run_admission(&[case("admission/failing")]).await;
    assert_eq!(
        result,
        Ok(CaseSummary {
            passed: 0,
            failed: 5
        }),
        "{report}"
    );
    for wanted in [
        "        step 1, ",
        "        refused apply KopfExample/bad: refused otherwise:\n          - message: expected a part \"must be forbidden\", got \"admission webhook \\\"check-field.kapsel-test.admission.kapsel.dev\\\" denied the request: field must not be forbidden\"\n          - code: expected 403, got 422\n          - the refusal: 422 \"admission webhook \\\"check-field.kapsel-test.admission.kapsel.dev\\\" denied the request: field must not be forbidden\"\n",
        "        refused apply ",
        "kopfexample-obj.yaml: not refused: the cluster took the write\n",
        "        review CREATE KopfExample/bad to check_field: the answer differs:\n          - expected allowed, got refused (422): \"field must not be forbidden\"\n",
        "        review CREATE ",
        "kopfexample-obj.yaml to mark_seen: the answer differs:\n          - warnings: expected [\"careful\"], got []\n          - patch: expected [], got [{\"op\":\"add\",\"path\":\"/metadata/labels/admission.kapsel.dev~1seen\",\"value\":\"yes\"}]\n",
        "kopfexample-obj.yaml: the answer differs:\n          - patched metadata.labels.admission.kapsel.dev/seen: expected \"no\", got \"yes\"\n",
    ] {
        assert!(report.contains(wanted), "{wanted:?} in:\n{report}");
    }
}

/// A review naming a handler the guest does not declare, or an operation kube does not
/// know, is an input error at its place: nothing runs.
#[tokio::test]
async fn malformed_admission_steps_are_refused_before_running() {
    let (result, report) = run_admission(&[case("admission/undeclared-handler.yaml")]).await;
    let error = result.expect_err("an undeclared handler is an input error");
    assert!(
        error.ends_with(
            "tests/cases/admission/undeclared-handler.yaml:5:16: the guest declares no admission handler \"check_feild\" (it declares: check_field, mark_seen)"
        ),
        "{error}"
    );
    assert!(report.is_empty(), "nothing runs: {report}");
    let (result, _) = run_admission(&[case("admission/unknown-operation.yaml")]).await;
    let error = result.expect_err("an unknown operation is an input error");
    assert!(
        error.ends_with(
            "tests/cases/admission/unknown-operation.yaml:3:5: steps[0]: unknown operation \"PATCH\": expected one of CREATE, UPDATE, DELETE, CONNECT"
        ),
        "{error}"
    );
}

/// What a review carries reaches the handlers of tests/guests/admission (the old object,
/// a dry run) and what they answer comes back (warnings, codes); a trapping handler
/// refuses a write through the cluster.
#[tokio::test]
async fn reviews_carry_what_kube_sends_and_answers_what_handlers_say() {
    kapsel_tests::case_passes("admission_hooks", "admission", "hooks.yaml").await;
}
