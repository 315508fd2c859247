//! The SDK's two manifests inherit nothing from the workspace (so that the crates
//! build outside it, `cli/tests/all/new_guest.rs`), yet say what the workspace says: the
//! same package fields, the same lint levels, the same dependency versions.

use std::collections::BTreeMap;
use std::path::Path;

/// A TOML file as `section → key → value` (values as written), enough for these
/// manifests: one `key = value` per line, inline tables kept as text.
type Sections = BTreeMap<String, BTreeMap<String, String>>;

fn read(relative: &str) -> (String, Sections) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let text = std::fs::read_to_string(&path).expect("a manifest");
    let mut sections = Sections::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = header.to_owned();
            sections.entry(current.clone()).or_default();
        } else if let Some((key, value)) = line.split_once('=') {
            sections
                .entry(current.clone())
                .or_default()
                .insert(key.trim().to_owned(), value.trim().to_owned());
        }
    }
    (text, sections)
}

fn workspace() -> Sections {
    read("../Cargo.toml").1
}

/// The version requirement of a dependency as written: `"1"` or `{ version = "1", ... }`.
fn version(spec: &str) -> Option<String> {
    let quoted = |text: &str| text.split('"').nth(1).map(str::to_owned);
    if spec.starts_with('"') {
        return quoted(spec);
    }
    let after = spec.split("version").nth(1)?;
    quoted(after.trim_start().strip_prefix('=')?)
}

const CRATES: [&str; 2] = ["Cargo.toml", "macros/Cargo.toml"];

#[test]
fn nothing_is_inherited_from_the_workspace() {
    for manifest in CRATES {
        let (text, _) = read(manifest);
        assert!(
            !text.contains("workspace = true") && !text.contains(".workspace"),
            "{manifest} inherits from the workspace: a guest outside it could not build the SDK"
        );
    }
}

#[test]
fn the_package_fields_are_the_workspaces() {
    let workspace = workspace();
    let expected = &workspace["workspace.package"];
    for manifest in CRATES {
        let package = &read(manifest).1["package"];
        for field in [
            "version",
            "edition",
            "rust-version",
            "license",
            "repository",
        ] {
            assert_eq!(
                package.get(field),
                expected.get(field),
                "{manifest}: package.{field}"
            );
        }
    }
}

#[test]
fn the_lint_levels_are_the_workspaces() {
    let workspace = workspace();
    for manifest in CRATES {
        let sections = read(manifest).1;
        for tool in ["rust", "clippy"] {
            assert_eq!(
                sections.get(&format!("lints.{tool}")),
                workspace.get(&format!("workspace.lints.{tool}")),
                "{manifest}: [lints.{tool}]"
            );
        }
    }
}

#[test]
fn dependencies_shared_with_the_workspace_have_its_versions() {
    let workspace = workspace();
    let shared = &workspace["workspace.dependencies"];
    let mut compared = 0;
    for manifest in CRATES {
        for (section, entries) in read(manifest).1 {
            if !section.ends_with("dependencies") {
                continue;
            }
            for (name, spec) in entries {
                let Some(theirs) = shared.get(&name).and_then(|s| version(s)) else {
                    continue;
                };
                let ours = version(&spec).unwrap_or_default();
                // The SDK pins its macros exactly; the workspace names them by path.
                assert_eq!(
                    ours.trim_start_matches('='),
                    theirs,
                    "{manifest}: [{section}] {name}"
                );
                compared += 1;
            }
        }
    }
    // serde, serde_json and wit-bindgen at least: the check checks something.
    assert!(compared >= 3, "only {compared} dependencies compared");
}

#[test]
fn versions_are_read_from_either_form() {
    assert_eq!(version("\"1.45\""), Some("1.45".into()));
    assert_eq!(
        version("{ version = \"=0.1.0\", path = \"macros\" }"),
        Some("=0.1.0".into())
    );
    assert_eq!(version("{ path = \"guest-sdk\" }"), None);
}
