//! A figure of the report (Kapsel's value beside its baseline, their ratio, the issue's
//! target for it and whether it is met), and a section: rows with the same baseline.

use serde::Serialize;

/// A target of the issue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Target {
    /// Kapsel ÷ baseline at most this.
    Ratio(f64),
    /// Kapsel's value at most this (in the row's unit).
    AtMost(f64),
    /// Kapsel's value at least this (in the row's unit).
    AtLeast(f64),
}

impl Target {
    fn bound(self) -> f64 {
        match self {
            Target::Ratio(r) | Target::AtMost(r) | Target::AtLeast(r) => r,
        }
    }

    /// `≤ 1/3`, `≤ 1`, `≤ 40 MiB`.
    pub(crate) fn label(self, unit: &str) -> String {
        match self {
            Target::Ratio(r) if r < 1.0 => format!("≤ 1/{}", trim(1.0 / r)),
            Target::Ratio(r) => format!("≤ {}", trim(r)),
            Target::AtMost(v) => format!("≤ {} {unit}", trim(v)),
            Target::AtLeast(v) => format!("≥ {} {unit}", trim(v)),
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// One figure.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) figure: String,
    pub(crate) unit: &'static str,
    pub(crate) kapsel: Option<f64>,
    pub(crate) baseline: Option<f64>,
    /// Kapsel ÷ baseline.
    pub(crate) ratio: Option<f64>,
    pub(crate) target: Option<Target>,
    /// What the target measures (the ratio or Kapsel's value) ÷ its bound: met at ≤ 1.
    pub(crate) of_target: Option<f64>,
    pub(crate) met: Option<bool>,
    pub(crate) note: Option<String>,
}

impl Row {
    pub(super) fn new(
        figure: impl Into<String>,
        unit: &'static str,
        kapsel: Option<f64>,
        baseline: Option<f64>,
    ) -> Row {
        let ratio = match (kapsel, baseline) {
            (Some(k), Some(b)) if b > 0.0 => Some(k / b),
            (Some(0.0), Some(_)) => Some(1.0),
            _ => None,
        };
        Row {
            figure: figure.into(),
            unit,
            kapsel,
            baseline,
            ratio,
            target: None,
            of_target: None,
            met: None,
            note: None,
        }
    }

    pub(super) fn target(mut self, target: Option<Target>) -> Row {
        self.target = target;
        let measured = match target {
            Some(Target::Ratio(_)) => self.ratio,
            Some(Target::AtMost(_) | Target::AtLeast(_)) => self.kapsel,
            None => None,
        };
        match (target, measured) {
            (Some(Target::AtLeast(bound)), Some(m)) => {
                self.of_target = Some(if m > 0.0 { bound / m } else { f64::INFINITY });
                self.met = Some(m >= bound);
            }
            (Some(t), Some(m)) => {
                self.of_target = Some(m / t.bound());
                self.met = Some(m <= t.bound());
            }
            _ => {}
        }
        self
    }

    pub(super) fn note(mut self, note: impl Into<String>) -> Row {
        self.note = Some(note.into());
        self
    }
}

/// A group of rows with the same baseline.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Section {
    pub(crate) title: String,
    /// What the baseline column is (`Kopf`, `floor`), or None for Kapsel's figures alone.
    pub(crate) baseline: Option<&'static str>,
    pub(crate) rows: Vec<Row>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_targets() {
        let row =
            Row::new("x", "MiB", Some(10.0), Some(40.0)).target(Some(Target::Ratio(1.0 / 3.0)));
        assert_eq!(row.ratio, Some(0.25));
        assert_eq!(row.met, Some(true));
        let row = Row::new("x", "MiB", Some(20.0), Some(40.0)).target(Some(Target::Ratio(0.25)));
        assert_eq!((row.met, row.of_target), (Some(false), Some(2.0)));
        let row = Row::new("x", "MiB", Some(50.0), None).target(Some(Target::AtMost(40.0)));
        assert_eq!((row.met, row.of_target), (Some(false), Some(1.25)));
        let row = Row::new("x", "req", Some(0.0), Some(0.0)).target(Some(Target::Ratio(1.0)));
        assert_eq!(row.met, Some(true));
        let row = Row::new("x", "s", None, Some(1.0)).target(Some(Target::Ratio(0.2)));
        assert_eq!(row.met, None);
        let row =
            Row::new("x", "calls/s", Some(20_000.0), None).target(Some(Target::AtLeast(30_000.0)));
        assert_eq!((row.met, row.of_target), (Some(false), Some(1.5)));
        let row =
            Row::new("x", "calls/s", Some(60_000.0), None).target(Some(Target::AtLeast(30_000.0)));
        assert_eq!((row.met, row.of_target), (Some(true), Some(0.5)));
    }

    #[test]
    fn target_labels() {
        assert_eq!(Target::Ratio(1.0 / 3.0).label("MiB"), "≤ 1/3");
        assert_eq!(Target::Ratio(0.1).label("ms"), "≤ 1/10");
        assert_eq!(Target::Ratio(1.0).label("req"), "≤ 1");
        assert_eq!(Target::AtMost(40.0).label("MiB"), "≤ 40 MiB");
        assert_eq!(
            Target::AtLeast(30_000.0).label("calls/s"),
            "≥ 30000 calls/s"
        );
    }
}
