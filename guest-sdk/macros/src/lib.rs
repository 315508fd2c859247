//! Attribute macros of `kapsel-sdk`: use them through `kapsel::on::*` and `kapsel::index`.
//!
//! Every entry point only names the handler kind and hands over to `handler::expand`;
//! errors become `compile_error!` in one place (`expand`).

mod admission;
mod args;
mod handler;
mod options;
mod permit;
mod selector;

use proc_macro::TokenStream;

/// Turns the result of an expansion into tokens: the generated code, or the
/// original item plus a spanned `compile_error!` (so that the item itself still
/// resolves and no cascade of unrelated errors follows).
fn expand(kind: Kind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let item2 = proc_macro2::TokenStream::from(item.clone());
    match handler::expand(kind, attr.into(), item2.clone()) {
        Ok(tokens) => tokens.into(),
        Err(err) => {
            let err = err.to_compile_error();
            quote::quote!(#err #item2).into()
        }
    }
}

/// Declares a Kubernetes call the guest may make (the host refuses any other):
/// `kapsel::permit!("v1", "configmaps", verbs = ["get", "list"]);` at item position.
///
/// The resource selector takes every form the handler attributes take; `verbs` is
/// a non-empty list of `get`, `list`, `watch`, `create`, `patch`, `delete`.
#[proc_macro]
pub fn permit(input: TokenStream) -> TokenStream {
    match permit::expand(input.into()) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// The one list of handler kinds in this crate (the WIT's `handler-kind`): each row an
/// attribute (its entry point), the kind it declares, and how authors write it.
macro_rules! entry_points {
    ($($(#[$doc:meta])* $name:ident => $kind:ident, $written:literal;)*) => {
        /// The handler kinds, one per attribute (WIT `handler-kind`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kind {
            $($kind,)*
        }

        impl Kind {
            /// How authors write the attribute, for messages.
            pub(crate) fn attribute(self) -> &'static str {
                match self {
                    $(Self::$kind => $written,)*
                }
            }
        }

        $(
            $(#[$doc])*
            #[proc_macro_attribute]
            pub fn $name(attr: TokenStream, item: TokenStream) -> TokenStream {
                expand(Kind::$kind, attr, item)
            }
        )*
    };
}

entry_points! {
    /// `kopf.on.event`: every raw watch event, including the initial listing.
    event => Event, "on::event";
    /// `kopf.index`: an in-memory index of objects.
    index => Index, "index";
    /// `kopf.on.create`.
    create => Create, "on::create";
    /// `kopf.on.update`.
    update => Update, "on::update";
    /// `kopf.on.delete`.
    delete => Delete, "on::delete";
    /// `kopf.on.resume`.
    resume => Resume, "on::resume";
    /// `kopf.on.field`.
    field => Field, "on::field";
    /// `kopf.timer`.
    timer => Timer, "on::timer";
    /// `kopf.daemon`.
    daemon => Daemon, "on::daemon";
    /// `kopf.on.probe`.
    probe => Probe, "on::probe";
    /// `kopf.on.startup`.
    startup => Startup, "on::startup";
    /// `kopf.on.cleanup`.
    cleanup => Cleanup, "on::cleanup";
    /// `kopf.on.login`.
    login => Login, "on::login";
    /// `kopf.on.validate`: a validating admission handler (allows or refuses a write).
    validate => Validate, "on::validate";
    /// `kopf.on.mutate`: a mutating admission handler (changes what is written).
    mutate => Mutate, "on::mutate";
}
