//! `kapsel new PATH`: a guest crate made from `templates/guest/files`, carried inside
//! the binary so that it works anywhere (see `templates/guest/README.md` for the
//! placeholders).

use std::fmt;
use std::path::{Path, PathBuf};

/// The template's files: relative path (a trailing `.tmpl` is dropped), text.
const TEMPLATE: &[(&str, &str)] = &[
    (
        ".gitignore",
        include_str!("../../templates/guest/files/.gitignore"),
    ),
    (
        "Cargo.toml.tmpl",
        include_str!("../../templates/guest/files/Cargo.toml.tmpl"),
    ),
    (
        "README.md",
        include_str!("../../templates/guest/files/README.md"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/guest/files/src/lib.rs"),
    ),
    (
        "tests/cases/hello.yaml",
        include_str!("../../templates/guest/files/tests/cases/hello.yaml"),
    ),
    (
        "manifests/crd.yaml",
        include_str!("../../templates/guest/files/manifests/crd.yaml"),
    ),
    (
        "manifests/example.yaml",
        include_str!("../../templates/guest/files/manifests/example.yaml"),
    ),
];

/// Where the new guest's `kapsel-sdk` comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sdk {
    /// A folder holding the SDK's crate (`guest-sdk` of a Kapsel checkout).
    Path(PathBuf),
    /// A git repository of Kapsel, at a branch, tag or commit if given.
    Git { url: String, rev: Option<String> },
}

impl Sdk {
    /// The SDK of the checkout this binary was built from, if it is still there.
    pub(crate) fn built_from() -> Option<Sdk> {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
        let sdk = sdk.canonicalize().ok()?;
        sdk.join("Cargo.toml").is_file().then_some(Sdk::Path(sdk))
    }

