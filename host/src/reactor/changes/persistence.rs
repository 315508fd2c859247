//! [`Persistence`]: where an operator keeps its state on the objects it handles — Kopf's
//! `settings.persistence` (KOPF.md §4.1, §4.5), and the checks of its values.

use super::essence::DiffBaseStorage;
use super::keys::KeyScheme;
use super::progress::ProgressStorage;
use super::stanzas::DEFAULT_PREFIX;

/// Where an operator keeps its state on the objects it handles, as Kopf's
/// `settings.persistence` does: the finalizer that holds an object until its deletion
/// handlers are done, the handlers' progress between cycles, and the last handled
/// essence (the "diff-base") that tells what changed. Set with
/// `Operator::persistence`, or `kapsel run`'s
/// `--prefix`, `--finalizer`, `--progress-storage` and `--diffbase-storage`.
///
/// The default is Kopf's default, key for key: the finalizer
/// `kopf.zalando.org/KopfFinalizerMarker`, progress in `kopf.zalando.org/<handler id>`
/// annotations (and read from Kopf's older `status.kopf.progress`:
/// [`ProgressStorage::Smart`]), the diff-base in the annotation
/// `kopf.zalando.org/last-handled-configuration`. An operator migrated from Kopf keeps
/// Kopf's settings here to continue where Kopf left every object, and the other way
/// round: both read and write the same records, byte for byte.
///
/// ```
/// use kapsel_host::{AnnotationsProgress, Persistence, ProgressStorage, StatusProgress};
///
/// // Kopf's `MultiProgressStorage([AnnotationsProgressStorage(prefix='example.com'),
/// // StatusProgressStorage()])`, with the finalizer under the same prefix.
/// let persistence = Persistence {
///     finalizer: "example.com/finalizer".into(),
///     progress_storage: ProgressStorage::Multi(vec![
///         ProgressStorage::Annotations(AnnotationsProgress {
///             prefix: "example.com".into(),
///             ..AnnotationsProgress::default()
///         }),
///         ProgressStorage::Status(StatusProgress::default()),
///     ]),
///     ..Persistence::default()
/// };
/// assert!(persistence.check().is_ok());
/// let operator = kapsel_host::Operator::new(["handlers/"]).persistence(persistence);
/// ```
///
/// **One's own storage.** Kopf lets an operator subclass its storages in Python (to keep
/// the state in a database, say). A Kapsel operator's handlers are compiled guests that
/// the host calls with an object; the host reads and writes the state in the same patch
/// as the handlers' results, and a guest cannot run in the middle of that. What a custom
/// storage is used for in Kopf is had here by combining the built-in ones: other
/// prefixes, annotation names and status fields, several storages at once (`Multi`:
/// written to all, read from the first that has a record — the way to move from one
/// layout to another: write both, read the old one until every object has the new one),
/// and fields left out of the essence (`ignored_fields`).
///
/// The status storages need a status schema that keeps unknown fields
/// (`x-kubernetes-preserve-unknown-fields: true`), or the API server drops the records;
/// built-in resources have no such schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persistence {
    /// The finalizer in `metadata.finalizers` (a qualified name). Default
    /// `kopf.zalando.org/KopfFinalizerMarker`.
    pub finalizer: String,
    /// Where the handlers' progress is kept. Default [`ProgressStorage::Smart`].
    pub progress_storage: ProgressStorage,
    /// Where the last handled essence is kept. Default [`DiffBaseStorage::Annotations`].
    pub diffbase_storage: DiffBaseStorage,
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            finalizer: format!("{DEFAULT_PREFIX}/KopfFinalizerMarker"),
            progress_storage: ProgressStorage::default(),
            diffbase_storage: DiffBaseStorage::default(),
        }
    }
}

