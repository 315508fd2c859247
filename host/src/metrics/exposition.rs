//! The Prometheus text exposition format (version 0.0.4): families, samples with
//! escaped labels, and histograms.

use std::fmt::Write as _;

/// A Prometheus histogram: counts per bucket, the sum and the count of observations.
#[derive(Debug, Clone)]
pub(super) struct Histogram {
    /// Upper bounds, ascending; `+Inf` is implied.
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last entry is `+Inf`'s own.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub(super) fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    pub(super) fn observe(&mut self, value: f64) {
        // A broken clock must not poison the sum forever.
        let value = if value.is_finite() {
            value.max(0.0)
        } else {
            0.0
        };
        let bucket = self
            .bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(self.bounds.len());
        self.counts[bucket] += 1;
        self.sum += value;
        self.count += 1;
    }

    pub(super) fn render(&self, out: &mut Exposition, name: &str, labels: &[(&str, String)]) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        let bounds = self
            .bounds
            .iter()
            .map(|b| b.to_string())
            .chain(["+Inf".to_owned()]);
        for (bound, count) in bounds.zip(&self.counts) {
            cumulative += count;
            let mut with_le = labels.to_vec();
            with_le.push(("le", bound));
            out.sample(&bucket, &with_le, cumulative);
        }
        out.sample(&format!("{name}_sum"), labels, self.sum);
        out.sample(&format!("{name}_count"), labels, self.count);
    }
}

/// Builds the text exposition format: `# HELP`/`# TYPE` lines, then samples.
#[derive(Default)]
pub(super) struct Exposition {
    pub(super) text: String,
}

impl Exposition {
    pub(super) fn family(&mut self, name: &str, help: &str, kind: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    pub(super) fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, String)],
        value: impl std::fmt::Display,
    ) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{key}=\"{}\"", escape_label(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Label values escape backslashes, double quotes and newlines.
fn escape_label(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_cumulatively_with_sum_and_count() {
        let mut h = Histogram::new(&[0.125, 1.0]);
        for value in [0.0625, 0.125, 0.5, 3.0, f64::NAN] {
            h.observe(value);
        }
        let mut out = Exposition::default();
        h.render(&mut out, "d", &[("h", "x".to_owned())]);
        assert_eq!(
            out.text,
            "d_bucket{h=\"x\",le=\"0.125\"} 3\n\
             d_bucket{h=\"x\",le=\"1\"} 4\n\
             d_bucket{h=\"x\",le=\"+Inf\"} 5\n\
             d_sum{h=\"x\"} 3.6875\n\
             d_count{h=\"x\"} 5\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut out = Exposition::default();
        out.sample("m", &[("id", "x\"y".to_owned())], 1);
        assert_eq!(out.text, "m{id=\"x\\\"y\"} 1\n");
    }
}
