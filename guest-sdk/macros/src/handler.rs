//! One handler attribute: validate its options for its kind (as Kopf does at
//! decoration time), check the function's signature, and emit the function
//! unchanged plus a hidden registration that a static constructor adds to the
//! SDK's registry when the component starts.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{FnArg, ItemFn, LitStr, ReturnType, Type};

use crate::Kind;
use crate::args::Args;
use crate::options::{Matcher, Options, SELECTOR_KEYS, parse_options};
use crate::selector::{Name, Selector};

impl Kind {
    fn variant(self) -> proc_macro2::Ident {
        format_ident!("{self:?}")
    }

    /// Operator-level (activity) handlers take no resource and no filters.
    pub(crate) fn is_activity(self) -> bool {
        matches!(
            self,
            Self::Probe | Self::Startup | Self::Cleanup | Self::Login
        )
    }

    /// Admission handlers (validating, mutating) are neither retried nor timed out.
    pub(crate) fn is_admission(self) -> bool {
        matches!(self, Self::Validate | Self::Mutate)
    }

    /// The options this kind accepts (KOPF.md §1.2), besides selector keywords.
    pub(crate) fn options(self) -> Vec<&'static str> {
        let mut options = vec!["id", "param", "deadline_ms", "memory_mib"];
        if self != Self::Event && !self.is_admission() {
            options.extend(["errors", "timeout", "retries", "backoff"]);
        }
        if !self.is_activity() {
            options.extend(SELECTOR_KEYS);
            options.extend([
                "labels",
                "annotations",
                "field",
                "value",
                "when",
                "everything",
                "resource_filter",
            ]);
        }
        match self {
            Self::Update | Self::Field => options.extend(["old", "new"]),
            Self::Validate | Self::Mutate => options.extend(crate::admission::OPTIONS),
            Self::Delete => options.push("optional"),
            Self::Resume => options.push("deleted"),
            Self::Timer => options.extend(["interval", "initial_delay", "idle", "sharp"]),
            Self::Daemon => options.extend([
                "initial_delay",
                "cancellation_backoff",
                "cancellation_timeout",
                "cancellation_polling",
            ]),
            _ => {}
        }
        options
    }
}

/// How the handler takes the cause.
enum Input {
    None,
    Shared,
    Mutable,
}

/// How the handler's return value becomes an outcome.
enum Output {
    Unit,
    Value,
    Result,
}

fn check_signature(kind: Kind, function: &ItemFn) -> syn::Result<(Input, Output)> {
    let sig = &function.sig;
    let expected = "expected `fn name(cause: &kapsel::Cause)`, `fn name(cause: &mut kapsel::Cause)` \
                    or `fn name()`";
    if let Some(asyncness) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            asyncness,
            format!("handlers are synchronous: {expected}"),
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            format!("handlers cannot be generic: {expected}"),
        ));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new_spanned(variadic, expected));
    }
    let input = match sig.inputs.iter().collect::<Vec<_>>().as_slice() {
        [] => Input::None,
        [FnArg::Receiver(receiver)] => {
            return Err(syn::Error::new_spanned(
                receiver,
                format!("handlers are free functions, not methods: {expected}"),
            ));
        }
        [FnArg::Typed(typed)] => match &*typed.ty {
            Type::Reference(reference) if is_cause(&reference.elem) => {
                if reference.mutability.is_some() {
                    Input::Mutable
                } else {
                    Input::Shared
                }
            }
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    format!("unexpected parameter type: {expected}"),
                ));
            }
        },
        [_, extra, ..] => {
            return Err(syn::Error::new_spanned(
                extra,
                format!("too many parameters: {expected}"),
            ));
        }
    };
    let output = match &sig.output {
        ReturnType::Default => Output::Unit,
        ReturnType::Type(_, ty) => match &**ty {
            Type::Tuple(tuple) if tuple.elems.is_empty() => Output::Unit,
            Type::Path(path)
                if path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Result") =>
            {
                Output::Result
            }
            Type::ImplTrait(_) | Type::Reference(_) if kind == Kind::Index => {
                return Err(syn::Error::new_spanned(
                    ty,
                    "index handlers return an owned value",
                ));
            }
            _ => Output::Value,
        },
    };
    Ok((input, output))
}

