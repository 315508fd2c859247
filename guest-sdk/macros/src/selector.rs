//! Resource selectors, parsed exactly as Kopf parses its decorators' arguments
//! (KOPF.md §2.1), at compile time.

/// The name part of a selector: exactly one of these (WIT `resource-name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Name {
    Any(String),
    Kind(String),
    Plural(String),
    Singular(String),
    Shortcut(String),
    Category(String),
}

/// A parsed selector (WIT `selector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selector {
    /// `None`: any group; `Some("")`: the core group.
    pub(crate) group: Option<String>,
    /// `None`: the group's preferred version.
    pub(crate) version: Option<String>,
    pub(crate) name: Name,
}

/// The keyword forms: `group = "..", version = "..", kind = "..", ...`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Keywords {
    pub(crate) group: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) plural: Option<String>,
    pub(crate) singular: Option<String>,
    pub(crate) shortcut: Option<String>,
    pub(crate) category: Option<String>,
}

/// `true` for `name.v1`, `name.v1beta2`, `name.v1.group` (Kopf's
/// `^[^.]*\.v\d+((alpha|beta)\d+)?(\..*)?$`).
fn is_name_version(text: &str) -> bool {
    let Some((_, rest)) = text.split_once('.') else {
        return false;
    };
    let version = rest.split_once('.').map_or(rest, |(version, _)| version);
    let Some(digits) = version.strip_prefix('v') else {
        return false;
    };
    let major_len = digits.bytes().take_while(u8::is_ascii_digit).count();
    if major_len == 0 {
        return false;
    }
    let tail = &digits[major_len..];
    if tail.is_empty() {
        return true;
    }
    let stage = tail
        .strip_prefix("alpha")
        .or_else(|| tail.strip_prefix("beta"));
    stage.is_some_and(|minor| !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses positional arguments plus keyword forms into one selector.
///
/// # Errors
/// A message saying what is wrong, in Kopf's terms: too many positional
/// arguments, no name, two names, an empty name, a group or version given twice.
pub(crate) fn parse(positional: &[String], keywords: &Keywords) -> Result<Selector, String> {
    let Positional {
        mut group,
        mut version,
        any,
    } = Positional::parse(positional)?;
    if let Some(kw) = &keywords.group {
        if group.is_some() {
            return Err("the group is given twice: positionally and as `group = ...`".into());
        }
        group = Some(kw.clone());
    }
    if let Some(kw) = &keywords.version {
        if version.is_some() {
            return Err("the version is given twice: positionally and as `version = ...`".into());
        }
        version = Some(kw.clone());
    }
    if version.as_deref() == Some("") {
        return Err("the version must not be empty".into());
    }
    Ok(Selector {
        group,
        version,
        name: the_name(any, keywords)?,
    })
}

/// What the positional arguments say, in any of Kopf's forms.
#[derive(Default)]
struct Positional {
    group: Option<String>,
    version: Option<String>,
    /// The name, of any sort (plural, singular, kind or short name).
    any: Option<String>,
}

impl Positional {
    fn parse(positional: &[String]) -> Result<Self, String> {
        let parts = |group: Option<&str>, version: Option<&str>, any: &str| Self {
            group: group.map(str::to_owned),
            version: version.map(str::to_owned),
            any: Some(any.to_owned()),
        };
        Ok(match positional {
            [] => Self::default(),
            [one] if is_name_version(one) => {
                let mut parts = one.splitn(3, '.');
                Self {
                    any: parts.next().map(str::to_owned),
                    version: parts.next().map(str::to_owned),
                    group: parts.next().map(str::to_owned),
                }
            }
            [one] if one.contains('.') => {
                let (name, group) = one.split_once('.').unwrap_or((one, ""));
                parts(Some(group), None, name)
            }
            [one] => parts(None, None, one),
            [first, name] if first.contains('/') => {
                let (group, version) = first.split_once('/').unwrap_or((first, ""));
                parts(Some(group), Some(version), name)
            }
            [first, name] if first == "v1" => parts(Some(""), Some("v1"), name),
            [group, name] => parts(Some(group), None, name),
            [group, version, name] => parts(Some(group), Some(version), name),
            more => {
                return Err(format!(
                    "a resource selector takes at most 3 positional arguments \
                     (group, version, name), got {}",
                    more.len()
                ));
            }
        })
    }
}

/// The one name among the positional one (`any`) and the keywords; not empty.
fn the_name(any: Option<String>, keywords: &Keywords) -> Result<Name, String> {
    let names: Vec<Name> = [
        any.map(Name::Any),
        keywords.kind.clone().map(Name::Kind),
        keywords.plural.clone().map(Name::Plural),
        keywords.singular.clone().map(Name::Singular),
        keywords.shortcut.clone().map(Name::Shortcut),
        keywords.category.clone().map(Name::Category),
    ]
    .into_iter()
    .flatten()
    .collect();
    let name = match <[Name; 1]>::try_from(names) {
        Ok([name]) => name,
        Err(names) if names.is_empty() => {
            return Err(
                "no resource name: write e.g. `\"kopfexamples\"`, `\"v1\", \"pods\"` \
                        or `plural = \"pods\"`"
                    .into(),
            );
        }
        Err(_) => {
            return Err(
                "ambiguous resource: give exactly one of a positional name, \
                        `kind`, `plural`, `singular`, `shortcut` or `category`"
                    .into(),
            );
        }
    };
    let text = match &name {
        Name::Any(t)
        | Name::Kind(t)
        | Name::Plural(t)
        | Name::Singular(t)
        | Name::Shortcut(t)
        | Name::Category(t) => t,
    };
    if text.is_empty() {
        return Err("resource names must not be empty strings".into());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(group: Option<&str>, version: Option<&str>, name: Name) -> Selector {
        Selector {
            group: group.map(Into::into),
            version: version.map(Into::into),
            name,
        }
    }

    fn any(name: &str) -> Name {
        Name::Any(name.into())
    }

    fn pos(args: &[&str]) -> Result<Selector, String> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        parse(&args, &Keywords::default())
    }

    #[test]
    fn every_positional_form_of_kopf() {
        let table: &[(&[&str], Selector)] = &[
            (&["kopfexamples"], sel(None, None, any("kopfexamples"))),
            (&["kex"], sel(None, None, any("kex"))),
            (&["KopfExample"], sel(None, None, any("KopfExample"))),
            (&["pod"], sel(None, None, any("pod"))),
            (&["v1", "pods"], sel(Some(""), Some("v1"), any("pods"))),
            (
                &["kopf.dev/v1", "kopfexamples"],
                sel(Some("kopf.dev"), Some("v1"), any("kopfexamples")),
            ),
            (
                &["kopf.dev", "kopfexamples"],
                sel(Some("kopf.dev"), None, any("kopfexamples")),
            ),
            (
                &["kopf.dev", "v1", "kopfexamples"],
                sel(Some("kopf.dev"), Some("v1"), any("kopfexamples")),
            ),
            (&["", "v1", "pods"], sel(Some(""), Some("v1"), any("pods"))),
            (&["pods.v1"], sel(None, Some("v1"), any("pods"))),
            (
                &["kopfexamples.v1.kopf.dev"],
                sel(Some("kopf.dev"), Some("v1"), any("kopfexamples")),
            ),
            (
                &["crontabs.v1beta1.example.com"],
                sel(Some("example.com"), Some("v1beta1"), any("crontabs")),
            ),
            (
                &["kopfexamples.kopf.dev"],
                sel(Some("kopf.dev"), None, any("kopfexamples")),
            ),
            (
                &["deployments.apps"],
                sel(Some("apps"), None, any("deployments")),
            ),
            // Not a version: `vx` and `v1gamma2` fall back to name.group.
            (
                &["things.vx.example.com"],
                sel(Some("vx.example.com"), None, any("things")),
            ),
            (
                &["things.v1gamma2"],
                sel(Some("v1gamma2"), None, any("things")),
            ),
        ];
        for (args, expected) in table {
            assert_eq!(pos(args).as_ref(), Ok(expected), "for {args:?}");
        }
    }

    #[test]
    fn keyword_forms() {
        let kw = Keywords {
            group: Some("kopf.dev".into()),
            version: Some("v1".into()),
            plural: Some("kopfexamples".into()),
            ..Keywords::default()
        };
        assert_eq!(
            parse(&[], &kw),
            Ok(sel(
                Some("kopf.dev"),
                Some("v1"),
                Name::Plural("kopfexamples".into())
            ))
        );
        for (kw, name) in [
            (
                Keywords {
                    kind: Some("KopfExample".into()),
                    ..Keywords::default()
                },
                Name::Kind("KopfExample".into()),
            ),
            (
                Keywords {
                    singular: Some("pod".into()),
                    ..Keywords::default()
                },
                Name::Singular("pod".into()),
            ),
            (
                Keywords {
                    shortcut: Some("kex".into()),
                    ..Keywords::default()
                },
                Name::Shortcut("kex".into()),
            ),
            (
                Keywords {
                    category: Some("all".into()),
                    ..Keywords::default()
                },
                Name::Category("all".into()),
            ),
        ] {
            assert_eq!(parse(&[], &kw), Ok(sel(None, None, name)));
        }
        // A positional name plus a keyword group is fine.
        let kw = Keywords {
            group: Some("kopf.dev".into()),
            ..Keywords::default()
        };
        assert_eq!(
            parse(&["kopfexamples".into()], &kw),
            Ok(sel(Some("kopf.dev"), None, any("kopfexamples")))
        );
    }

    #[test]
    fn rejected_forms() {
        assert!(
            pos(&["a", "b", "c", "d"])
                .unwrap_err()
                .contains("at most 3")
        );
        assert!(pos(&[]).unwrap_err().contains("no resource name"));
        assert!(pos(&[""]).unwrap_err().contains("empty"));
        assert!(pos(&["v1", ""]).unwrap_err().contains("empty"));
        let kw = Keywords {
            plural: Some("pods".into()),
            ..Keywords::default()
        };
        assert!(
            parse(&["pods".into()], &kw)
                .unwrap_err()
                .contains("ambiguous")
        );
        let kw = Keywords {
            group: Some("apps".into()),
            ..Keywords::default()
        };
        assert!(
            parse(&["deployments.apps".into()], &kw)
                .unwrap_err()
                .contains("twice")
        );
    }
}
