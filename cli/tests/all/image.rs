//! The image's recipe, as far as it can be checked where no image can be built: the
//! Dockerfile builds the binary these tests run (kapsel-cli's `kapsel`, from the locked
//! dependencies), its final stage holds that binary alone and runs it as the non-root
//! user the Deployment expects, with the Deployment's args after its entrypoint, under
//! the name `make image` gives it and the Deployment pulls.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace().join(path)).unwrap()
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions(dockerfile: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() && current.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

#[test]
fn the_image_holds_the_tested_binary_run_as_the_deployment_expects() {
    let instructions = instructions(&read("Dockerfile"));
    let last_from = instructions
        .iter()
        .rposition(|i| i.starts_with("FROM "))
        .unwrap();
    let (build, last) = instructions.split_at(last_from);

    // The build stage's toolchain is the one the workspace asks for.
    let toolchain = read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap();
    assert!(
        build[0].starts_with(&format!("FROM rust:{toolchain}-")),
        "{} is not Rust {toolchain}",
        build[0]
    );
    // The build stage keeps the binary scripts/pgo-build builds, and that builds this
    // package's `kapsel` binary, optimised, locked, with a profile or (where none can be
    // had) without.
    let run = build
        .iter()
        .find(|i| i.starts_with("RUN ") && i.contains("scripts/pgo-build"))
        .unwrap();
    assert!(
        run.contains(r#"cp "$(scripts/pgo-build)" /kapsel"#),
        "the binary the script built is the one kept: {run}"
    );
    let script = read("scripts/pgo-build");
    let binary = Path::new(env!("CARGO_BIN_EXE_kapsel")).file_name().unwrap();
    let builds: Vec<&str> = script
        .lines()
        .filter(|l| l.contains(" build ") && l.contains("--bin "))
        .collect();
    assert_eq!(
        builds.len(),
        2,
        "the profiled build and the plain one: {builds:?}"
    );
    for command in builds {
        let words: Vec<&str> = command.split_whitespace().collect();
        let after = |flag: &str| words.iter().position(|w| *w == flag).map(|i| words[i + 1]);
        assert_eq!(after("-p"), Some(env!("CARGO_PKG_NAME")), "{command}");
        assert_eq!(
            after("--bin").map(std::ffi::OsStr::new),
            Some(binary),
            "{command}"
        );
        assert!(
            words.contains(&"--release") && words.contains(&"--locked"),
            "{command}"
        );
    }
    // `--locked` fails when Cargo.lock is not what the manifests need. The whole lock
    // file is resolved either way; filtered to the platform the tests build for, cargo
    // needs no crate that only another platform uses (not downloaded on a fresh machine).
    let host = std::process::Command::new("rustc")
        .args(["--print", "host-tuple"])
        .output()
        .unwrap();
    let host = String::from_utf8(host.stdout).unwrap();
    let locked = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .args(["--filter-platform", host.trim()])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        locked.status.success(),
        "the image's `cargo build --locked` would fail: {}",
        String::from_utf8_lossy(&locked.stderr)
    );

    // The final stage: that binary alone, a non-root user, the binary as entrypoint.
    let copies: Vec<&String> = last.iter().filter(|i| i.starts_with("COPY ")).collect();
    assert_eq!(copies, ["COPY --from=build /kapsel /kapsel"]);
    assert!(!last.iter().any(|i| i.starts_with("RUN ")), "{last:?}");
    let user = last.iter().find_map(|i| i.strip_prefix("USER ")).unwrap();
    assert_eq!(last.last().unwrap(), r#"ENTRYPOINT ["/kapsel"]"#);

    // The Deployment: that user, that image, and args for that entrypoint.
    let deployment: Value = serde_yaml::from_str(&read("deploy/operator/deployment.yaml")).unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let (uid, gid) = user.split_once(':').unwrap();
    assert_eq!(pod["securityContext"]["runAsUser"].to_string(), uid);
    assert_eq!(pod["securityContext"]["runAsGroup"].to_string(), gid);
    assert_ne!(uid, "0");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert!(container.get("command").is_none(), "the entrypoint runs");
    assert_eq!(container["args"][0], "run");
    let makefile = read("Makefile");
    let image = makefile
        .lines()
        .find_map(|l| l.strip_prefix("IMAGE ?= "))
        .unwrap();
    assert_eq!(
        container["image"], image,
        "the Deployment runs what `make image` builds"
    );
    assert!(
        read(".dockerignore").lines().any(|l| l == "target"),
        "build outputs stay out of the build context"
    );
}