fn is_cause(ty: &Type) -> bool {
    matches!(ty, Type::Path(path) if path.qself.is_none()
        && path.path.segments.last().is_some_and(|s| s.ident == "Cause" && s.arguments.is_empty()))
}

fn opt<T: quote::ToTokens>(value: Option<T>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

/// A matcher the host evaluates; `None` for a callback, which the guest evaluates (in
/// the handler's `when`).
fn matcher_tokens(matcher: &Matcher) -> Option<TokenStream> {
    let p = quote!(::kapsel::__private);
    Some(match matcher {
        Matcher::Present => quote!(#p::Matcher::Present),
        Matcher::Absent => quote!(#p::Matcher::Absent),
        Matcher::Text(text) => quote!(#p::Matcher::Equals(::std::string::String::from(#text))),
        Matcher::Json(expr) => {
            quote_spanned!(expr.span()=> #p::Matcher::Equals(#p::to_json(&(#expr))))
        }
        Matcher::Callback(_) => return None,
    })
}

pub(crate) fn selector_tokens(selector: &Selector) -> TokenStream {
    let p = quote!(::kapsel::__private);
    let (variant, text) = match &selector.name {
        Name::Any(t) => ("Any", t),
        Name::Kind(t) => ("Kind", t),
        Name::Plural(t) => ("Plural", t),
        Name::Singular(t) => ("Singular", t),
        Name::Shortcut(t) => ("Shortcut", t),
        Name::Category(t) => ("Category", t),
    };
    let variant = format_ident!("{variant}");
    let group = opt(selector.group.as_deref());
    let version = opt(selector.version.as_deref());
    quote!(#p::Selector::new(#group, #version, #p::ResourceName::#variant(::std::string::String::from(#text))))
}

/// The whole expansion of one handler attribute.
pub(crate) fn expand(kind: Kind, attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let function: ItemFn = syn::parse2(item.clone()).map_err(|_| {
        syn::Error::new_spanned(
            &item,
            format!(
                "`#[kapsel::{}]` applies to functions only",
                kind.attribute()
            ),
        )
    })?;
    let args: Args = syn::parse2(attr)?;
    let options = parse_options(kind, args)?;
    let (input, output) = check_signature(kind, &function)?;

    let p = quote!(::kapsel::__private);
    let name = &function.sig.ident;
    let id = handler_id(kind, &options, name);
    let variant = kind.variant();
    let mut sets = registration_sets(&options);
    if kind.is_admission() {
        sets.extend(options.admission.sets());
    }
    let call = match input {
        Input::None => quote!(#name()),
        Input::Shared => quote!(#name(&*cause)),
        Input::Mutable => quote!(#name(cause)),
    };
    let (handler, body) = if kind == Kind::Index {
        (quote!(Index), index_dispatch(&call, &output))
    } else {
        (quote!(Invoke), invoke_dispatch(&call, &output))
    };
    let when = when_filter(&options);
    let initial_delay = initial_delay_function(&options);
    let constructor = static_constructor();
    // Only a guest with login handlers names them to the host (and imports WIT `login`).
    let enable_logins = (kind == Kind::Login).then(|| quote!(#p::enable_logins();));
    // And only a guest with admission handlers reaches WIT `admission`.
    let enable_admission = kind.is_admission().then(|| quote!(#p::enable_admission();));
    // Likewise for handlers of every resource (WIT `selection`).
    let enable_everything = options.everything.then(|| quote!(#p::enable_everything();));
    let enable_chosen = options
        .resource_filter
        .is_some()
        .then(|| quote!(#p::enable_chosen();));
    let resource_filter = resource_filter_function(&options);
    Ok(quote! {
        #function

        #[doc(hidden)]
        const _: () = {
            fn __kapsel_registration() -> #p::Registration {
                let mut r = #p::Registration::new(#id, #p::HandlerKind::#variant);
                #(#sets)*
                r
            }
            #body
            extern "C" fn __kapsel_register() {
                #enable_logins
                #enable_admission
                #enable_everything
                #enable_chosen
                #p::register(#p::Entry {
                    id: #id,
                    kind: #p::HandlerKind::#variant,
                    registration: __kapsel_registration,
                    handler: #p::Handler::#handler(__kapsel_dispatch),
                    when: #when,
                    initial_delay: #initial_delay,
                    resource_filter: #resource_filter,
                    function: ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#name)),
                    source: (::core::file!(), ::core::line!(), ::core::column!()),
                });
            }
            #constructor
        };
    })
}

/// The handler's id, as Kopf forms it: `id`, or the function's name; with a field,
/// `<id>/<field>` (except for indexes).
fn handler_id(kind: Kind, options: &Options, name: &proc_macro2::Ident) -> String {
    let id = options
        .id
        .as_ref()
        .map_or_else(|| name.to_string(), LitStr::value);
    match &options.field {
        Some(field) if kind != Kind::Index => format!("{id}/{}", field.value()),
        _ => id,
    }
}

/// The statements that fill the registration `r` from the options: first what selects
/// the objects, then how the handler is run.
fn registration_sets(options: &Options) -> Vec<TokenStream> {
    let mut sets = filter_sets(options);
    sets.extend(behaviour_sets(options));
    sets
}

/// The selector and the filters: labels, annotations, the field and its matchers, and
/// whether a `when` filter is there.
fn filter_sets(options: &Options) -> Vec<TokenStream> {
    let p = quote!(::kapsel::__private);
    let mut sets = Vec::new();
    if let Some(selector) = &options.selector {
        let selector = selector_tokens(selector);
        sets.push(quote!(r.selectors.push(#selector);));
    }
    for (list, filters) in [
        ("labels", &options.labels),
        ("annotations", &options.annotations),
    ] {
        let list = format_ident!("{list}");
        for (key, matcher) in filters {
            if let Some(matcher) = matcher_tokens(matcher) {
                sets.push(quote!(r.#list.push(#p::MetaFilter::new(#key, #matcher));));
            }
        }
    }
    if let Some(field) = &options.field {
        sets.push(
            quote!(r.field = ::core::option::Option::Some(::std::string::String::from(#field));),
        );
    }
    for (slot, matcher) in [
        ("value", &options.value),
        ("old_value", &options.old),
        ("new_value", &options.new),
    ] {
        if let Some(matcher) = matcher.as_ref().and_then(|(_, m)| matcher_tokens(m)) {
            let slot = format_ident!("{slot}");
            sets.push(quote!(r.#slot = ::core::option::Option::Some(#matcher);));
        }
    }
    if options.when.is_some() || !callbacks(options).is_empty() {
        sets.push(quote!(r.has_when = true;));
    }
    sets
}

/// How the handler is run: its errors mode, times, counts, flags and `param`.
fn behaviour_sets(options: &Options) -> Vec<TokenStream> {
    let p = quote!(::kapsel::__private);
    let mut sets = Vec::new();
    if let Some(mode) = &options.errors {
        sets.push(quote!(r.errors = ::core::option::Option::Some(#p::ErrorsMode::#mode);));
    }
    for (slot, value) in [
        ("timeout_seconds", options.timeout),
        ("backoff_seconds", options.backoff),
        ("interval_seconds", options.interval),
        ("initial_delay_seconds", options.initial_delay),
        ("idle_seconds", options.idle),
        ("cancellation_backoff_seconds", options.cancellation_backoff),
        ("cancellation_timeout_seconds", options.cancellation_timeout),
        ("cancellation_polling_seconds", options.cancellation_polling),
    ] {
        if let Some(value) = value {
            let slot = format_ident!("{slot}");
            sets.push(quote!(r.#slot = ::core::option::Option::Some(#value);));
        }
    }
    for (slot, value) in [
        ("retries", options.retries),
        ("deadline_ms", options.deadline_ms),
        ("memory_mib", options.memory_mib),
    ] {
        if let Some(value) = value {
            let slot = format_ident!("{slot}");
            sets.push(quote!(r.#slot = ::core::option::Option::Some(#value);));
        }
    }
    for (slot, value) in [
        ("optional", options.optional),
        ("deleted", options.deleted),
        ("sharp", options.sharp),
        ("everything", options.everything),
        ("chosen", options.resource_filter.is_some()),
        ("initial_delay_callback", options.initial_delay_fn.is_some()),
    ] {
        if value {
            let slot = format_ident!("{slot}");
            sets.push(quote!(r.#slot = true;));
        }
    }
    if let Some(param) = &options.param {
        sets.push(quote_spanned!(param.span()=> r.param = ::core::option::Option::Some(#p::to_json(&(#param)));));
    }
    sets
}

/// `__kapsel_dispatch` of an index handler: `call`'s value as the index's entries.
fn index_dispatch(call: &TokenStream, output: &Output) -> TokenStream {
    let p = quote!(::kapsel::__private);
    let convert = quote! {{
        #[allow(unused_imports, reason = "one of the two conversions applies")]
        use #p::index_ret::{ViaKeyed as _, ViaSerialize as _};
        (&#p::index_ret::IndexRet::new(value)).__kapsel_index()
    }};
    let body = match output {
        Output::Unit => quote!({ #call; #p::IndexOutcome::Keep }),
        Output::Value => quote!({ let value = #call; #convert }),
        Output::Result => quote!({
            match #call {
                ::core::result::Result::Ok(value) => #convert,
                ::core::result::Result::Err(error) => #p::index_error(error),
            }
        }),
    };
    quote!(fn __kapsel_dispatch(cause: &mut ::kapsel::Cause) -> #p::IndexOutcome #body)
}

/// `__kapsel_dispatch` of any other handler: `call`'s value as the call's outcome.
fn invoke_dispatch(call: &TokenStream, output: &Output) -> TokenStream {
    let p = quote!(::kapsel::__private);
    let body = match output {
        Output::Unit => quote!({ #call; #p::Outcome::Done(::core::option::Option::None) }),
        Output::Value => quote!({ #p::value_outcome(&#call) }),
        Output::Result => quote!({ #p::result_outcome(#call) }),
    };
    quote!(fn __kapsel_dispatch(cause: &mut ::kapsel::Cause) -> #p::Outcome #body)
}

/// The callback filters, each as a call on `cause` (Kopf's callable `labels`,
/// `annotations`, `value`, `old` and `new`: each gets the value it filters on, and the
/// cause).
fn callbacks(options: &Options) -> Vec<TokenStream> {
    let p = quote!(::kapsel::__private);
    let mut calls = Vec::new();
    for (read, filters) in [
        (quote!(label), &options.labels),
        (quote!(annotation), &options.annotations),
    ] {
        for (key, matcher) in filters {
            if let Some(callback) = matcher.callback() {
                calls.push(quote_spanned!(callback.span()=> #p::check_text(#callback, cause.#read(#key), cause)));
            }
        }
    }
    let field = options.field.as_ref();
    for (matcher, value) in [
        (
            &options.value,
            field.map(|f| quote!(#p::field_value(cause, #f))),
        ),
        (&options.old, Some(quote!(cause.old()))),
        (&options.new, Some(quote!(cause.new()))),
    ] {
        if let (Some(callback), Some(value)) =
            (matcher.as_ref().and_then(|(_, m)| m.callback()), value)
        {
            calls.push(quote_spanned!(callback.span()=> #p::check_value(#callback, #value, cause)));
        }
    }
    calls
}

/// The entry's `when`: the `when = ...` filter and the callback filters, all of which
/// must pass, as one function; `None` without any.
fn when_filter(options: &Options) -> TokenStream {
    let mut checks = callbacks(options);
    if let Some(when) = &options.when {
        checks.push(quote_spanned!(when.span()=> ::kapsel::__private::check_cause(#when, cause)));
    }
    if checks.is_empty() {
        return quote!(::core::option::Option::None);
    }
    quote! {
        ::core::option::Option::Some({
            fn __kapsel_when(cause: &::kapsel::Cause) -> bool { #(#checks)&&* }
            __kapsel_when
        })
    }
}

/// The entry's `initial_delay`: the `initial_delay = <function>` option as a function of
/// the cause answering seconds (Kopf's callable `initial_delay`), if given.
fn initial_delay_function(options: &Options) -> TokenStream {
    match &options.initial_delay_fn {
        Some(delay) => quote_spanned! {delay.span()=>
            ::core::option::Option::Some({
                fn __kapsel_initial_delay(cause: &::kapsel::Cause) -> f64 {
                    ::core::convert::Into::<f64>::into((#delay)(cause))
                }
                __kapsel_initial_delay
            })
        },
        None => quote!(::core::option::Option::None),
    }
}

/// `resource_filter = <function>` (Kopf's callable selector) as the entry's function of a
/// resource's description.
fn resource_filter_function(options: &Options) -> TokenStream {
    match &options.resource_filter {
        Some(filter) => quote_spanned! {filter.span()=>
            ::core::option::Option::Some({
                fn __kapsel_resource_filter(resource: &::kapsel::ResourceInfo) -> bool {
                    (#filter)(resource)
                }
                __kapsel_resource_filter
            })
        },
        None => quote!(::core::option::Option::None),
    }
}

/// A static that makes `extern "C" fn __kapsel_register()` (defined next to it) run
/// when the component (or a native test binary) starts: handler attributes and
/// `permit!` register this way, without a central list.
pub(crate) fn static_constructor() -> TokenStream {
    quote! {
        // wasm-ld turns `.init_array` entries into `__wasm_call_ctors`, which the
        // SDK's exports call before anything else.
        #[allow(unsafe_code, reason = "a static constructor is how handlers register without a central list")]
        #[used]
        #[cfg_attr(any(target_os = "macos", target_os = "ios"), unsafe(link_section = "__DATA,__mod_init_func"))]
        #[cfg_attr(windows, unsafe(link_section = ".CRT$XCU"))]
        #[cfg_attr(not(any(target_os = "macos", target_os = "ios", windows)), unsafe(link_section = ".init_array"))]
        static __KAPSEL_REGISTER: extern "C" fn() = __kapsel_register;
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::{Kind, expand};

    fn expanded(
        kind: Kind,
        attr: proc_macro2::TokenStream,
        item: proc_macro2::TokenStream,
    ) -> String {
        match expand(kind, attr, item) {
            Ok(tokens) => tokens.to_string(),
            Err(error) => panic!("unexpected error: {error}"),
        }
    }

    fn error(kind: Kind, attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        match expand(kind, attr, item) {
            Ok(tokens) => panic!("expected an error, got {tokens}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn ids_follow_kopf() {
        let item = quote!(
            fn create_fn(cause: &kapsel::Cause) {}
        );
        let plain = expanded(Kind::Create, quote!("kopfexamples"), item.clone());
        assert!(
            plain.contains(r#"Registration :: new ("create_fn""#),
            "{plain}"
        );
        let explicit = expanded(
            Kind::Create,
            quote!("kopfexamples", id = "mine"),
            item.clone(),
        );
        assert!(
            explicit.contains(r#"Registration :: new ("mine""#),
            "{explicit}"
        );
        let field = expanded(
            Kind::Update,
            quote!("kopfexamples", field = "spec.size"),
            item.clone(),
        );
        assert!(
            field.contains(r#"Registration :: new ("create_fn/spec.size""#),
            "{field}"
        );
        let index = expanded(
            Kind::Index,
            quote!("kopfexamples", field = "spec.size"),
            item,
        );
        assert!(
            index.contains(r#"Registration :: new ("create_fn""#),
            "{index}"
        );
    }

    #[test]
    fn return_types_choose_the_conversion() {
        let unit = expanded(
            Kind::Event,
            quote!("pods"),
            quote!(
                fn f() {}
            ),
        );
        assert!(
            unit.contains("Outcome :: Done (:: core :: option :: Option :: None)"),
            "{unit}"
        );
        let result = expanded(
            Kind::Event,
            quote!("pods"),
            quote!(
                fn f() -> kapsel::Result<u32> {
                    Ok(1)
                }
            ),
        );
        assert!(result.contains("result_outcome"), "{result}");
        let value = expanded(
            Kind::Event,
            quote!("pods"),
            quote!(
                fn f() -> u32 {
                    1
                }
            ),
        );
        assert!(value.contains("value_outcome"), "{value}");
        let index = expanded(
            Kind::Index,
            quote!("pods"),
            quote!(
                fn f() -> Option<u32> {
                    None
                }
            ),
        );
        assert!(index.contains("__kapsel_index"), "{index}");
    }

    /// `initial_delay` is a number of seconds, or a function the guest evaluates per
    /// object; the cancellation options are seconds.
    #[test]
    fn initial_delays_and_cancellation() {
        let item = quote!(
            fn f() {}
        );
        let number = expanded(
            Kind::Daemon,
            quote!("pods", initial_delay = 5),
            item.clone(),
        );
        assert!(number.contains("r . initial_delay_seconds"), "{number}");
        assert!(
            number.contains("initial_delay : :: core :: option :: Option :: None"),
            "{number}"
        );
        let function = expanded(
            Kind::Timer,
            quote!("pods", interval = 1, initial_delay = delays::of),
            item.clone(),
        );
        assert!(
            function.contains("r . initial_delay_callback = true"),
            "{function}"
        );
        assert!(function.contains("(delays :: of) (cause)"), "{function}");
        assert!(
            !function.contains("r . initial_delay_seconds"),
            "{function}"
        );
        let cancelled = expanded(
            Kind::Daemon,
            quote!(
                "pods",
                cancellation_backoff = 1,
                cancellation_timeout = 2.5,
                cancellation_polling = 10
            ),
            item,
        );
        for slot in ["backoff", "timeout", "polling"] {
            assert!(
                cancelled.contains(&format!("r . cancellation_{slot}_seconds")),
                "{cancelled}"
            );
        }
    }

    /// `everything` (Kopf's `kopf.EVERYTHING`) stands alone as the selector, and makes
    /// the guest name the handler in `selection.everything`.
    #[test]
    fn everything_selects_without_a_selector() {
        let item = quote!(
            fn f() {}
        );
        let all = expanded(Kind::Event, quote!(everything), item.clone());
        assert!(all.contains("r . everything = true"), "{all}");
        assert!(all.contains("enable_everything ()"), "{all}");
        assert!(!all.contains("r . selectors . push"), "{all}");
        let labelled = expanded(
            Kind::Create,
            quote!(everything, labels(a = "b")),
            item.clone(),
        );
        assert!(labelled.contains("r . everything = true"), "{labelled}");
        let named = expanded(Kind::Event, quote!("pods"), item.clone());
        assert!(!named.contains("enable_everything"), "{named}");
        for both in [
            quote!("pods", everything),
            quote!(everything, group = "apps"),
        ] {
            assert!(
                error(Kind::Event, both, item.clone()).contains("takes no other resource selector")
            );
        }
        assert!(
            error(Kind::Startup, quote!(everything), item.clone())
                .contains("unknown option `everything`")
        );
    }

    /// `resource_filter` (Kopf's callable selector) stands alone as the selector too, and
    /// makes the guest name the handler in `selection.chosen`.
    #[test]
    fn resource_filter_chooses_without_a_selector() {
        let item = quote!(
            fn f() {}
        );
        let chosen = expanded(Kind::Event, quote!(resource_filter = mine), item.clone());
        assert!(chosen.contains("r . chosen = true"), "{chosen}");
        assert!(chosen.contains("enable_chosen ()"), "{chosen}");
        assert!(chosen.contains("(mine) (resource)"), "{chosen}");
        assert!(!chosen.contains("r . selectors . push"), "{chosen}");
        let plain = expanded(Kind::Event, quote!("pods"), item.clone());
        assert!(
            plain.contains("resource_filter : :: core :: option :: Option :: None"),
            "{plain}"
        );
        assert!(
            error(
                Kind::Event,
                quote!("pods", resource_filter = mine),
                item.clone()
            )
            .contains("takes no other resource selector")
        );
        assert!(
            error(
                Kind::Event,
                quote!(everything, resource_filter = mine),
                item
            )
            .contains("two resource selectors")
        );
    }

    /// Only admission attributes reach WIT `admission` (so a guest without them does not
    /// import it), and they register as their own kinds.
    #[test]
    fn only_admission_attributes_enable_the_admission_interface() {
        let item = quote!(
            fn f() {}
        );
        let validate = expanded(
            Kind::Validate,
            quote!("pods", operations = ["CREATE"]),
            item.clone(),
        );
        assert!(validate.contains("enable_admission ()"), "{validate}");
        assert!(validate.contains("HandlerKind :: Validate"), "{validate}");
        assert!(validate.contains("r . admission ="), "{validate}");
        let mutate = expanded(Kind::Mutate, quote!("pods"), item.clone());
        assert!(mutate.contains("HandlerKind :: Mutate"), "{mutate}");
        let create = expanded(Kind::Create, quote!("pods"), item);
        assert!(!create.contains("enable_admission"), "{create}");
        assert!(!create.contains("r . admission"), "{create}");
    }

    #[test]
    fn kind_specific_validation() {
        let item = quote!(
            fn f() {}
        );
        assert!(
            error(Kind::Event, quote!("pods", backoff = 1), item.clone()).contains("never retried")
        );
        assert!(
            error(Kind::Create, quote!("pods", optional), item.clone())
                .contains("unknown option `optional`")
        );
        assert!(
            error(Kind::Delete, quote!("pods", old = 1), item.clone())
                .contains("unknown option `old`")
        );
        assert!(
            error(Kind::Update, quote!("pods", new = 1), item.clone()).contains("requires `field")
        );
        assert!(
            error(
                Kind::Create,
                quote!("pods", retries = 1, retries = 2),
                item.clone()
            )
            .contains("twice")
        );
        assert!(
            error(Kind::Probe, quote!(labels(a = "b")), item.clone())
                .contains("unknown option `labels`")
        );
        assert!(
            error(Kind::Create, quote!("pods", id = "x", "v1"), item.clone())
                .contains("must come first")
        );
        assert!(
            error(
                Kind::Create,
                quote!("pods", field = "spec..x"),
                item.clone()
            )
            .contains("dotted path")
        );
        // Kopf has cancellation options for daemons only.
        assert!(
            error(
                Kind::Timer,
                quote!("pods", interval = 1, cancellation_timeout = 1),
                item.clone()
            )
            .contains("unknown option `cancellation_timeout`")
        );
        assert!(
            error(
                Kind::Daemon,
                quote!("pods", cancellation_backoff = -1),
                item
            )
            .contains("a number of seconds")
        );
        assert!(
            error(
                Kind::Create,
                quote!("pods"),
                quote!(
                    fn f<T>() {}
                )
            )
            .contains("cannot be generic")
        );
    }
}
