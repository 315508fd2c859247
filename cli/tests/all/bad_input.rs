//! Bad input to the `kapsel` command (issue 16.4): every kind of broken guest file, a
//! missing one, folders without guests, bad flags and odd values. Each is refused with
//! exit code 2 and a message that names the file (or flag) and says what is wrong;
//! nothing panics.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::path::Path;

use crate::support::{guest, kapsel, scratch};

/// A real guest's bytes.
fn minimal() -> Vec<u8> {
    std::fs::read(guest("minimal")).unwrap()
}

/// Runs `kapsel ARGS`; asserts exit code 2, no panic, and every `needle` in stderr.
fn refused(args: &[&str], needles: &[&str]) {
    let output = kapsel().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in {stderr}"
        );
    }
}

/// `kapsel run --embedded` of `guests` is refused as [`refused`] says; the embedded
/// cluster's kubeconfig goes to `kubeconfig` (the scratch folder, not the checkout).
fn refused_to_run(kubeconfig: &Path, guests: &Path, needles: &[&str]) {
    refused(
        &[
            "run",
            "--embedded",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "-A",
            "--standalone",
            guests.to_str().unwrap(),
        ],
        needles,
    );
}

#[test]
fn broken_guest_files_are_refused_naming_the_file_and_the_fault() {
    let dir = scratch("guests");
    let guest = minimal();
    let files: [(&str, Vec<u8>, &str); 6] = [
        (
            "truncated.wasm",
            guest[..guest.len() / 2].to_vec(),
            "is not a valid WebAssembly component",
        ),
        (
            "other-world.wasm",
            b"\0asm\x0d\x00\x01\x00".to_vec(),
            "is not a Kapsel guest (world kapsel:operator/guest",
        ),
        (
            "core.wasm",
            b"\0asm\x01\x00\x00\x00".to_vec(),
            "is a core WebAssembly module, not a component",
        ),
        (
            "noise.wasm",
            (0..3000_u32).map(|i| (i * 7919 % 251) as u8).collect(),
            "is not WebAssembly",
        ),
        ("empty.wasm", Vec::new(), "is empty"),
        (
            "flipped.wasm",
            {
                // One byte changed in the middle of a real guest.
                let mut bytes = guest.clone();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0xff;
                bytes
            },
            "flipped.wasm",
        ),
    ];
    for (name, bytes, reason) in &files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let path = path.to_str().unwrap();
        refused(&["inspect", path], &[name, reason]);
        let kubeconfig = dir.join("kubeconfig");
        refused_to_run(&kubeconfig, Path::new(path), &[name, reason]);
    }
    let folder = dir.join("folder.wasm");
    std::fs::create_dir_all(&folder).unwrap();
    refused(
        &["inspect", folder.to_str().unwrap()],
        &["folder.wasm", "not a regular file"],
    );
    let missing = dir.join("missing.wasm");
    refused(
        &["inspect", missing.to_str().unwrap()],
        &["missing.wasm", "No such file"],
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_flags_are_usage_errors() {
    refused(
        &["run", "--call-memory-mib", "lots", "-A", "x.wasm"],
        &["--call-memory-mib", "lots"],
    );
    refused(
        &["run", "--call-deadline-ms", "-5", "-A", "x.wasm"],
        &["'-5'"],
    );
    refused(&["run", "--no-such-flag", "x.wasm"], &["--no-such-flag"]);
    refused(&["frobnicate"], &["frobnicate"]);
    refused(&["run", "-A"], &["GUESTS"]);
}

/// Guest folders that cannot serve: empty, a dangling link, missing. (Permission bits
/// cannot make a folder unreadable to root, which these tests may run as.)
#[test]
fn folders_without_guests_are_refused_naming_the_folder() {
    let dir = scratch("folders");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    for (name, reason) in [
        ("empty", "holds no .wasm files"),
        ("dangling", "No such file or directory"),
        ("missing/", "No such file or directory"),
    ] {
        let path = dir.join(name);
        refused_to_run(
            &kubeconfig,
            &path,
            &[name, reason, "no guest could be loaded"],
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