    /// The dependency, as a TOML inline table.
    fn toml(&self) -> String {
        match self {
            Sdk::Path(path) => format!("{{ path = {} }}", toml_string(&path.to_string_lossy())),
            Sdk::Git { url, rev: None } => format!("{{ git = {} }}", toml_string(url)),
            Sdk::Git {
                url,
                rev: Some(rev),
            } => format!(
                "{{ git = {}, rev = {} }}",
                toml_string(url),
                toml_string(rev)
            ),
        }
    }
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::from('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Why `kapsel new` made nothing.
#[derive(Debug)]
pub(crate) enum ScaffoldError {
    /// The crate name is not one cargo accepts.
    Name(String),
    /// The folder exists and is not empty.
    NotEmpty(PathBuf),
    /// The folder is inside a cargo workspace, which would take the crate for a member.
    InWorkspace { path: PathBuf, workspace: PathBuf },
    /// A file could not be written.
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl fmt::Display for ScaffoldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScaffoldError::Name(why) => f.write_str(why),
            ScaffoldError::NotEmpty(path) => write!(
                f,
                "{} exists and is not empty: kapsel new makes a new folder",
                path.display()
            ),
            ScaffoldError::InWorkspace { path, workspace } => write!(
                f,
                "{} is inside the cargo workspace of {}: cargo would take the new crate for an \
                 undeclared member. Choose a folder outside it (or make it anyway elsewhere and \
                 add it to the workspace's members)",
                path.display(),
                workspace.display()
            ),
            ScaffoldError::Io { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for ScaffoldError {}

/// Checks a crate name as cargo does for new packages: ASCII letters, digits, `-` and
/// `_`, starting with a letter, at most 64 characters.
pub(crate) fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let bad = |why: &str| Err(ScaffoldError::Name(format!("{name:?} {why}")));
    if name.is_empty() || name.len() > 64 {
        return bad("is not a crate name: 1 to 64 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return bad("is not a crate name: it must start with a letter");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return bad(&format!(
            "is not a crate name: {c:?} is not allowed (letters, digits, - and _)"
        ));
    }
    Ok(())
}

/// The template's files for a guest named `name`, with the SDK from `sdk`: relative
/// paths and texts.
pub(crate) fn render(name: &str, sdk: &Sdk) -> Vec<(PathBuf, String)> {
    let lib_name = name.replace('-', "_");
    TEMPLATE
        .iter()
        .map(|(path, text)| {
            let text = text
                .replace("{{name}}", name)
                .replace("{{lib_name}}", &lib_name)
                .replace("{{sdk}}", &sdk.toml());
            let path = path.strip_suffix(".tmpl").unwrap_or(path);
            (PathBuf::from(path), text)
        })
        .collect()
}

/// Makes the guest crate in `folder` (created; it may exist if empty). Returns the
/// files written.
pub(crate) fn create(folder: &Path, name: &str, sdk: &Sdk) -> Result<Vec<PathBuf>, ScaffoldError> {
    check_name(name)?;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |error| ScaffoldError::Io { path, error }
    };
    if folder.exists() {
        let mut entries = std::fs::read_dir(folder).map_err(io(folder))?;
        if entries.next().is_some() {
            return Err(ScaffoldError::NotEmpty(folder.to_owned()));
        }
    }
    if let Some(workspace) = enclosing_workspace(folder) {
        return Err(ScaffoldError::InWorkspace {
            path: folder.to_owned(),
            workspace,
        });
    }
    let mut written = Vec::new();
    for (relative, text) in render(name, sdk) {
        let path = folder.join(&relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
        written.push(path);
    }
    Ok(written)
}

/// The folder of the nearest `Cargo.toml` above `folder` that declares a workspace.
fn enclosing_workspace(folder: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(folder).ok()?;
    absolute.ancestors().skip(1).find_map(|dir| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        manifest
            .lines()
            .any(|line| line.trim() == "[workspace]")
            .then(|| dir.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template_files(dir: &Path, root: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("the template") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                template_files(&path, root, found);
            } else {
                let relative = path.strip_prefix(root).expect("inside");
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }

    /// Every file of `templates/guest/files` is carried, and nothing else.
    #[test]
    fn the_binary_carries_the_whole_template() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates/guest/files");
        let mut on_disk = Vec::new();
        template_files(&root, &root, &mut on_disk);
        on_disk.sort();
        let mut carried: Vec<String> = TEMPLATE.iter().map(|(p, _)| (*p).to_owned()).collect();
        carried.sort();
        assert_eq!(carried, on_disk);
    }

    #[test]
    fn placeholders_are_all_replaced() {
        let sdk = Sdk::Git {
            url: "https://example.com/kapsel".into(),
            rev: Some("v0.1.0".into()),
        };
        let files = render("my-operator", &sdk);
        for (path, text) in &files {
            assert!(!text.contains("{{"), "{path:?}: {text}");
        }
        let manifest = &files
            .iter()
            .find(|(p, _)| p == Path::new("Cargo.toml"))
            .expect("a manifest")
            .1;
        assert!(manifest.contains("name = \"my-operator\""), "{manifest}");
        assert!(
            manifest.contains(
                "kapsel-sdk = { git = \"https://example.com/kapsel\", rev = \"v0.1.0\" }"
            ),
            "{manifest}"
        );
        let readme = &files
            .iter()
            .find(|(p, _)| p == Path::new("README.md"))
            .expect("a README")
            .1;
        assert!(readme.contains("release/my_operator.wasm"), "{readme}");
    }

    #[test]
    fn paths_are_quoted_for_toml() {
        assert_eq!(
            Sdk::Path(PathBuf::from(r#"C:\a "b""#)).toml(),
            r#"{ path = "C:\\a \"b\"" }"#
        );
    }

    #[test]
    fn names_are_checked_as_cargo_does() {
        assert!(check_name("my-operator_2").is_ok());
        for bad in ["", "2fast", "-x", "my operator", "ops/x", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let long = "a".repeat(65);
        assert!(check_name(&long).is_err());
    }

    #[test]
    fn a_folder_that_is_not_empty_or_inside_a_workspace_is_refused() {
        let inside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/new-guest-inside");
        let _ = std::fs::remove_dir_all(&inside);
        let sdk = Sdk::Path(PathBuf::from("/nowhere"));
        let e = create(&inside, "inside", &sdk).expect_err("in the workspace");
        assert!(
            e.to_string().contains("is inside the cargo workspace of"),
            "{e}"
        );
        assert!(!inside.exists(), "nothing made");
        let full = Path::new(env!("CARGO_MANIFEST_DIR"));
        let e = create(full, "cli", &sdk).expect_err("not empty");
        assert!(e.to_string().contains("exists and is not empty"), "{e}");
    }
}
