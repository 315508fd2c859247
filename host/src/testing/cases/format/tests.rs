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

/// A review step of `operation` with these extra lines (indented as its keys).
fn review_step(operation: &str, keys: &str) -> String {
    format!("steps:\n  - review:\n      operation: {operation}\n{keys}")
}

const KEX: &str = "{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: a}}";

#[test]
fn admission_steps_parse() {
    let parsed = case(&format!(
        "{}{}",
        review_step(
            "UPDATE",
            &format!(
                "      object: {KEX}\n      old-object: {{file: ../../../manifests/kopfexample-obj.yaml}}\n      user-info: {{username: alice, groups: [devs]}}\n      dry-run: true\n      handler: check\n      expect: {{allowed: true, warnings: [careful], patch: [], patched: {{spec: {{}}}}}}\n"
            )
        ),
        "  - refused: {apply: {file: ../../../manifests/kopfexample-obj.yaml}, message: no, code: 422}\n  - refused: {patch: {object: kex/a, merge: {spec: {}}}}\n  - refused: {delete: {object: kex/b, namespace: other}, code: 404}\n",
    ))
    .expect("parses");
    let Step::Review(review) = &parsed.steps[0] else {
        panic!("{:?}", parsed.steps[0])
    };
    assert_eq!(review.operation, "UPDATE");
    assert_eq!(
        review.old_object,
        Some(Source::File(
            hello()
                .parent()
                .expect("a folder")
                .join("../../../manifests/kopfexample-obj.yaml")
        )),
        "anchored to the case file"
    );
    assert_eq!(
        review.user_info,
        json!({"username": "alice", "groups": ["devs"]})
    );
    assert!(review.dry_run);
    assert_eq!(review.handler.as_deref(), Some("check"));
    assert_eq!(
        review.answer,
        Answer {
            allowed: true,
            message: None,
            code: None,
            warnings: Some(vec!["careful".into()]),
            patched: Some(json!({"spec": {}})),
            patch: Some(Vec::new()),
        }
    );
    assert!(matches!(
        &parsed.steps[1],
        Step::Refused(Refusal { write: Write::Apply(Source::File(file)), message: Some(m), code: Some(422) })
            if file.is_absolute() && m == "no"
    ));
    assert!(matches!(
        &parsed.steps[2],
        Step::Refused(Refusal { write: Write::Patch { target, .. }, message: None, code: None })
            if target.name == "a"
    ));
    assert!(matches!(
        &parsed.steps[3],
        Step::Refused(Refusal { write: Write::Delete(target), message: None, code: Some(404) })
            if target.name == "b" && target.namespace.as_deref() == Some("other")
    ));
}

#[test]
fn malformed_admission_steps_are_input_errors_at_their_place() {
    let object = format!("      object: {KEX}\n");
    let allowed = "      expect: {allowed: true}\n";
    for (text, wanted) in [
        (
            review_step("MAKE", &format!("{object}{allowed}")),
            "unknown operation \"MAKE\": expected one of CREATE, UPDATE, DELETE, CONNECT",
        ),
        (
            review_step("CREATE", allowed),
            "a CREATE review needs `object`: the object written",
        ),
        (
            review_step("UPDATE", &format!("{object}{allowed}")),
            "an UPDATE review needs `old-object`: the object before the update",
        ),
        (
            review_step("DELETE", &format!("{object}{allowed}")),
            "a DELETE review has no `object`: kube sends the deleted object as `old-object`",
        ),
        (
            review_step(
                "CREATE",
                &format!("      old-object: {KEX}\n{object}{allowed}"),
            ),
            "a CREATE review has no `old-object`: only UPDATE and DELETE have one",
        ),
        (
            review_step("CREATE", &object),
            "a review needs `expect`: what its answer must be (at least `allowed`)",
        ),
        (
            review_step("CREATE", &format!("{object}      expect: {{code: 422}}\n")),
            "a review's `expect` needs `allowed: true` or `allowed: false`",
        ),
        (
            review_step(
                "CREATE",
                &format!("{object}      expect: {{allowed: true, message: no}}\n"),
            ),
            "`message` and `code` describe a refusal: they go with `allowed: false`",
        ),
        (
            review_step(
                "CREATE",
                &format!("{object}      expect: {{allowed: false, patch: []}}\n"),
            ),
            "a refused review has no patch: `patched` and `patch` go with `allowed: true`",
        ),
        (
            review_step(
                "CREATE",
                &format!("{object}      user-info: {{user: x}}\n{allowed}"),
            ),
            "unknown field `user`",
        ),
        (
            review_step("CREATE", &format!("      object: {{kind: Pod}}\n{allowed}")),
            "expected `file: PATH` or a Kubernetes object with apiVersion, kind and metadata.name",
        ),
        (
            "steps:\n  - refused: {message: no}\n".to_owned(),
            "`refused` needs exactly one write: `apply`, `patch` or `delete`",
        ),
    ] {
        let e = error(&text);
        assert!(
            e.starts_with("examples/minimal/tests/cases/hello.yaml:") && e.contains(wanted),
            "{text}\n=> {e}"
        );
    }
    // Located: at the step.
    let e = error(&review_step("MAKE", &format!("{object}{allowed}")));
    assert!(e.contains(":2:5: steps[0]"), "{e}");
    let e = error(&review_step(
        "CREATE",
        &format!("      object: {{file: nowhere.yaml}}\n{allowed}"),
    ));
    assert!(
        e.ends_with(":4:22: the file nowhere.yaml does not exist (relative to the case file)"),
        "{e}"
    );
}

#[test]
fn reviews_need_admission_handlers_and_name_declared_ones() {
    let parsed = case(&review_step(
        "CREATE",
        &format!("      object: {KEX}\n      handler: chek\n      expect: {{allowed: true}}\n"),
    ))
    .expect("parses");
    let e = parsed
        .check_admission(&[])
        .expect_err("no admission handler");
    assert_eq!(e.location, Some((2, 5)), "{e}");
    assert!(
        e.message
            .starts_with("the guest declares no admission handlers"),
        "{e}"
    );
    let e = parsed
        .check_admission(&["mark", "check"])
        .expect_err("a typo");
    assert_eq!(e.location, Some((5, 16)), "{e}");
    assert_eq!(
        e.message,
        "the guest declares no admission handler \"chek\" (it declares: check, mark)"
    );
    assert!(parsed.check_admission(&["chek"]).is_ok());
}
