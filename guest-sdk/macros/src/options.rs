//! The options of one handler attribute: read, checked against what the kind
//! accepts, and validated together as Kopf does at decoration time (KOPF.md §1.2).

use proc_macro2::Span;
use syn::{Expr, Lit, LitStr};

use crate::Kind;
use crate::admission::Admission;
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
    /// A callback (Kopf's callable filter): a closure, or for labels and annotations
    /// also a function's path; evaluated in the guest with the handler's `when`.
    Callback(Expr),
}

impl Matcher {
    /// The callback, if this matcher is one.
    pub(crate) fn callback(&self) -> Option<&Expr> {
        match self {
            Matcher::Callback(expr) => Some(expr),
            _ => None,
        }
    }
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
    /// `initial_delay = <function or closure>`: computed by the guest for each object.
    pub(crate) initial_delay_fn: Option<Expr>,
    pub(crate) cancellation_backoff: Option<f64>,
    pub(crate) cancellation_timeout: Option<f64>,
    pub(crate) cancellation_polling: Option<f64>,
    pub(crate) idle: Option<f64>,
    pub(crate) sharp: bool,
    pub(crate) deadline_ms: Option<u32>,
    pub(crate) memory_mib: Option<u32>,
    /// None with `everything`, and for activities.
    pub(crate) selector: Option<Selector>,
    /// `everything`: every resource (Kopf's `kopf.EVERYTHING`), in place of a selector.
    pub(crate) everything: bool,
    /// `resource_filter = <function or closure>`: the resources the guest chooses (Kopf's
    /// callable selector), in place of a selector.
    pub(crate) resource_filter: Option<Expr>,
    /// An admission attribute's own options.
    pub(crate) admission: Admission,
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
                callback @ (Expr::Closure(_) | Expr::Path(_)) => {
                    Matcher::Callback(callback.clone())
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!(
                            "a {key} filter is a string literal, `present`, `absent`, or a \
                             callback (a closure or a function) taking the {key}'s value \
                             (`Option<&str>`) and the cause"
                        ),
                    ));
                }
            },
        };
        filters.push((entry.key, matcher));
    }
    Ok(filters)
}

/// `present`, `absent`, a closure (a callback), or any other expression (a value).
fn field_matcher(expr: Expr) -> Matcher {
    match presence(&expr) {
        Some(matcher) => matcher,
        None if matches!(expr, Expr::Closure(_)) => Matcher::Callback(expr),
        None => Matcher::Json(expr),
    }
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
    let mut reader = Reader::new(kind);
    for arg in args.0 {
        reader.read(arg)?;
    }
    reader.finish()
}

/// One attribute's arguments as read so far, in order: each is checked against what the
/// kind accepts as it is read; what they mean together is checked at the end
/// ([`Reader::finish`]).
struct Reader {
    kind: Kind,
    /// The options `kind` accepts.
    allowed: Vec<&'static str>,
    options: Options,
    /// The selector's positional strings, and where the first one was written (errors
    /// about the selector point there).
    positional: Vec<String>,
    first_positional: Option<Span>,
    keywords: Keywords,
    /// Every option read so far, to refuse one given twice.
    seen: Vec<String>,
}

