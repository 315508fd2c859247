//! The case format's parsing and its located errors.

use super::raw::parse_duration;
use super::*;
use serde_json::json;

/// Where the cases below pretend to be: files they name resolve from there.
fn hello() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/minimal/tests/cases/hello.yaml")
}

fn case(text: &str) -> Result<Case, CaseError> {
    parse(&hello(), text)
}

fn error(text: &str) -> String {
    let message = case(text).expect_err("must fail").to_string();
    let prefix = hello().display().to_string();
    message.replace(&prefix, "examples/minimal/tests/cases/hello.yaml")
}

#[test]
fn a_full_case_parses() {
    let parsed = case(
        r#"
given:
  - file: ../../../manifests/kopfexamples-crd.yaml
  - apiVersion: kopf.dev/v1
    kind: KopfExample
    metadata: {name: ex1}
steps:
  - expect:
      object: kopfexamples/ex1
      matches: {status: {create_fn: {message: hello world}}}
  - patch: {object: kex/ex1, namespace: other, merge: {spec: {field: x}}}
  - advance: 60s
  - sleep: 250ms
  - expect: {called: update_fn, times: 1, within: 2s}
  - expect: {not-called: delete_fn}
  - expect: {log: hello, handler: create_fn}
  - expect: {event: kopfexamples/ex1, type: Normal, reason: Created}
  - delete: kopfexamples/ex1
  - expect: {gone: kopfexamples/ex1}
  - expect: healthy
  - delete: {object: kex/ex2, namespace: other}
"#,
    )
    .expect("parses");
    assert_eq!(parsed.name, "hello");
    assert_eq!(
        parsed.given[0],
        Source::File(
            hello()
                .parent()
                .expect("a folder")
                .join("../../../manifests/kopfexamples-crd.yaml")
        )
    );
    assert_eq!(parsed.steps.len(), 12);
    assert_eq!(
        parsed.steps[11],
        Step::Delete(Target {
            resource: "kex".into(),
            name: "ex2".into(),
            namespace: Some("other".into())
        })
    );
    assert_eq!(
        parsed.steps[1],
        Step::Patch {
            target: Target {
                resource: "kex".into(),
                name: "ex1".into(),
                namespace: Some("other".into())
            },
            merge: json!({"spec": {"field": "x"}}),
        }
    );
    assert_eq!(parsed.steps[2], Step::Advance(Duration::from_secs(60)));
    assert_eq!(parsed.steps[3], Step::Sleep(Duration::from_millis(250)));
    assert_eq!(
        parsed.steps[4],
        Step::Expect(Expectation {
            what: Expected::Called {
                handler: "update_fn".into(),
                times: Some(1)
            },
            within: Duration::from_secs(2),
        })
    );
    assert!(matches!(
        &parsed.steps[0],
        Step::Expect(Expectation { what: Expected::Object { target, .. }, within })
            if target.namespace.is_none() && *within == DEFAULT_WITHIN
    ));
    assert!(matches!(
        &parsed.steps[10],
        Step::Expect(Expectation {
            what: Expected::Healthy(true),
            ..
        })
    ));
}

#[test]
fn a_missing_file_is_an_input_error_at_its_place() {
    assert_eq!(
        error("given:\n  - file: ../nowhere.yaml\nsteps:\n  - expect: healthy\n"),
        "examples/minimal/tests/cases/hello.yaml:2:11: the file ../nowhere.yaml does not exist (relative to the case file)"
    );
    assert_eq!(
        error("steps:\n  - apply: {file: gone.yaml}\n"),
        "examples/minimal/tests/cases/hello.yaml:2:19: the file gone.yaml does not exist (relative to the case file)",
        "apply steps too"
    );
}

