//! The options of the admission attributes (`on::validate`, `on::mutate`: Kopf's
//! `on.validate`/`on.mutate`): the operations, the subresource and the webhook's flags,
//! read and checked as Kopf does at decoration time, and written into the registration's
//! `admission`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{Expr, Lit};

/// The options only admission attributes take.
pub(crate) const OPTIONS: [&str; 6] = [
    "operations",
    "operation",
    "subresource",
    "persistent",
    "side_effects",
    "ignore_failures",
];

/// The operations of an admission review, as Kubernetes (and Kopf) write them.
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// An admission attribute's own options, as written.
#[derive(Default)]
pub(crate) struct Admission {
    /// `operations = [...]`, in order.
    operations: Vec<String>,
    /// `operation = "..."` (Kopf's deprecated single operation), where it is written.
    operation: Option<(String, Span)>,
    subresource: Option<String>,
    persistent: bool,
    side_effects: bool,
    ignore_failures: bool,
}

fn err<T>(span: Span, message: impl std::fmt::Display) -> syn::Result<T> {
    Err(syn::Error::new(span, message))
}

/// One operation's word, checked.
fn operation(expr: &Expr) -> syn::Result<String> {
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(lit), ..
    }) = expr
    else {
        return Err(syn::Error::new_spanned(
            expr,
            "an operation is a string literal: \"CREATE\", \"UPDATE\", \"DELETE\" or \"CONNECT\"",
        ));
    };
    let word = lit.value();
    if OPERATIONS.contains(&word.as_str()) {
        return Ok(word);
    }
    let upper = word.to_uppercase();
    if OPERATIONS.contains(&upper.as_str()) {
        return err(
            lit.span(),
            format!("unknown operation \"{word}\": operations are upper case, \"{upper}\""),
        );
    }
    err(
        lit.span(),
        format!(
            "unknown operation \"{word}\": an admission handler's operations are \"CREATE\", \
             \"UPDATE\", \"DELETE\" and \"CONNECT\""
        ),
    )
}

fn flag(expr: &Expr, key: &str) -> syn::Result<bool> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(lit),
            ..
        }) => Ok(lit.value),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` takes `true` or `false`"),
        )),
    }
}

impl Admission {
    /// `key = value`, for one of [`OPTIONS`].
    pub(crate) fn value(&mut self, key: &str, value: &Expr) -> syn::Result<()> {
        match key {
            "operations" => {
                let Expr::Array(array) = value else {
                    return Err(syn::Error::new_spanned(
                        value,
                        "`operations` takes a list: `operations = [\"CREATE\", \"UPDATE\"]`",
                    ));
                };
                if array.elems.is_empty() {
                    return Err(syn::Error::new_spanned(
                        value,
                        "`operations` must not be empty: leave it out for every operation",
                    ));
                }
                for element in &array.elems {
                    let word = operation(element)?;
                    if !self.operations.contains(&word) {
                        self.operations.push(word);
                    }
                }
            }
            "operation" => {
                let span = syn::spanned::Spanned::span(value);
                self.operation = Some((operation(value)?, span));
            }
            "subresource" => {
                let text = match value {
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Str(lit), ..
                    }) => lit.value(),
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "`subresource` takes a string literal, e.g. `subresource = \"status\"`",
                        ));
                    }
                };
                if text.is_empty() || text.contains('/') {
                    return Err(syn::Error::new_spanned(
                        value,
                        "`subresource` names one subresource, e.g. \"status\" or \"scale\"",
                    ));
                }
                self.subresource = Some(text);
            }
            _ => *self.slot(key) = flag(value, key)?,
        }
        Ok(())
    }

    /// A bare flag (`persistent`, `side_effects`, `ignore_failures`): `false` for any other
    /// key, which needs a value.
    pub(crate) fn flag(&mut self, key: &str) -> bool {
        if ["persistent", "side_effects", "ignore_failures"].contains(&key) {
            *self.slot(key) = true;
            true
        } else {
            false
        }
    }

    fn slot(&mut self, key: &str) -> &mut bool {
        match key {
            "persistent" => &mut self.persistent,
            "side_effects" => &mut self.side_effects,
            _ => &mut self.ignore_failures,
        }
    }

    /// The statements that set the registration `r`'s admission options: the operations
    /// of `operations` and of the deprecated `operation` together, as Kopf joins them
    /// (warning of `operation`, as Kopf does).
    pub(crate) fn sets(&self) -> Vec<TokenStream> {
        let p = quote!(::kapsel::__private);
        let mut operations = self.operations.clone();
        let mut sets = Vec::new();
        if let Some((word, span)) = &self.operation {
            if !operations.contains(word) {
                operations.push(word.clone());
            }
            sets.push(quote_spanned!(*span=> #p::deprecated_operation_option();));
        }
        let subresource = match &self.subresource {
            Some(text) => {
                quote!(::core::option::Option::Some(::std::string::String::from(#text)))
            }
            None => quote!(::core::option::Option::None),
        };
        let (persistent, side_effects, ignore_failures) =
            (self.persistent, self.side_effects, self.ignore_failures);
        sets.push(quote! {
            r.admission = ::core::option::Option::Some(#p::AdmissionOptions {
                operations: ::std::vec![#(::std::string::String::from(#operations)),*],
                subresource: #subresource,
                persistent: #persistent,
                side_effects: #side_effects,
                ignore_failures: #ignore_failures,
            });
        });
        sets
    }
}
