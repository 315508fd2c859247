//! The known differences (`known-differences.toml`): for each check and step, where the dev
//! cluster is known to answer otherwise than kube-apiserver, and why.

use serde::Deserialize;
use std::collections::BTreeMap;

/// One step's known differences: why, and where (JSON pointers into the step's record, or
/// `(the step)` when one server has the step and the other not).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    #[expect(dead_code, reason = "read by people: the file must give one")]
    reason: String,
    at: Vec<String>,
}

/// Check name → the locations (`<step>: <pointer>`) known to differ.
pub(crate) type Known = BTreeMap<String, std::collections::BTreeSet<String>>;

const FILE: &str = "known-differences.toml";

/// Reads the list beside this suite; a list that does not parse fails the suite.
pub(crate) fn load() -> Known {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/differential")
        .join(FILE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let checks: BTreeMap<String, BTreeMap<String, Step>> = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a list of differences: {e}", path.display()));
    checks
        .into_iter()
        .map(|(check, steps)| {
            let at = steps
                .into_iter()
                .flat_map(|(step, s)| s.at.into_iter().map(move |p| format!("{step}: {p}")))
                .collect();
            (check, at)
        })
        .collect()
}