#[test]
fn errors_name_the_file_line_and_problem() {
    let e = error("steps:\n  - advance: 60s\n  - aply: {file: x.yaml}\n");
    assert!(
        e.starts_with(
            "examples/minimal/tests/cases/hello.yaml:3:5: steps[1]: unknown variant `aply`"
        ),
        "{e}"
    );
    let e = error("steps:\n  - advance: 60 parsecs\n");
    assert!(
        e.contains(":2:5:") && e.contains("expected a duration"),
        "{e}"
    );
    let e = error("steps:\n  - delete: ex1\n");
    assert!(e.contains(":2:5:") && e.contains("RESOURCE/NAME"), "{e}");
    let e = error("steps:\n  - expect:\n      object: kex/a\n      gone: kex/b\n");
    assert!(e.contains(":2:5:") && e.contains("exactly one of"), "{e}");
    let e = error("steps:\n  - expect: {object: kex/a}\n");
    assert!(e.contains("needs `matches`"), "{e}");
    let e = error("steps:\n  - expect: {called: f, handler: g}\n");
    assert!(e.contains("`handler` only goes with `log`"), "{e}");
    let e = error("given:\n  - kind: Pod\nsteps:\n  - expect: healthy\n");
    assert!(
        e.contains(":2:3:") && e.contains("apiVersion, kind and metadata.name"),
        "{e}"
    );
    let e = error("steps: []\n");
    assert!(e.contains("no steps"), "{e}");
    let e = error("stepz: []\n");
    assert!(e.contains("unknown field `stepz`"), "{e}");
    let e = error("steps:\n  - expect: happy\n");
    assert!(e.contains("unknown expectation \"happy\""), "{e}");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
    assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
    assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
    assert_eq!(parse_duration("10"), Some(Duration::from_secs(10)));
    assert_eq!(parse_duration("-1s"), None);
    assert_eq!(parse_duration("s"), None);
    assert_eq!(parse_duration("5 days"), None);
}

#[test]
fn outcomes_parse() {
    let parsed = case(
        "steps:\n  - expect: {outcome: failed-temporarily, handler: create_fn, times: 2}\n  - expect: {outcome: succeeded, handler: create_fn}\n",
    )
    .expect("parses");
    assert_eq!(
        parsed.steps[0],
        Step::Expect(Expectation {
            what: Expected::Outcome {
                handler: "create_fn".into(),
                outcome: HandlerOutcome::FailedTemporarily,
                times: Some(2),
            },
            within: DEFAULT_WITHIN,
        })
    );
    let e = error("steps:\n  - expect: {outcome: failed}\n");
    assert!(
        e.contains(":2:5:")
            && e.contains("unknown outcome \"failed\": expected one of succeeded, failed-temporarily, failed-permanently, ignored"),
        "{e}"
    );
    let e = error("steps:\n  - expect: {outcome: succeeded}\n");
    assert!(e.contains("`outcome` needs `handler`"), "{e}");
    let e = error("steps:\n  - expect: {gone: kex/a, times: 2}\n");
    assert!(
        e.contains("`times` only goes with `called` or `outcome`"),
        "{e}"
    );
}

#[test]
fn expectations_about_undeclared_handlers_are_input_errors_at_their_place() {
    let parsed = case(concat!(
        "steps:\n",
        "  - expect: {object: kex/a, matches: {status: {update_fn: {}}}}\n",
        "  - expect: {called: create_fn}\n",
        "  - expect:\n",
        "      not-called: \"update_fn\"\n",
    ))
    .expect("parses");
    let e = parsed
        .check_handlers(&["delete_fn", "create_fn"])
        .expect_err("update_fn is not declared")
        .to_string()
        .replace(&hello().display().to_string(), "hello.yaml");
    assert_eq!(
        e,
        "hello.yaml:5:20: the guest declares no handler \"update_fn\" (it declares: create_fn, delete_fn)"
    );
    assert!(parsed.check_handlers(&["create_fn", "update_fn"]).is_ok());
    let log = case("steps:\n  - expect: {log: hi, handler: create_fnx}\n").expect("parses");
    let e = log.check_handlers(&["create_fn"]).expect_err("a typo");
    assert_eq!(e.location, Some((2, 32)), "{e}");
}

#[test]
fn values_are_located_as_whole_words_after_their_key() {
    let text = "a: {not-called: fn_b}\nb: {called: fn_bb, handler: fn_b}\n";
    assert_eq!(locate_value(text, &["called"], "fn_b"), None);
    assert_eq!(locate_value(text, &["handler"], "fn_b"), Some((2, 29)));
    assert_eq!(locate_value(text, &["not-called"], "fn_b"), Some((1, 17)));
    assert_eq!(
        locate_value("x: {called: é, called: f}", &["called"], "f"),
        Some((1, 24))
    );
}
