//! `permit!`: one Kubernetes permission of the guest. The selector is read by the
//! same code as the handler attributes' (`args.rs`, `selector.rs`,
//! `options::set_selector_keyword`), so both accept exactly the same forms; the
//! verbs are checked here, at compile time, so that a typo never reaches the host.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Expr, Lit, LitStr};

use crate::args::{Arg, Args};
use crate::handler::{selector_tokens, static_constructor};
use crate::options::{SELECTOR_KEYS, set_selector_keyword};
use crate::selector::{self, Keywords};

/// The verbs a guest may declare (the host refuses anything else).
pub(crate) const VERBS: [&str; 6] = ["get", "list", "watch", "create", "patch", "delete"];

const EXAMPLE: &str = r#"`kapsel::permit!("v1", "configmaps", verbs = ["get", "list"])`"#;

fn err<T>(span: Span, message: impl std::fmt::Display) -> syn::Result<T> {
    Err(syn::Error::new(span, message))
}

/// `verbs = ["get", "list"]`: a non-empty list of known verbs, each once.
fn verbs(value: &Expr) -> syn::Result<Vec<LitStr>> {
    let Expr::Array(array) = value else {
        return Err(syn::Error::new_spanned(
            value,
            r#"`verbs` takes a list of string literals, e.g. `verbs = ["get", "list"]`"#,
        ));
    };
    let mut verbs: Vec<LitStr> = Vec::new();
    for elem in &array.elems {
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(verb),
            ..
        }) = elem
        else {
            return Err(syn::Error::new_spanned(
                elem,
                "a verb is a string literal, e.g. \"get\"",
            ));
        };
        let text = verb.value();
        if !VERBS.contains(&text.as_str()) {
            return err(
                verb.span(),
                format!(
                    "unknown verb `{text}`; expected one of: {}",
                    VERBS.join(", ")
                ),
            );
        }
        if verbs.iter().any(|v| v.value() == text) {
            return err(verb.span(), format!("verb `{text}` is given twice"));
        }
        verbs.push(verb.clone());
    }
    if verbs.is_empty() {
        return Err(syn::Error::new_spanned(
            value,
            format!("`verbs` needs at least one of: {}", VERBS.join(", ")),
        ));
    }
    Ok(verbs)
}

/// The whole expansion of one `permit!`.
pub(crate) fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let args: Args = syn::parse2(input)?;
    let mut positional: Vec<String> = Vec::new();
    let mut first_positional: Option<Span> = None;
    let mut keywords = Keywords::default();
    let mut seen: Vec<String> = Vec::new();
    let mut declared: Option<Vec<LitStr>> = None;
    for arg in args.0 {
        let span = arg.span();
        match arg {
            Arg::Positional(lit) => {
                if !seen.is_empty() {
                    return err(lit.span(), "positional selector arguments must come first");
                }
                first_positional.get_or_insert(lit.span());
                positional.push(lit.value());
            }
            Arg::KeyValue { key, value } => {
                let key = key.to_string();
                if seen.contains(&key) {
                    return err(span, format!("option `{key}` is given twice"));
                }
                if key == "verbs" {
                    declared = Some(verbs(&value)?);
                } else if SELECTOR_KEYS.contains(&key.as_str()) {
                    set_selector_keyword(&mut keywords, &key, &value)?;
                } else {
                    return err(
                        span,
                        format!(
                            "unknown option `{key}` for `permit!`; expected `verbs` or one of: {}",
                            SELECTOR_KEYS.join(", ")
                        ),
                    );
                }
                seen.push(key);
            }
            Arg::List { key, .. } | Arg::Flag(key) => {
                let message = if key == "verbs" {
                    r#"`verbs` takes a list: `verbs = ["get", "list"]`"#.to_owned()
                } else {
                    format!(
                        "unknown option `{key}` for `permit!`; expected `verbs` or one of: {}",
                        SELECTOR_KEYS.join(", ")
                    )
                };
                return err(span, message);
            }
        }
    }
    let has_selector =
        !positional.is_empty() || seen.iter().any(|k| SELECTOR_KEYS.contains(&k.as_str()));
    let span = first_positional.unwrap_or_else(Span::call_site);
    if !has_selector {
        return err(span, format!("`permit!` needs a resource, e.g. {EXAMPLE}"));
    }
    let selector = selector::parse(&positional, &keywords).map_err(|m| syn::Error::new(span, m))?;
    let Some(verbs) = declared else {
        return err(
            Span::call_site(),
            format!("`permit!` needs `verbs = [...]`, e.g. {EXAMPLE}"),
        );
    };

    let p = quote!(::kapsel::__private);
    let target = selector_tokens(&selector);
    let constructor = static_constructor();
    Ok(quote! {
        #[doc(hidden)]
        const _: () = {
            fn __kapsel_permission() -> #p::Permission {
                #p::Permission::new(#target, &[#(#verbs),*])
            }
            extern "C" fn __kapsel_register() {
                #p::register_permission(#p::PermissionEntry {
                    permission: __kapsel_permission,
                    source: (::core::file!(), ::core::line!(), ::core::column!()),
                });
            }
            #constructor
        };
    })
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::expand;

    fn error(input: proc_macro2::TokenStream) -> String {
        match expand(input) {
            Ok(tokens) => panic!("expected an error, got {tokens}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn selectors_and_verbs() {
        let tokens = match expand(quote!("kopf.dev", "v1", "kopfexamples", verbs = ["get"])) {
            Ok(tokens) => tokens.to_string(),
            Err(error) => panic!("unexpected error: {error}"),
        };
        assert!(tokens.contains(r#"Permission :: new"#), "{tokens}");
        assert!(tokens.contains(r#"& ["get"]"#), "{tokens}");
        assert!(
            expand(quote!(
                group = "apps",
                plural = "deployments",
                verbs = ["list"]
            ))
            .is_ok()
        );
        assert!(error(quote!("v1", "pods", verbs = ["update"])).contains("unknown verb `update`"));
        assert!(error(quote!("v1", "pods", verbs = [])).contains("at least one"));
        assert!(error(quote!("v1", "pods", verbs = ["get", "get"])).contains("twice"));
        assert!(error(quote!("v1", "pods", verbs = "get")).contains("list of string literals"));
        assert!(error(quote!("v1", "pods")).contains("needs `verbs"));
        assert!(error(quote!(verbs = ["get"])).contains("needs a resource"));
        assert!(error(quote!("a", "b", "c", "d", verbs = ["get"])).contains("at most 3"));
        assert!(error(quote!("pods", id = "x", verbs = ["get"])).contains("unknown option `id`"));
        assert!(error(quote!(verbs = ["get"], "pods")).contains("must come first"));
    }
}
