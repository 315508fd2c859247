//! What `kapsel test` prints, and the JUnit XML it writes for CI systems.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::runner::{CaseRun, Verdict};
use crate::journal::Record;

/// How many cases passed and failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    elapsed: Duration,
}

impl Summary {
    pub(crate) fn of(runs: &[CaseRun]) -> Summary {
        let failed = runs
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Failed { .. }))
            .count();
        Summary {
            passed: runs.len() - failed,
            failed,
            elapsed: runs.iter().map(|r| r.elapsed).sum(),
        }
    }
}

/// One line per case; a failure's explanation indented below it.
pub(crate) fn print_case(out: &mut impl Write, run: &CaseRun, verbose: bool) {
    let seconds = run.elapsed.as_secs_f64();
    match &run.verdict {
        Verdict::Passed => {
            let _ = writeln!(out, "  PASS  {} ({seconds:.2} s)", run.name);
        }
        Verdict::Failed { step, message } => {
            let _ = writeln!(out, "  FAIL  {} ({seconds:.2} s)", run.name);
            let _ = writeln!(out, "        {}, {}", where_(*step), run.path.display());
            for line in message.lines() {
                let _ = writeln!(out, "        {line}");
            }
            if verbose {
                let _ = writeln!(out, "        what the operator did:");
                for record in &run.records {
                    if let Some(line) = describe(record) {
                        let _ = writeln!(out, "          {line}");
                    }
                }
            }
        }
    }
}

fn where_(step: usize) -> String {
    if step == 0 {
        "set-up".to_owned()
    } else {
        format!("step {step}")
    }
}

fn describe(record: &Record) -> Option<String> {
    Some(match record {
        Record::HandlerCalled {
            handler, object, ..
        } => format!("called {handler} for {object}"),
        Record::HandlerFailed {
            handler,
            object,
            error,
            ..
        } => format!("{handler} failed for {object}: {error}"),
        Record::GuestLog {
            handler,
            level,
            message,
            ..
        } => format!("[{level}] {handler}: {message}"),
        Record::GuestRejected { path, error } => format!("rejected {path}: {error}"),
        _ => return None,
    })
}

pub(crate) fn print_summary(out: &mut impl Write, summary: &Summary) {
    let _ = writeln!(
        out,
        "{} passed, {} failed ({:.2} s)",
        summary.passed,
        summary.failed,
        summary.elapsed.as_secs_f64()
    );
}

/// A JUnit XML report: one `testsuite` named after the guest, one `testcase` per case.
pub(crate) fn junit(guest: &Path, runs: &[CaseRun]) -> String {
    let summary = Summary::of(runs);
    let suite = guest
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(&format!(
        "<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">\n",
        escape(&suite),
        runs.len(),
        summary.failed,
        summary.elapsed.as_secs_f64()
    ));
    for run in runs {
        let head = format!(
            "  <testcase name=\"{}\" classname=\"{}\" file=\"{}\" time=\"{:.3}\"",
            escape(&run.name),
            escape(&suite),
            escape(&run.path.to_string_lossy()),
            run.elapsed.as_secs_f64()
        );
        match &run.verdict {
            Verdict::Passed => xml.push_str(&format!("{head}/>\n")),
            Verdict::Failed { step, message } => {
                let first = message.lines().next().unwrap_or_default();
                xml.push_str(&format!(
                    "{head}>\n    <failure message=\"{}: {}\">{}</failure>\n  </testcase>\n",
                    where_(*step),
                    escape(first),
                    escape(message)
                ));
            }
        }
    }
    xml.push_str("</testsuite>\n");
    xml
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot carry most control characters, even escaped.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn runs() -> Vec<CaseRun> {
        vec![
            CaseRun {
                name: "hello".into(),
                path: PathBuf::from("cases/hello.yaml"),
                verdict: Verdict::Passed,
                elapsed: Duration::from_millis(400),
                records: Vec::new(),
            },
            CaseRun {
                name: "update <x>".into(),
                path: PathBuf::from("cases/update.yaml"),
                verdict: Verdict::Failed {
                    step: 3,
                    message: "expect object kex/a in default: not so after 5 s:\n  - status.x: expected \"1\", got absent".into(),
                },
                elapsed: Duration::from_millis(5100),
                records: vec![Record::HandlerFailed {
                    guest: "g".into(),
                    handler: "update_fn".into(),
                    object: "default/a".into(),
                    error: "boom".into(),
                }],
            },
        ]
    }

    #[test]
    fn the_text_report_explains_failures() {
        let mut out = Vec::new();
        for run in &runs() {
            print_case(&mut out, run, true);
        }
        print_summary(&mut out, &Summary::of(&runs()));
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains("  PASS  hello (0.40 s)\n"), "{text}");
        assert!(
            text.contains("  FAIL  update <x> (5.10 s)\n        step 3, cases/update.yaml\n"),
            "{text}"
        );
        assert!(
            text.contains("        - status.x: expected \"1\", got absent\n"),
            "{text}"
        );
        assert!(
            text.contains("          update_fn failed for default/a: boom\n"),
            "{text}"
        );
        assert!(text.ends_with("1 passed, 1 failed (5.50 s)\n"), "{text}");
    }

    #[test]
    fn junit_is_escaped_and_counts_failures() {
        let xml = junit(Path::new("guests/minimal.wasm"), &runs());
        assert!(
            xml.contains("<testsuite name=\"minimal\" tests=\"2\" failures=\"1\" time=\"5.500\">"),
            "{xml}"
        );
        assert!(xml.contains("<testcase name=\"hello\" classname=\"minimal\" file=\"cases/hello.yaml\" time=\"0.400\"/>"), "{xml}");
        assert!(xml.contains("name=\"update &lt;x&gt;\""), "{xml}");
        assert!(
            xml.contains(
                "<failure message=\"step 3: expect object kex/a in default: not so after 5 s:\">"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("expected &quot;1&quot;, got absent</failure>"),
            "{xml}"
        );
    }
}