/// Why [`Persistence::check`] refused a setting: a value Kubernetes would refuse on
/// every object, or a storage that keeps nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PersistenceError {
    /// An annotation prefix is empty or not a DNS subdomain (lowercase letters, digits,
    /// `-` and `.`, at most 253 characters).
    #[error(
        "the annotation prefix {0:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
    )]
    Prefix(String),
    /// An annotation name of a storage (its touch key or its diff-base key) is empty.
    #[error("the annotation name under the prefix {0:?} is empty")]
    Key(String),
    /// The finalizer is not a qualified name (`[prefix/]name`, the name at most 63
    /// characters of letters, digits, `-`, `_` and `.`).
    #[error(
        "the finalizer {0:?} is not a qualified name ([DNS subdomain/]name, the name at most 63 letters, digits, '-', '_' or '.')"
    )]
    Finalizer(String),
    /// A status storage's field is not a dotted path of names (`status.kopf.progress`).
    #[error("the field {0:?} is not a dotted path of names")]
    Field(String),
    /// A multi storage holds no storage: it would keep nothing.
    #[error("a multi storage holds no storage")]
    EmptyMulti,
}

impl Persistence {
    /// Checks the settings as the API server will judge what they write: the prefixes,
    /// the annotation names, the finalizer and the fields. A prefix longer than 189
    /// characters passes (Kopf warns, the operator logs a warning): keys of long
    /// handler ids then exceed the 253 characters Kubernetes allows.
    ///
    /// # Errors
    /// The first setting that is out of range.
    pub fn check(&self) -> Result<(), PersistenceError> {
        if !qualified_name(&self.finalizer) {
            return Err(PersistenceError::Finalizer(self.finalizer.clone()));
        }
        check_progress(&self.progress_storage)?;
        check_diffbase(&self.diffbase_storage)
    }

    /// The prefixes long enough to make keys of long handler ids too long (Kopf's
    /// warning: "The annotations prefix is too long. It can cause errors when PATCHing.").
    pub(crate) fn long_prefixes(&self) -> Vec<&str> {
        let mut prefixes = self.progress_storage.prefixes();
        prefixes.extend(self.diffbase_storage.prefixes());
        prefixes.retain(|prefix| {
            KeyScheme {
                prefix,
                v1: false,
                marked: false,
            }
            .prefix_too_long()
        });
        prefixes.dedup();
        prefixes
    }
}

fn check_progress(storage: &ProgressStorage) -> Result<(), PersistenceError> {
    match storage {
        ProgressStorage::Annotations(annotations) => {
            check_prefix(&annotations.prefix, &annotations.touch_key)
        }
        ProgressStorage::Status(status) => check_fields(&[&status.field, &status.touch_field]),
        ProgressStorage::Smart {
            annotations,
            status,
        } => {
            check_prefix(&annotations.prefix, &annotations.touch_key)?;
            check_fields(&[&status.field, &status.touch_field])
        }
        ProgressStorage::Multi(storages) if storages.is_empty() => {
            Err(PersistenceError::EmptyMulti)
        }
        ProgressStorage::Multi(storages) => storages.iter().try_for_each(check_progress),
    }
}

fn check_diffbase(storage: &DiffBaseStorage) -> Result<(), PersistenceError> {
    match storage {
        DiffBaseStorage::Annotations(annotations) => {
            check_prefix(&annotations.prefix, &annotations.key)?;
            check_fields(
                &annotations
                    .ignored_fields
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )
        }
        DiffBaseStorage::Status(status) => {
            check_fields(&[&status.field])?;
            check_fields(
                &status
                    .ignored_fields
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )
        }
        DiffBaseStorage::Multi(storages) if storages.is_empty() => {
            Err(PersistenceError::EmptyMulti)
        }
        DiffBaseStorage::Multi(storages) => storages.iter().try_for_each(check_diffbase),
    }
}

/// Kopf refuses an empty prefix ("Annotations storages must be prefixed."); Kubernetes
/// refuses any prefix that is not a DNS subdomain. A key is made safe and cut by the key
/// scheme, as handler ids are; only an empty one is wrong.
fn check_prefix(prefix: &str, key: &str) -> Result<(), PersistenceError> {
    if !dns_subdomain(prefix) {
        return Err(PersistenceError::Prefix(prefix.to_owned()));
    }
    if key.is_empty() {
        return Err(PersistenceError::Key(prefix.to_owned()));
    }
    Ok(())
}

fn check_fields(fields: &[&str]) -> Result<(), PersistenceError> {
    match fields
        .iter()
        .find(|field| field.split('.').any(str::is_empty))
    {
        Some(field) => Err(PersistenceError::Field((*field).to_owned())),
        None => Ok(()),
    }
}