impl Reader {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            allowed: kind.options(),
            options: Options::default(),
            positional: Vec::new(),
            first_positional: None,
            keywords: Keywords::default(),
            seen: Vec::new(),
        }
    }

    fn read(&mut self, arg: Arg) -> syn::Result<()> {
        let span = arg.span();
        match arg {
            Arg::Positional(lit) => self.positional(&lit),
            Arg::KeyValue { key, value } => {
                let key = self.option(&key, span)?;
                self.value(&key, value, span)
            }
            Arg::List { key, entries } => {
                let key = self.option(&key, span)?;
                self.list(&key, entries, span)
            }
            Arg::Flag(key) => {
                let key = self.option(&key, span)?;
                self.flag(&key, span)
            }
        }
    }

    /// A positional part of the selector: only for resource kinds, and only before any
    /// option.
    fn positional(&mut self, lit: &LitStr) -> syn::Result<()> {
        if self.kind.is_activity() {
            return err(
                lit.span(),
                format!("`{}` takes no resource selector", self.kind.attribute()),
            );
        }
        if !self.seen.is_empty() {
            return err(lit.span(), "positional selector arguments must come first");
        }
        self.first_positional.get_or_insert(lit.span());
        self.positional.push(lit.value());
        Ok(())
    }

    /// The option's name, once checked to be one the kind accepts and not given before.
    fn option(&mut self, key: &proc_macro2::Ident, span: Span) -> syn::Result<String> {
        let key = key.to_string();
        let retrying = ["errors", "timeout", "retries", "backoff"].contains(&key.as_str());
        if self.kind == Kind::Event && retrying {
            return err(
                span,
                format!(
                    "`on::event` has no `{key}`: event handlers are never retried (errors are ignored)"
                ),
            );
        }
        if self.kind.is_admission() && retrying {
            return err(
                span,
                format!(
                    "`{}` has no `{key}`: admission handlers are called once per request and \
                     never retried; any error refuses the request",
                    self.kind.attribute()
                ),
            );
        }
        if !self.allowed.contains(&key.as_str()) {
            return err(
                span,
                format!(
                    "unknown option `{key}` for `{}`; expected one of: {}",
                    self.kind.attribute(),
                    self.allowed.join(", ")
                ),
            );
        }
        if self.seen.contains(&key) {
            return err(span, format!("option `{key}` is given twice"));
        }
        self.seen.push(key.clone());
        Ok(key)
    }

    /// `key(k = v, ...)`: the label and annotation filters.
    fn list(&mut self, key: &str, entries: Vec<ListEntry>, span: Span) -> syn::Result<()> {
        match key {
            "labels" => self.options.labels = meta_filters("label", entries)?,
            "annotations" => self.options.annotations = meta_filters("annotation", entries)?,
            _ => return err(span, format!("`{key}` takes `{key} = ...`, not a list")),
        }
        Ok(())
    }

    /// A bare `key`: the flags, `true` when named.
    fn flag(&mut self, key: &str, span: Span) -> syn::Result<()> {
        match key {
            "optional" => self.options.optional = true,
            "deleted" => self.options.deleted = true,
            "sharp" => self.options.sharp = true,
            "everything" => self.options.everything = true,
            _ if self.options.admission.flag(key) => {}
            _ => return err(span, format!("`{key}` needs a value: `{key} = ...`")),
        }
        Ok(())
    }

    /// `key = value`.
    fn value(&mut self, key: &str, value: Expr, span: Span) -> syn::Result<()> {
        let options = &mut self.options;
        match key {
            "id" => options.id = Some(handler_id(&value)?),
            "param" => options.param = Some(value),
            "errors" => options.errors = Some(errors_mode(&value)?),
            "timeout" => options.timeout = Some(seconds(&value, "timeout")?),
            "retries" => options.retries = Some(count(&value, "retries")?),
            "backoff" => options.backoff = Some(seconds(&value, "backoff")?),
            "interval" => options.interval = Some(seconds(&value, "interval")?),
            // A number, or (Kopf's callable) a function of the cause answering one.
            "initial_delay" => match &value {
                Expr::Lit(_) | Expr::Unary(_) => {
                    options.initial_delay = Some(seconds(&value, "initial_delay")?);
                }
                _ => options.initial_delay_fn = Some(value),
            },
            "cancellation_backoff" => {
                options.cancellation_backoff = Some(seconds(&value, "cancellation_backoff")?);
            }
            "cancellation_timeout" => {
                options.cancellation_timeout = Some(seconds(&value, "cancellation_timeout")?);
            }
            "cancellation_polling" => {
                options.cancellation_polling = Some(seconds(&value, "cancellation_polling")?);
            }
            "idle" => options.idle = Some(seconds(&value, "idle")?),
            "deadline_ms" => options.deadline_ms = Some(count(&value, "deadline_ms")?),
            "memory_mib" => options.memory_mib = Some(count(&value, "memory_mib")?),
            "optional" => options.optional = flag(&value, "optional")?,
            "deleted" => options.deleted = flag(&value, "deleted")?,
            "sharp" => options.sharp = flag(&value, "sharp")?,
            "field" => options.field = Some(field_path(&value)?),
            "value" => options.value = Some((span, field_matcher(value))),
            "old" => options.old = Some((span, field_matcher(value))),
            "new" => options.new = Some((span, field_matcher(value))),
            "when" => options.when = Some(value),
            "resource_filter" => options.resource_filter = Some(value),
            key if crate::admission::OPTIONS.contains(&key) => {
                options.admission.value(key, &value)?;
            }
            "labels" | "annotations" => {
                return err(
                    span,
                    format!("`{key}` takes a list: `{key}(key = \"value\", ...)`"),
                );
            }
            selector_key => set_selector_keyword(&mut self.keywords, selector_key, &value)?,
        }
        Ok(())
    }

    /// The options, once what they say together is checked: the selector a resource
    /// kind needs, and the field that `value`, `old` and `new` match.
    fn finish(mut self) -> syn::Result<Options> {
        if self.options.everything && self.options.resource_filter.is_some() {
            return err(
                Span::call_site(),
                "`everything` and `resource_filter` are two resource selectors: give one",
            );
        }
        if self.options.everything || self.options.resource_filter.is_some() {
            let which = if self.options.everything {
                "`everything` selects every resource"
            } else {
                "`resource_filter` chooses the resources"
            };
            if !self.positional.is_empty()
                || self
                    .seen
                    .iter()
                    .any(|k| SELECTOR_KEYS.contains(&k.as_str()))
            {
                let span = self.first_positional.unwrap_or_else(Span::call_site);
                return err(
                    span,
                    format!("{which}: it takes no other resource selector"),
                );
            }
        } else if !self.kind.is_activity() {
            self.options.selector = Some(self.selector()?);
        }
        check_field_matchers(self.kind, &self.options)?;
        Ok(self.options)
    }

    /// The resource selector, from the positional strings and the keywords.
    fn selector(&self) -> syn::Result<Selector> {
        let attribute = self.kind.attribute();
        let has_selector = !self.positional.is_empty()
            || self
                .seen
                .iter()
                .any(|k| SELECTOR_KEYS.contains(&k.as_str()));
        let span = self.first_positional.unwrap_or_else(Span::call_site);
        if !has_selector {
            return err(
                span,
                format!(
                    "`{attribute}` needs a resource, e.g. `#[kapsel::{attribute}(\"kopfexamples\")]`, \
                     `#[kapsel::{attribute}(\"v1\", \"pods\")]` or `#[kapsel::{attribute}(everything)]`"
                ),
            );
        }
        selector::parse(&self.positional, &self.keywords).map_err(|m| syn::Error::new(span, m))
    }
}

/// `id = "..."`: not empty.
fn handler_id(value: &Expr) -> syn::Result<LitStr> {
    let id = lit_str(value, "id")?;
    if id.value().is_empty() {
        return err(id.span(), "a handler id must not be empty");
    }
    Ok(id)
}

/// `errors = "..."`: the variant of the SDK's `ErrorsMode` it names.
fn errors_mode(value: &Expr) -> syn::Result<proc_macro2::Ident> {
    let mode = lit_str(value, "errors")?;
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
    Ok(proc_macro2::Ident::new(variant, mode.span()))
}

/// `field = "..."`: a dotted path without empty parts.
fn field_path(value: &Expr) -> syn::Result<LitStr> {
    let field = lit_str(value, "field")?;
    let text = field.value();
    if text.is_empty() || text.split('.').any(str::is_empty) {
        return err(
            field.span(),
            "`field` is a dotted path such as \"spec.size\"",
        );
    }
    Ok(field)
}

/// `value`, `old` and `new` match a field: they need `field`, which `on::field` needs
/// anyway; `value` matches alone.
fn check_field_matchers(kind: Kind, options: &Options) -> syn::Result<()> {
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
    Ok(())
}
