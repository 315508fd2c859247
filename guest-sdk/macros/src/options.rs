//! The options of one handler attribute: read, checked against what the kind
//! accepts, and validated together as Kopf does at decoration time (KOPF.md §1.2).

use proc_macro2::Span;
use syn::{Expr, Lit, LitStr};

use crate::Kind;
use crate::args::{Arg, Args, ListEntry};
use crate::selector::{self, Keywords, Selector};

pub(crate) const SELECTOR_KEYS: [&str; 7] = [
    "group", "version", "kind", "plural", "singular", "shortcut", "category",
];

/// A data matcher as written: `present`, `absent`, or a value.
pub(crate) enum Matcher {
    Present,
    Absent,
    /// Labels and annotations: the exact string.
    Text(String),
    /// Field values: any `Serialize` expression, turned into JSON at `describe` time.
    Json(Expr),
}

/// Everything one attribute says, validated.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) id: Option<LitStr>,
    pub(crate) param: Option<Expr>,
    pub(crate) errors: Option<proc_macro2::Ident>,
    pub(crate) timeout: Option<f64>,
    pub(crate) retries: Option<u32>,
    pub(crate) backoff: Option<f64>,
    pub(crate) labels: Vec<(String, Matcher)>,
    pub(crate) annotations: Vec<(String, Matcher)>,
    pub(crate) field: Option<LitStr>,
    pub(crate) value: Option<(Span, Matcher)>,
    pub(crate) old: Option<(Span, Matcher)>,
    pub(crate) new: Option<(Span, Matcher)>,
    pub(crate) when: Option<Expr>,
    pub(crate) optional: bool,
    pub(crate) deleted: bool,
    pub(crate) interval: Option<f64>,
    pub(crate) initial_delay: Option<f64>,
    pub(crate) idle: Option<f64>,
    pub(crate) sharp: bool,
    pub(crate) deadline_ms: Option<u32>,
    pub(crate) memory_mib: Option<u32>,
    pub(crate) selector: Option<Selector>,
}

fn err<T>(span: Span, message: impl std::fmt::Display) -> syn::Result<T> {
    Err(syn::Error::new(span, message))
}

fn lit_str(expr: &Expr, what: &str) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{what}` takes a string literal"),
        )),
    }
}

fn seconds(expr: &Expr, what: &str) -> syn::Result<f64> {
    let value = match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Float(lit),
            ..
        }) => lit.base10_parse::<f64>()?,
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse::<f64>()?,
        other => {
            return Err(syn::Error::new_spanned(
                other,
                format!("`{what}` takes a number of seconds (a literal such as `10` or `1.5`)"),
            ));
        }
    };
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(syn::Error::new_spanned(
            expr,
            format!("`{what}` must be zero or more seconds"),
        ))
    }
}

fn count(expr: &Expr, what: &str) -> syn::Result<u32> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse::<u32>(),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{what}` takes an integer literal"),
        )),
    }
}

