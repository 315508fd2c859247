//! Where an operator keeps its state on the objects it handles — Kopf's
//! `settings.persistence` (KOPF.md §4.1–§4.5): [`Persistence`] with its storages and
//! the checks of their values. What the storages read and write is the reactor's
//! (`reactor::changes`); this is the configuration, which the settings hold.

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Kopf's annotation prefix.
pub(crate) const DEFAULT_PREFIX: &str = "kopf.zalando.org";

/// Where an operator keeps its state on the objects it handles, as Kopf's
/// `settings.persistence` does: the finalizer that holds an object until its deletion
/// handlers are done, the handlers' progress between cycles, and the last handled
/// essence (the "diff-base") that tells what changed, and how long to wait for the
/// operator's own patch. The settings' section `persistence` (`Settings::persistence`):
/// set by the embedding API (`Operator::settings`), by a startup handler
/// (`kapsel::settings::set("persistence.finalizer", ...)`), or by `kapsel run`'s
/// `--prefix`, `--finalizer`, `--progress-storage` and `--diffbase-storage` (then its
/// `--setting persistence.…`). As settings, a storage is written in JSON or YAML by its
/// shape: `{"status": {"field": "status.my-op.progress"}}`, or by its name alone
/// (`"status"`) for its defaults.
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
/// let mut settings = kapsel_host::Settings::default();
/// settings.persistence = persistence;
/// let operator = kapsel_host::Operator::new(["handlers/"]).settings(settings);
///
/// // The same by keys, as `--setting` and a startup handler give them.
/// let mut by_keys = kapsel_host::Settings::default();
/// by_keys.set("persistence.finalizer", "example.com/finalizer")?;
/// by_keys.set(
///     "persistence.progress_storage",
///     "{multi: [{annotations: {prefix: example.com}}, status]}",
/// )?;
/// assert_eq!(by_keys.persistence, operator_settings());
/// # fn operator_settings() -> kapsel_host::Persistence {
/// #     kapsel_host::Persistence {
/// #         finalizer: "example.com/finalizer".into(),
/// #         progress_storage: ProgressStorage::Multi(vec![
/// #             ProgressStorage::Annotations(AnnotationsProgress {
/// #                 prefix: "example.com".into(),
/// #                 ..AnnotationsProgress::default()
/// #             }),
/// #             ProgressStorage::Status(StatusProgress::default()),
/// #         ]),
/// #         ..kapsel_host::Persistence::default()
/// #     }
/// # }
/// # Ok::<(), kapsel_host::SettingsError>(())
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Persistence {
    /// The finalizer in `metadata.finalizers` (a qualified name). Default
    /// `kopf.zalando.org/KopfFinalizerMarker`.
    pub finalizer: String,
    /// Where the handlers' progress is kept. Default [`ProgressStorage::Smart`].
    #[serde(deserialize_with = "named_or_whole")]
    pub progress_storage: ProgressStorage,
    /// Where the last handled essence is kept. Default [`DiffBaseStorage::Annotations`].
    #[serde(deserialize_with = "named_or_whole")]
    pub diffbase_storage: DiffBaseStorage,
    /// Seconds to wait for the operator's own patch to come back before handling an
    /// object again. Default 5.
    pub consistency_timeout: f64,
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            finalizer: format!("{DEFAULT_PREFIX}/KopfFinalizerMarker"),
            progress_storage: ProgressStorage::default(),
            diffbase_storage: DiffBaseStorage::default(),
            consistency_timeout: 5.0,
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
}

/// Kopf's `AnnotationsProgressStorage`: one annotation per handler,
/// `<prefix>/<handler id>` (KOPF.md §4.3), its record as compact JSON, and the wake-up
/// marker `<prefix>/touch-dummy`. A prefix other than `kopf.*` is branded with
/// `<prefix>/kopf-managed: yes`, so that other Kopf-based operators leave it out of
/// their essences.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnnotationsProgress {
    /// The annotations' prefix, without the slash: a DNS subdomain. Default
    /// `kopf.zalando.org`.
    pub prefix: String,
    /// The wake-up marker's name under the prefix. Default `touch-dummy`.
    pub touch_key: String,
    /// Also write the V1 key of an id too long for the V2 one (Kopf's `v1=True`, the
    /// default), so that Kopf versions before 1.31 find the record too.
    pub v1: bool,
    /// Write a record's empty fields as nulls too (Kopf's `verbose`; default off).
    pub verbose: bool,
}

impl Default for AnnotationsProgress {
    fn default() -> Self {
        AnnotationsProgress {
            prefix: DEFAULT_PREFIX.into(),
            touch_key: "touch-dummy".into(),
            v1: true,
            verbose: false,
        }
    }
}

/// Kopf's `StatusProgressStorage`: the records as a mapping of handler ids in the
/// object's status, `status.kopf.progress.<handler id>`, and the wake-up marker at
/// `status.kopf.dummy`. The resource's status schema must keep unknown fields
/// (`x-kubernetes-preserve-unknown-fields`), or the API server drops the records: not
/// for built-in resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatusProgress {
    /// Where the records' mapping is, as a dotted path. Default `status.kopf.progress`
    /// (Kopf's `field='status.{name}.progress'` with `name='kopf'`).
    pub field: String,
    /// Where the wake-up marker is, as a dotted path. Default `status.kopf.dummy`.
    pub touch_field: String,
}

impl Default for StatusProgress {
    fn default() -> Self {
        StatusProgress {
            field: "status.kopf.progress".into(),
            touch_field: "status.kopf.dummy".into(),
        }
    }
}

