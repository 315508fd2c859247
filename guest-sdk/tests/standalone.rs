//! The SDK outside this repository: a guest made from the template
//! (`templates/guest`, as `kapsel new` makes one) in a fresh directory outside the
//! workspace, against a copy of the SDK's crates and the WIT outside it too, passes
//! its native test and builds for wasm32-wasip2.
//!
//! A copy rather than a path into the repository: from there cargo would find the
//! repository's workspace and let the SDK inherit from it, so the test could not
//! tell whether the crates build on their own. The workspace's `Cargo.lock` goes
//! with the guest, so that it builds with the versions the workspace is tested with
//! (and without asking the registry for anything new).
//!
//! The component is left at `target/tmp/kapsel-guest-template.wasm` for `make cases`,
//! which runs the template's case files against it.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository")
}

/// Copies the files under `from` to `to`, leaving out `target` folders and, when
/// asked, `tests` folders.
fn copy_tree(from: &Path, to: &Path, with_tests: bool) {
    std::fs::create_dir_all(to).expect("a folder");
    for entry in std::fs::read_dir(from).expect("a folder to copy") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a name");
        if path.is_dir() {
            if name != "target" && (with_tests || name != "tests") {
                copy_tree(&path, &to.join(name), with_tests);
            }
        } else {
            std::fs::copy(&path, to.join(name)).expect("a copy");
        }
    }
}

/// The template's files: every file under `templates/guest/files`, by relative path
/// with a trailing `.tmpl` dropped, with `{{key}}` replaced by each value.
fn instantiate(values: &BTreeMap<&str, String>) -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, root: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("the template") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, root, found);
            } else {
                found.push(path.strip_prefix(root).expect("inside").to_owned());
            }
        }
    }
    let root = repository().join("templates/guest/files");
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    files
        .into_iter()
        .map(|relative| {
            let mut text = std::fs::read_to_string(root.join(&relative)).expect("a text file");
            for (key, value) in values {
                text = text.replace(&format!("{{{{{key}}}}}"), value);
            }
            let name = relative.to_string_lossy();
            let target = PathBuf::from(name.strip_suffix(".tmpl").unwrap_or(&name));
            (target, text)
        })
        .collect()
}

/// `cargo ARGS` in `dir` with its own target dir, untouched by the settings of the
/// cargo running this test; panics with its output unless it succeeds.
fn cargo(dir: &Path, target: &Path, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        command.env_remove(variable);
    }
    let output = command
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "cargo {args:?} failed:\n{text}");
    text
}

#[test]
fn a_guest_from_the_template_builds_outside_the_workspace() {
    let repository = repository();
    // One folder per checkout (two worktrees may run this at once), made afresh.
    let mut hasher = DefaultHasher::new();
    repository.hash(&mut hasher);
    let root = std::env::temp_dir().join(format!("kapsel-standalone-{:016x}", hasher.finish()));
    let _ = std::fs::remove_dir_all(&root);
    let (sdk, guest) = (root.join("kapsel/guest-sdk"), root.join("my-operator"));
    assert!(
        !root.starts_with(&repository),
        "{root:?} is inside the repository"
    );

    // The SDK's crates and the contract, as a vendored copy would have them.
    copy_tree(&repository.join("guest-sdk"), &sdk, false);
    copy_tree(&repository.join("wit"), &root.join("kapsel/wit"), true);

    let values = BTreeMap::from([
        ("name", "my-operator".to_owned()),
        ("lib_name", "my_operator".to_owned()),
        ("sdk", format!("{{ path = '{}' }}", sdk.display())),
    ]);
    for (relative, text) in instantiate(&values) {
        assert!(!text.contains("{{"), "{relative:?}: a placeholder is left");
        let path = guest.join(&relative);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("a folder");
        std::fs::write(path, text).expect("a file");
    }
    std::fs::copy(repository.join("Cargo.lock"), guest.join("Cargo.lock")).expect("the lock");

    // Its own target dir, kept between runs so that a warm run builds little.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("standalone-guest");
    let tested = cargo(&guest, &target, &["test"]);
    assert!(
        tested.contains("test tests::says_hello_into_the_status ... ok"),
        "{tested}"
    );
    // The component of an earlier run must not pass for this one's.
    let wasm = target.join("wasm32-wasip2/release/my_operator.wasm");
    let _ = std::fs::remove_file(&wasm);
    cargo(
        &guest,
        &target,
        &["build", "--release", "--target", "wasm32-wasip2"],
    );
    let bytes = std::fs::read(&wasm).expect("the component");
    // `\0asm`, then a component's version and layer (a core module has 1, 0, 0, 0).
    assert_eq!(
        bytes.get(..8),
        Some(&b"\0asm\x0d\x00\x01\x00"[..]),
        "not a component"
    );
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kapsel-guest-template.wasm");
    std::fs::copy(&wasm, kept).expect("a copy for make cases");
    std::fs::remove_dir_all(&root).expect("clean up");
}