fn flag(expr: &Expr, what: &str) -> syn::Result<bool> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(lit),
            ..
        }) => Ok(lit.value),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{what}` takes `true` or `false`"),
        )),
    }
}

/// `present` / `absent` as bare identifiers.
fn presence(expr: &Expr) -> Option<Matcher> {
    match expr {
        Expr::Path(path) if path.path.is_ident("present") => Some(Matcher::Present),
        Expr::Path(path) if path.path.is_ident("absent") => Some(Matcher::Absent),
        _ => None,
    }
}

fn meta_filters(key: &str, entries: Vec<ListEntry>) -> syn::Result<Vec<(String, Matcher)>> {
    let mut filters: Vec<(String, Matcher)> = Vec::new();
    for entry in entries {
        if entry.key.is_empty() {
            return err(entry.span, format!("{key} keys must not be empty"));
        }
        if filters.iter().any(|(k, _)| *k == entry.key) {
            return err(
                entry.span,
                format!("{key} key `{}` is given twice", entry.key),
            );
        }
        let matcher = match presence(&entry.value) {
            Some(matcher) => matcher,
            None => match &entry.value {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(lit), ..
                }) => Matcher::Text(lit.value()),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!(
                            "a {key} filter is a string literal, `present` or `absent` \
                             (use `when = ...` for anything else)"
                        ),
                    ));
                }
            },
        };
        filters.push((entry.key, matcher));
    }
    Ok(filters)
}

fn field_matcher(expr: Expr) -> Matcher {
    presence(&expr).unwrap_or(Matcher::Json(expr))
}

/// Stores one selector keyword (`group = ".."`, `plural = ".."`, ...; `key` is one of
/// [`SELECTOR_KEYS`]): shared by the handler attributes and `permit!`, so that both
/// accept exactly the same selector forms.
pub(crate) fn set_selector_keyword(
    keywords: &mut Keywords,
    key: &str,
    value: &Expr,
) -> syn::Result<()> {
    let text = lit_str(value, key)?.value();
    let slot = match key {
        "group" => &mut keywords.group,
        "version" => &mut keywords.version,
        "kind" => &mut keywords.kind,
        "plural" => &mut keywords.plural,
        "singular" => &mut keywords.singular,
        "shortcut" => &mut keywords.shortcut,
        _ => &mut keywords.category,
    };
    *slot = Some(text);
    Ok(())
}

/// Reads, checks and combines the attribute's arguments for `kind`.
pub(crate) fn parse_options(kind: Kind, args: Args) -> syn::Result<Options> {
    let allowed = kind.options();
    let mut options = Options::default();
    let mut positional: Vec<String> = Vec::new();
    let mut first_positional: Option<Span> = None;
    let mut keywords = Keywords::default();
    let mut seen: Vec<String> = Vec::new();
    let attribute = kind.attribute();
    for arg in args.0 {
        let span = arg.span();
        let (key, arg) = match arg {
            Arg::Positional(lit) => {
                if kind.is_activity() {
                    return err(
                        lit.span(),
                        format!("`{attribute}` takes no resource selector"),
                    );
                }
                if !seen.is_empty() {
                    return err(lit.span(), "positional selector arguments must come first");
                }
                first_positional.get_or_insert(lit.span());
                positional.push(lit.value());
                continue;
            }
            Arg::KeyValue { ref key, .. } | Arg::List { ref key, .. } | Arg::Flag(ref key) => {
                (key.to_string(), arg)
            }
        };
        if kind == Kind::Event
            && ["errors", "timeout", "retries", "backoff"].contains(&key.as_str())
        {
            return err(
                span,
                format!(
                    "`on::event` has no `{key}`: event handlers are never retried (errors are ignored)"
                ),
            );
        }
        if !allowed.contains(&key.as_str()) {
            return err(
                span,
                format!(
                    "unknown option `{key}` for `{attribute}`; expected one of: {}",
                    allowed.join(", ")
                ),
            );
        }
        if seen.contains(&key) {
            return err(span, format!("option `{key}` is given twice"));
        }
        seen.push(key.clone());
        let value = match arg {
            Arg::KeyValue { value, .. } => value,
            Arg::List { entries, .. } => {
                match key.as_str() {
                    "labels" => options.labels = meta_filters("label", entries)?,
                    "annotations" => options.annotations = meta_filters("annotation", entries)?,
                    _ => return err(span, format!("`{key}` takes `{key} = ...`, not a list")),
                }
                continue;
            }
            Arg::Flag(_) => {
                match key.as_str() {
                    "optional" => options.optional = true,
                    "deleted" => options.deleted = true,
                    "sharp" => options.sharp = true,
                    _ => return err(span, format!("`{key}` needs a value: `{key} = ...`")),
                }
                continue;
            }
            Arg::Positional(_) => continue,
        };
        match key.as_str() {
            "id" => {
                let id = lit_str(&value, "id")?;
                if id.value().is_empty() {
                    return err(id.span(), "a handler id must not be empty");
                }
                options.id = Some(id);
            }
            "param" => options.param = Some(value),
            "errors" => {
                let mode = lit_str(&value, "errors")?;
                let variant = match mode.value().as_str() {
                    "temporary" => "Temporary",
                    "permanent" => "Permanent",
                    "ignored" => "Ignored",
                    _ => {
                        return err(
                            mode.span(),
                            "`errors` is one of \"temporary\", \"permanent\", \"ignored\"",
                        );
                    }
                };
                options.errors = Some(proc_macro2::Ident::new(variant, mode.span()));
            }
            "timeout" => options.timeout = Some(seconds(&value, "timeout")?),
            "retries" => options.retries = Some(count(&value, "retries")?),
            "backoff" => options.backoff = Some(seconds(&value, "backoff")?),
            "interval" => options.interval = Some(seconds(&value, "interval")?),
            "initial_delay" => options.initial_delay = Some(seconds(&value, "initial_delay")?),
            "idle" => options.idle = Some(seconds(&value, "idle")?),
            "deadline_ms" => options.deadline_ms = Some(count(&value, "deadline_ms")?),
            "memory_mib" => options.memory_mib = Some(count(&value, "memory_mib")?),
            "optional" => options.optional = flag(&value, "optional")?,
            "deleted" => options.deleted = flag(&value, "deleted")?,
            "sharp" => options.sharp = flag(&value, "sharp")?,
            "field" => {
                let field = lit_str(&value, "field")?;
                let text = field.value();
                if text.is_empty() || text.split('.').any(str::is_empty) {
                    return err(
                        field.span(),
                        "`field` is a dotted path such as \"spec.size\"",
                    );
                }
                options.field = Some(field);
            }
            "value" => options.value = Some((span, field_matcher(value))),
            "old" => options.old = Some((span, field_matcher(value))),
            "new" => options.new = Some((span, field_matcher(value))),
            "when" => options.when = Some(value),
            "labels" | "annotations" => {
                return err(
                    span,
                    format!("`{key}` takes a list: `{key}(key = \"value\", ...)`"),
                );
            }
            selector_key => set_selector_keyword(&mut keywords, selector_key, &value)?,
        }
    }

    let has_selector =
        !positional.is_empty() || seen.iter().any(|k| SELECTOR_KEYS.contains(&k.as_str()));
    if !kind.is_activity() {
        let span = first_positional.unwrap_or_else(Span::call_site);
        if !has_selector {
            return err(
                span,
                format!(
                    "`{attribute}` needs a resource, e.g. `#[kapsel::{attribute}(\"kopfexamples\")]` \
                     or `#[kapsel::{attribute}(\"v1\", \"pods\")]`"
                ),
            );
        }
        options.selector =
            Some(selector::parse(&positional, &keywords).map_err(|m| syn::Error::new(span, m))?);
    }
    if options.field.is_none() {
        for (name, slot) in [
            ("value", &options.value),
            ("old", &options.old),
            ("new", &options.new),
        ] {
            if let Some((span, _)) = slot {
                return err(*span, format!("`{name}` requires `field = \"...\"`"));
            }
        }
        if kind == Kind::Field {
            return err(Span::call_site(), "`on::field` requires `field = \"...\"`");
        }
    }
    if let Some((span, _)) = &options.value
        && (options.old.is_some() || options.new.is_some())
    {
        return err(*span, "`value` and `old`/`new` are mutually exclusive");
    }
    Ok(options)
}