/// Kubernetes' `IsDNS1123Subdomain`.
fn dns_subdomain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first() != Some(&b'-')
                && bytes.last() != Some(&b'-')
        })
}

/// Kubernetes' `IsQualifiedName`, which finalizers must be.
fn qualified_name(text: &str) -> bool {
    let name = match text.split_once('/') {
        Some((prefix, name)) => {
            if !dns_subdomain(prefix) {
                return false;
            }
            name
        }
        None => text,
    };
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reactor::changes::essence::{AnnotationsDiffBase, StatusDiffBase};
    use crate::reactor::changes::progress::{AnnotationsProgress, StatusProgress};

    fn with_prefix(prefix: &str) -> Persistence {
        Persistence {
            progress_storage: ProgressStorage::Annotations(AnnotationsProgress {
                prefix: prefix.into(),
                ..AnnotationsProgress::default()
            }),
            ..Persistence::default()
        }
    }

    #[test]
    fn kopfs_defaults_pass() {
        assert_eq!(Persistence::default().check(), Ok(()));
        assert!(Persistence::default().long_prefixes().is_empty());
    }

    #[test]
    fn prefixes_must_be_dns_subdomains() {
        assert_eq!(with_prefix("example.com").check(), Ok(()));
        assert_eq!(with_prefix("a-1.b").check(), Ok(()));
        for bad in [
            "",
            "Example.com",
            "a..b",
            "-a.b",
            "a_b",
            "a/b",
            &"a".repeat(254),
        ] {
            assert_eq!(
                with_prefix(bad).check(),
                Err(PersistenceError::Prefix(bad.into())),
                "{bad:?}"
            );
        }
        let long = format!("{}.example.com", "a".repeat(180));
        assert_eq!(with_prefix(&long).check(), Ok(()), "Kopf only warns");
        assert_eq!(with_prefix(&long).long_prefixes(), vec![long.as_str()]);
    }

    #[test]
    fn finalizers_must_be_qualified_names() {
        for good in ["example.com/finalizer", "plain", "a.b/X_y-z.1"] {
            let persistence = Persistence {
                finalizer: good.into(),
                ..Persistence::default()
            };
            assert_eq!(persistence.check(), Ok(()), "{good}");
        }
        for bad in [
            "",
            "a/",
            "/b",
            "Bad.Prefix/x",
            "x y",
            "a/-b",
            &"a".repeat(64),
        ] {
            let persistence = Persistence {
                finalizer: bad.into(),
                ..Persistence::default()
            };
            assert_eq!(
                persistence.check(),
                Err(PersistenceError::Finalizer(bad.into())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn fields_keys_and_empty_multis() {
        let status = |field: &str| Persistence {
            progress_storage: ProgressStorage::Status(StatusProgress {
                field: field.into(),
                ..StatusProgress::default()
            }),
            ..Persistence::default()
        };
        assert_eq!(status("status.my.progress").check(), Ok(()));
        assert_eq!(
            status("status..x").check(),
            Err(PersistenceError::Field("status..x".into()))
        );
        assert_eq!(
            status("").check(),
            Err(PersistenceError::Field(String::new()))
        );
        let ignoring = Persistence {
            diffbase_storage: DiffBaseStorage::Status(StatusDiffBase {
                ignored_fields: vec!["spec.".into()],
                ..StatusDiffBase::default()
            }),
            ..Persistence::default()
        };
        assert_eq!(
            ignoring.check(),
            Err(PersistenceError::Field("spec.".into()))
        );
        let keyless = Persistence {
            diffbase_storage: DiffBaseStorage::Multi(vec![DiffBaseStorage::Annotations(
                AnnotationsDiffBase {
                    key: String::new(),
                    ..AnnotationsDiffBase::default()
                },
            )]),
            ..Persistence::default()
        };
        assert_eq!(
            keyless.check(),
            Err(PersistenceError::Key("kopf.zalando.org".into()))
        );
        let empty = Persistence {
            progress_storage: ProgressStorage::Multi(Vec::new()),
            ..Persistence::default()
        };
        assert_eq!(empty.check(), Err(PersistenceError::EmptyMulti));
    }
}
