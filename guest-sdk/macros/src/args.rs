//! Tokenising an attribute's arguments: positional string literals, `key = value`,
//! `key(k = v, ...)` lists and bare flags. Meaning is given in `handler.rs`.

use proc_macro2::Span;
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token};

/// One comma-separated argument of a handler attribute.
pub(crate) enum Arg {
    /// `"kopfexamples"`: a positional part of the resource selector.
    Positional(LitStr),
    /// `key = value`.
    KeyValue { key: Ident, value: Expr },
    /// `labels(app = "x", "a.b/c" = present)`.
    List { key: Ident, entries: Vec<ListEntry> },
    /// `optional`, `sharp`, ...
    Flag(Ident),
}

/// One `key = value` pair inside `labels(...)` / `annotations(...)`.
pub(crate) struct ListEntry {
    /// The label or annotation key; a string literal allows `/`, `.` and `-`.
    pub(crate) key: String,
    /// Where the key was written, for errors.
    pub(crate) span: Span,
    pub(crate) value: Expr,
}

impl Arg {
    /// The option's name (`"positional"` for selector strings), for messages.
    pub(crate) fn span(&self) -> Span {
        match self {
            Self::Positional(lit) => lit.span(),
            Self::KeyValue { key, .. } | Self::List { key, .. } | Self::Flag(key) => key.span(),
        }
    }
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(LitStr) {
            return Ok(Self::Positional(input.parse()?));
        }
        let key = Ident::parse_any(input)?;
        if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Ok(Self::KeyValue { key, value })
        } else if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            let entries = Punctuated::<ListEntry, Token![,]>::parse_terminated(&content)?;
            Ok(Self::List {
                key,
                entries: entries.into_iter().collect(),
            })
        } else {
            Ok(Self::Flag(key))
        }
    }
}

impl Parse for ListEntry {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let (key, span) = if input.peek(LitStr) {
            let lit: LitStr = input.parse()?;
            (lit.value(), lit.span())
        } else {
            let ident = Ident::parse_any(input)?;
            (ident.to_string(), ident.span())
        };
        input.parse::<Token![=]>()?;
        let value = input.parse()?;
        Ok(Self { key, span, value })
    }
}

/// Every argument of one attribute, in order.
pub(crate) struct Args(pub(crate) Vec<Arg>);

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let args = Punctuated::<Arg, Token![,]>::parse_terminated(input)?;
        Ok(Self(args.into_iter().collect()))
    }
}
