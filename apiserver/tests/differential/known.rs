//! The known differences (`known-differences.toml`): for each check, the locations where the
//! dev cluster is known to answer otherwise than kube-apiserver, each with its reason.

use std::collections::BTreeMap;

/// Check name → location → reason.
pub(crate) type Known = BTreeMap<String, BTreeMap<String, String>>;

const FILE: &str = "known-differences.toml";

/// Reads the list beside this suite; a list that does not parse fails the suite.
pub(crate) fn load() -> Known {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/differential")
        .join(FILE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    toml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a list of differences: {e}", path.display()))
}
