//! Guest sizes: every `.wasm` that `scripts/build-guests` made, and which of them are
//! the repository's examples (the crates under `examples/` that make a cdylib).

use std::path::Path;

use serde::Serialize;

/// One compiled guest.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GuestSize {
    /// The file name without `.wasm`.
    pub(crate) name: String,
    pub(crate) bytes: u64,
    /// Whether it is one of `examples/`.
    pub(crate) example: bool,
}

impl GuestSize {
    pub(crate) fn kib(&self) -> f64 {
        self.bytes as f64 / 1024.0
    }
}

/// The guests in `dir`, by name; `repo` tells which are examples.
pub(crate) fn guest_sizes(dir: &Path, repo: &Path) -> Result<Vec<GuestSize>, String> {
    let examples = example_libs(repo);
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read the guests in {} (run scripts/build-guests): {e}",
            dir.display()
        )
    })?;
    let mut sizes: Vec<GuestSize> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            let name = path
                .file_name()?
                .to_str()?
                .strip_suffix(".wasm")?
                .to_owned();
            let bytes = entry.metadata().ok()?.len();
            Some(GuestSize {
                example: examples.contains(&name),
                name,
                bytes,
            })
        })
        .collect();
    sizes.sort_by(|a, b| (!a.example, &a.name).cmp(&(!b.example, &b.name)));
    if sizes.is_empty() {
        return Err(format!(
            "no .wasm in {} (run scripts/build-guests)",
            dir.display()
        ));
    }
    Ok(sizes)
}

/// The library names of the cdylib crates under `repo/examples/`.
fn example_libs(repo: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(repo.join("examples")) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("Cargo.toml")).ok())
        .filter_map(|manifest| cdylib_name(&manifest))
        .collect()
}

/// The `[lib]` name of a manifest that makes a cdylib.
pub(crate) fn cdylib_name(manifest: &str) -> Option<String> {
    if !manifest.contains("\"cdylib\"") {
        return None;
    }
    let lib = manifest.split("\n[").find(|s| s.starts_with("lib]"))?;
    lib.lines()
        .find_map(|line| line.trim().strip_prefix("name"))
        .and_then(|rest| rest.trim().strip_prefix('='))
        .map(|value| value.trim().trim_matches('"').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lib_name_of_a_cdylib_manifest() {
        let manifest = "[package]\nname = \"kapsel-example-minimal\"\n\n[lib]\nname = \"minimal\"\n\
                        crate-type = [\"cdylib\"]\n\n[dependencies]\nname = \"x\"\n";
        assert_eq!(cdylib_name(manifest).as_deref(), Some("minimal"));
        assert_eq!(cdylib_name("[package]\nname = \"embedded\"\n"), None);
    }
}