/// Where the handlers' progress between processing cycles is kept (Kopf's
/// `settings.persistence.progress_storage`). The default is Kopf's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ProgressStorage {
    /// Kopf's `AnnotationsProgressStorage`.
    Annotations(AnnotationsProgress),
    /// Kopf's `StatusProgressStorage`.
    Status(StatusProgress),
    /// Kopf's `SmartProgressStorage`, its default: records are written to the
    /// annotations and read from them, then from the status (where Kopf before 1.44
    /// wrote them); the status ones are purged but never written.
    Smart {
        /// Where records are written and read first.
        #[serde(default)]
        annotations: AnnotationsProgress,
        /// Where older records are read and purged.
        #[serde(default)]
        status: StatusProgress,
    },
    /// Kopf's `MultiProgressStorage`: records written to every storage, read from the
    /// first that has one.
    Multi(#[serde(deserialize_with = "named_or_whole_each")] Vec<ProgressStorage>),
}

impl Default for ProgressStorage {
    fn default() -> Self {
        ProgressStorage::Smart {
            annotations: AnnotationsProgress::default(),
            status: StatusProgress::default(),
        }
    }
}

impl ProgressStorage {
    /// The annotation prefixes it writes under (each checked as a setting).
    pub(crate) fn prefixes(&self) -> Vec<&str> {
        match self {
            ProgressStorage::Annotations(annotations)
            | ProgressStorage::Smart { annotations, .. } => vec![annotations.prefix.as_str()],
            ProgressStorage::Status(_) => Vec::new(),
            ProgressStorage::Multi(storages) => storages
                .iter()
                .flat_map(ProgressStorage::prefixes)
                .collect(),
        }
    }
}

/// Kopf's `AnnotationsDiffBaseStorage`: the essence in the annotation
/// `<prefix>/last-handled-configuration`, compact JSON plus a newline (kubectl's
/// convention). A prefix other than `kopf.*` is branded with `<prefix>/kopf-managed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnnotationsDiffBase {
    /// The annotation's prefix, without the slash: a DNS subdomain. Default
    /// `kopf.zalando.org`.
    pub prefix: String,
    /// The annotation's name under the prefix. Default `last-handled-configuration`.
    pub key: String,
    /// Also write the V1 key when it differs (Kopf's `v1=True`, the default).
    pub v1: bool,
    /// Dotted fields left out of the essence: their changes cause nothing.
    pub ignored_fields: Vec<String>,
}

impl Default for AnnotationsDiffBase {
    fn default() -> Self {
        AnnotationsDiffBase {
            prefix: DEFAULT_PREFIX.into(),
            key: "last-handled-configuration".into(),
            v1: true,
            ignored_fields: Vec::new(),
        }
    }
}

/// Kopf's `StatusDiffBaseStorage`: the essence as a string of compact JSON (no newline)
/// at `status.kopf.last-handled-configuration`. As for the status progress storage, the
/// status schema must keep unknown fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatusDiffBase {
    /// Where the essence is, as a dotted path. Default
    /// `status.kopf.last-handled-configuration` (Kopf's
    /// `field='status.{name}.last-handled-configuration'` with `name='kopf'`).
    pub field: String,
    /// Dotted fields left out of the essence: their changes cause nothing.
    pub ignored_fields: Vec<String>,
}

impl Default for StatusDiffBase {
    fn default() -> Self {
        StatusDiffBase {
            field: "status.kopf.last-handled-configuration".into(),
            ignored_fields: Vec::new(),
        }
    }
}

/// Where the last handled essence of an object is kept, to tell what changed since
/// (Kopf's `settings.persistence.diffbase_storage`). The default is Kopf's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum DiffBaseStorage {
    /// Kopf's `AnnotationsDiffBaseStorage`, its default.
    Annotations(AnnotationsDiffBase),
    /// Kopf's `StatusDiffBaseStorage`.
    Status(StatusDiffBase),
    /// Kopf's `MultiDiffBaseStorage`: the essence written to every storage, read from the
    /// first that has one; each storage's own fields and ignored fields left out.
    Multi(#[serde(deserialize_with = "named_or_whole_each")] Vec<DiffBaseStorage>),
}

impl Default for DiffBaseStorage {
    fn default() -> Self {
        DiffBaseStorage::Annotations(AnnotationsDiffBase::default())
    }
}

impl DiffBaseStorage {
    /// The annotation prefixes it writes under (each checked as a setting).
    pub(crate) fn prefixes(&self) -> Vec<&str> {
        match self {
            DiffBaseStorage::Annotations(annotations) => vec![annotations.prefix.as_str()],
            DiffBaseStorage::Status(_) => Vec::new(),
            DiffBaseStorage::Multi(storages) => storages
                .iter()
                .flat_map(DiffBaseStorage::prefixes)
                .collect(),
        }
    }
}

/// A storage by its name alone (`status`: its defaults) or whole (`{status: {field: ...}}`).
fn named_or_whole<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<T, D::Error> {
    whole(Value::deserialize(deserializer)?).map_err(D::Error::custom)
}

/// [`named_or_whole`] for each storage of a multi storage.
fn named_or_whole_each<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    let storages = Vec::<Value>::deserialize(deserializer)?;
    storages
        .into_iter()
        .map(whole)
        .collect::<Result<_, _>>()
        .map_err(D::Error::custom)
}

fn whole<T: DeserializeOwned>(storage: Value) -> Result<T, serde_json::Error> {
    match storage {
        Value::String(name) => serde_json::from_value(Value::Object(
            [(name, Value::Object(serde_json::Map::new()))]
                .into_iter()
                .collect(),
        )),
        whole => serde_json::from_value(whole),
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
