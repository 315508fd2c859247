//! The report: the figures as a text table (one block per section), and everything
//! measured plus the figures as JSON.

use std::fmt::Write as _;
use std::path::Path;

use crate::figures::{Row, Section};
use crate::results::Results;

/// A value in its unit, with about three significant digits.
pub(crate) fn value(v: f64, unit: &str) -> String {
    let digits = match v.abs() {
        a if a >= 100.0 || a == 0.0 => 0,
        a if a >= 10.0 => 1,
        a if a >= 1.0 => 2,
        _ => 3,
    };
    format!("{v:.digits$} {unit}")
}

fn ratio(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn met(row: &Row) -> String {
    match (row.met, row.of_target, row.target) {
        (Some(true), _, _) => "yes".into(),
        // Just over the bound: enough digits to show it is over.
        (Some(false), Some(of), _) if of < 1.005 => format!("NO (×{of:.4} the bound)"),
        (Some(false), Some(of), _) => format!("NO (×{of:.2} the bound)"),
        (_, _, Some(_)) => "not measured".into(),
        _ => String::new(),
    }
}

/// The cells of a row, as shown.
fn cells(row: &Row, with_baseline: bool) -> Vec<String> {
    let opt = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| value(v, row.unit));
    let mut cells = vec![row.figure.clone(), opt(row.kapsel)];
    if with_baseline {
        cells.push(opt(row.baseline));
        cells.push(row.ratio.map(ratio).unwrap_or_default());
    }
    cells.push(row.target.map(|t| t.label(row.unit)).unwrap_or_default());
    cells.push(met(row));
    cells
}

/// One section as text.
pub(crate) fn section(section: &Section) -> String {
    let with_baseline = section.baseline.is_some();
    let mut header = vec!["figure".to_owned(), "Kapsel".to_owned()];
    if let Some(baseline) = section.baseline {
        header.push(baseline.to_owned());
        header.push(format!("Kapsel÷{baseline}"));
    }
    header.extend(["target".to_owned(), "met".to_owned()]);
    let lines: Vec<Vec<String>> = std::iter::once(header)
        .chain(section.rows.iter().map(|r| cells(r, with_baseline)))
        .collect();
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = format!("\n== {} ==\n", section.title);
    for (i, line) in lines.iter().enumerate() {
        let padded: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(col, (cell, w))| {
                let pad = w - cell.chars().count();
                // Numbers right-aligned, words left-aligned.
                if col == 0 || col >= line.len() - 2 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(text, "{}", padded.join(" | ").trim_end());
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(text, "{}", rule.join("-|-"));
        } else if let Some(note) = &section.rows[i - 1].note {
            let _ = writeln!(text, "    ({note})");
        }
    }
    text
}

/// The whole report as text: the machine, Kopf, the sections and what went wrong.
pub(crate) fn text(results: &Results, sections: &[Section]) -> String {
    let m = &results.machine;
    let mut text = format!(
        "Kapsel bench — {} CPU(s) ({}), {} MiB, Linux {}\n\
         load average (1/5/15 min) at start: {}, at end: {}\n",
        m.cpus, m.cpu_model, m.memory_mib, m.kernel, m.load_at_start, m.load_at_end
    );
    match &results.kopf {
        Ok(version) => {
            let _ = writeln!(text, "Kopf {version} (from PyPI, in a virtual environment)");
        }
        Err(why) => {
            let _ = writeln!(text, "KOPF DID NOT RUN: {why}. Its columns are empty.");
        }
    }
    let _ = writeln!(
        text,
        "Ratios are Kapsel ÷ baseline, both measured in this run; RSS after settling (≤ 2 % CPU over 6 s: idle workers retired)."
    );
    if !results.settings.kapsel_env.is_empty() {
        let _ = writeln!(
            text,
            "Kapsel ran with: {}",
            results.settings.kapsel_env.join(" ")
        );
    }
    for s in sections {
        text.push_str(&section(s));
    }
    let problems: Vec<String> = results
        .running
        .iter()
        .filter_map(|r| {
            r.output
                .as_ref()
                .map(|o| (r.operator.name(), format!("running N={}", r.n), o))
        })
        .chain(results.backlog.iter().filter_map(|r| {
            r.output
                .as_ref()
                .map(|o| (r.operator.name(), format!("backlog N={}", r.n), o))
        }))
        .filter(|(_, _, o)| o.warnings + o.errors > 0)
        .map(|(op, run, o)| {
            format!(
                "{op} ({run}): {} warning(s), {} error(s) in {} lines; first: {}",
                o.warnings,
                o.errors,
                o.lines,
                o.examples.first().map_or("", String::as_str)
            )
        })
        .collect();
    if !problems.is_empty() {
        text.push_str("\n== Warnings and errors in the operators' logs ==\n");
        for p in problems {
            let _ = writeln!(text, "{p}");
        }
    }
    if !results.errors.is_empty() {
        text.push_str("\n== Failed steps ==\n");
        for e in &results.errors {
            let _ = writeln!(text, "{e}");
        }
    }
    if results.interrupted {
        text.push_str("\nINTERRUPTED: the figures above are what was measured before.\n");
    }
    text
}

/// Writes the results and the figures as JSON (atomically: a reader never sees half).
pub(crate) fn write_json(
    path: &Path,
    results: &Results,
    sections: &[Section],
) -> Result<(), String> {
    let json = serde_json::json!({"results": results, "figures": sections});
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, text)
        .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
    std::fs::rename(&partial, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::Target;

    fn row(figure: &str, kapsel: Option<f64>, baseline: Option<f64>, ratio: Option<f64>) -> Row {
        Row {
            figure: figure.into(),
            unit: "MiB",
            kapsel,
            baseline,
            ratio,
            target: Some(Target::Ratio(0.25)),
            of_target: ratio.map(|r| r / 0.25),
            met: ratio.map(|r| r <= 0.25),
            note: None,
        }
    }

    #[test]
    fn values_keep_about_three_digits() {
        assert_eq!(value(123.456, "MiB"), "123 MiB");
        assert_eq!(value(12.345, "s"), "12.3 s");
        assert_eq!(value(1.2345, "s"), "1.23 s");
        assert_eq!(value(0.012345, "s"), "0.012 s");
        assert_eq!(value(0.0, "req"), "0 req");
    }

    #[test]
    fn a_section_is_an_aligned_table_with_targets() {
        let mut missed = row("RSS after 1000", Some(30.0), Some(60.0), Some(0.5));
        missed.note = Some("a note".into());
        let section = Section {
            title: "N = 1000".into(),
            baseline: Some("Kopf"),
            rows: vec![
                row("RSS idle", Some(10.0), Some(50.0), Some(0.2)),
                missed,
                row("later", None, None, None),
            ],
        };
        let text = super::section(&section);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "== N = 1000 ==");
        assert_eq!(
            lines[2],
            "figure         |   Kapsel |     Kopf | Kapsel÷Kopf | target | met"
        );
        assert!(
            lines[4]
                .starts_with("RSS idle       | 10.0 MiB | 50.0 MiB |        0.20 | ≤ 1/4  | yes")
        );
        assert!(
            lines[5].ends_with("| ≤ 1/4  | NO (×2.00 the bound)"),
            "{}",
            lines[5]
        );
        assert_eq!(lines[6], "    (a note)");
        assert!(lines[7].starts_with("later          |        — |        — |"));
        assert!(lines[7].ends_with("not measured"));
    }
}
