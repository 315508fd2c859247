//! Attribute macros of `kapsel-sdk`: use them through `kapsel::on::*` and `kapsel::index`.
//!
//! Every entry point only names the handler kind and hands over to [`handler::expand`];
//! errors become `compile_error!` in one place ([`expand`]).

mod args;
mod handler;
mod options;
mod permit;
mod selector;

use proc_macro::TokenStream;

use handler::Kind;

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

macro_rules! entry_points {
    ($($(#[$doc:meta])* $name:ident => $kind:ident;)*) => {$(
        $(#[$doc])*
        #[proc_macro_attribute]
        pub fn $name(attr: TokenStream, item: TokenStream) -> TokenStream {
            expand(Kind::$kind, attr, item)
        }
    )*};
}

entry_points! {
    /// `kopf.on.event`: every raw watch event, including the initial listing.
    event => Event;
    /// `kopf.index`: an in-memory index of objects.
    index => Index;
    /// `kopf.on.create`.
    create => Create;
    /// `kopf.on.update`.
    update => Update;
    /// `kopf.on.delete`.
    delete => Delete;
    /// `kopf.on.resume`.
    resume => Resume;
    /// `kopf.on.field`.
    field => Field;
    /// `kopf.timer`.
    timer => Timer;
    /// `kopf.daemon`.
    daemon => Daemon;
    /// `kopf.on.probe`.
    probe => Probe;
    /// `kopf.on.startup`.
    startup => Startup;
    /// `kopf.on.cleanup`.
    cleanup => Cleanup;
}
