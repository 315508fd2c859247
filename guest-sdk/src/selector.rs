//! A resource selector as the contract carries it (WIT `selector`): what handler
//! attributes, `permit!` and `kapsel::api` name.

use serde::Serialize;

/// WIT `resource-name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceName {
    /// Compared with the kind, plural, singular and short names.
    Any(String),
    /// The kind (`KopfExample`).
    Kind(String),
    /// The plural (`kopfexamples`).
    Plural(String),
    /// The singular (`kopfexample`).
    Singular(String),
    /// A short name (`kex`).
    Shortcut(String),
    /// Every resource in this category.
    Category(String),
}

/// WIT `selector`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Selector {
    /// `None`: any group; `""`: the core group.
    pub group: Option<String>,
    /// `None`: the group's preferred version.
    pub version: Option<String>,
    /// The resource's name, in one of its forms.
    pub name: ResourceName,
}

impl Selector {
    /// A selector of `name` in `group` and `version` (`None`: any).
    pub fn new(group: Option<&str>, version: Option<&str>, name: ResourceName) -> Self {
        Self {
            group: group.map(str::to_owned),
            version: version.map(str::to_owned),
            name,
        }
    }
}
