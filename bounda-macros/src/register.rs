//! Registration: what `#[process]`, `#[policy]` and `#[command]` add so the item registers
//! itself at link time, and `#[command]` / `#[policy]` on a hand-written trait `impl`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemImpl, Type};

use crate::member;
use crate::paths;

/// What is registered.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Process,
    Policy,
    Command,
    ReadModel,
}

impl Kind {
    /// The trait the item implements, and the attribute that registers it.
    fn name(self) -> &'static str {
        match self {
            Kind::Process => "Process",
            Kind::Policy => "Policy",
            Kind::Command => "Command",
            Kind::ReadModel => "Projections",
        }
    }

    fn attribute(self) -> &'static str {
        match self {
            Kind::Process => "process",
            Kind::Policy => "policy",
            Kind::Command => "command",
            Kind::ReadModel => "read_model",
        }
    }
}

/// The registration of `self_ty`: its marker impl (which `Policy` and `Command` require) and
/// its entry in the binary's registry.
pub(crate) fn registration(kind: Kind, self_ty: &Type) -> TokenStream {
    let private = paths::private();
    let (marker, constructor) = match kind {
        Kind::Process => (None, quote!(process)),
        Kind::ReadModel => (None, quote!(read_model)),
        Kind::Policy => (
            Some(quote!(impl #private::PolicyRegistered for #self_ty {})),
            quote!(policy),
        ),
        Kind::Command => (
            Some(quote!(impl #private::CommandRegistered for #self_ty {})),
            quote!(command),
        ),
    };
    let path = quote!(::core::concat!(
        ::core::module_path!(),
        "::",
        ::core::stringify!(#self_ty)
    ));
    quote_spanned! {self_ty.span()=>
        #marker
        #private::inventory::submit! {
            #private::Registration::#constructor::<#self_ty>(#path)
        }
    }
}

/// `#[command]` or `#[policy]` on `impl <Trait> for <Type> { .. }`: the impl, registered.
pub(crate) fn expand_impl(kind: Kind, args: TokenStream, item: ItemImpl) -> TokenStream {
    match check_impl(kind, &args, &item) {
        // A generic impl has no one type to register: it gets its marker, and an app lists each
        // of its types (`.command::<Wrapper<Order>>()`).
        Ok(()) if !item.generics.params.is_empty() => {
            let marker = marker(kind, &item);
            quote!(#item #marker)
        }
        Ok(()) => {
            let registration = registration(kind, &item.self_ty);
            let member = match (kind, policy_event(&item)) {
                (Kind::Policy, Some(event)) => {
                    let (private, self_ty) = (paths::private(), &item.self_ty);
                    member::in_its_aggregate(
                        quote!(<#self_ty as #private::PolicyChecks>::EVENT_DECLARED),
                        &member::name(event),
                        event.span(),
                        member::HANDLER,
                    )
                }
                _ => TokenStream::new(),
            };
            quote!(#item #registration #member)
        }
        Err(error) => {
            // The marker still, so the one mistake is not reported again at every use.
            let marker = marker(kind, &item);
            let error = error.to_compile_error();
            quote!(#error #item #marker)
        }
    }
}

/// The marker impl alone, with the impl's generics, for an impl that cannot be registered.
fn marker(kind: Kind, item: &ItemImpl) -> TokenStream {
    let private = paths::private();
    let trait_ = match kind {
        Kind::Process | Kind::ReadModel => return TokenStream::new(),
        Kind::Policy => quote!(PolicyRegistered),
        Kind::Command => quote!(CommandRegistered),
    };
    if item.trait_.is_none() {
        return TokenStream::new();
    }
    let self_ty = &item.self_ty;
    let (impl_generics, _, where_clause) = item.generics.split_for_impl();
    quote!(impl #impl_generics #private::#trait_ for #self_ty #where_clause {})
}

/// The event type a policy impl names in `type Event = ..`, when it is a path.
fn policy_event(item: &ItemImpl) -> Option<&syn::Path> {
    item.items.iter().find_map(|item| match item {
        syn::ImplItem::Type(ty) if ty.ident == "Event" => match &ty.ty {
            Type::Path(path) => Some(&path.path),
            _ => None,
        },
        _ => None,
    })
}

/// The impl is of the right trait, for one concrete type, with no arguments.
fn check_impl(kind: Kind, args: &TokenStream, item: &ItemImpl) -> syn::Result<()> {
    let (trait_name, attribute) = (kind.name(), kind.attribute());
    if !args.is_empty() {
        return Err(syn::Error::new_spanned(
            args,
            format!("`#[{attribute}]` on an `impl {trait_name}` takes no arguments; remove them"),
        ));
    }
    let Some((_, path, _)) = &item.trait_ else {
        return Err(syn::Error::new(
            item.impl_token.span,
            format!("`#[{attribute}]` goes on an `impl {trait_name} for YourType`"),
        ));
    };
    let named = path
        .segments
        .last()
        .is_some_and(|segment| segment.ident == trait_name);
    if !named {
        return Err(syn::Error::new_spanned(
            path,
            format!(
                "`#[{attribute}]` registers an `impl {trait_name} for YourType`, not this trait"
            ),
        ));
    }
    Ok(())
}
