//! `kapsel new`, as a new user runs it: a guest crate made outside the workspace against
//! a copy of the SDK's crates and the WIT (outside it too), whose native test passes,
//! which builds for wasm32-wasip2, and whose case file passes under `kapsel test`.
//!
//! A copy rather than a path into the repository: from there cargo would find the
//! repository's workspace and let the SDK inherit from it, so the test could not
//! tell whether the crates build on their own. The workspace's `Cargo.lock` goes
//! with the guest, so that it builds with the versions the workspace is tested with
//! (and without asking the registry for anything new).

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
fn a_new_guest_builds_and_passes_its_case_outside_the_workspace() {
    let repository = repository();
    // One folder per checkout (two worktrees may run this at once), made afresh.
    let mut hasher = DefaultHasher::new();
    repository.hash(&mut hasher);
    let root = std::env::temp_dir().join(format!("kapsel-new-{:016x}", hasher.finish()));
    let _ = std::fs::remove_dir_all(&root);
    let (sdk, guest) = (root.join("kapsel/guest-sdk"), root.join("my-operator"));
    assert!(
        !root.starts_with(&repository),
        "{root:?} is inside the repository"
    );

    // The SDK's crates and the contract, as a vendored copy would have them.
    copy_tree(&repository.join("guest-sdk"), &sdk, false);
    copy_tree(&repository.join("wit"), &root.join("kapsel/wit"), true);

    let kapsel = env!("CARGO_BIN_EXE_kapsel");
    let made = Command::new(kapsel)
        .arg("new")
        .arg(&guest)
        .arg("--sdk")
        .arg(&sdk)
        .output()
        .expect("kapsel runs");
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(
        made.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(said.contains("Made the guest crate my-operator"), "{said}");
    let manifest = std::fs::read_to_string(guest.join("Cargo.toml")).expect("a manifest");
    assert!(manifest.contains("name = \"my-operator\""), "{manifest}");
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
    // The case file it came with passes, run as its README says.
    let tested = Command::new(kapsel)
        .arg("test")
        .arg(&wasm)
        .arg("tests/cases/")
        .current_dir(&guest)
        .output()
        .expect("kapsel runs");
    let report = String::from_utf8_lossy(&tested.stdout);
    assert!(
        tested.status.success() && report.contains("1 passed, 0 failed"),
        "{report}{}",
        String::from_utf8_lossy(&tested.stderr)
    );
    std::fs::remove_dir_all(&root).expect("clean up");
}
