//! `#[derive(Events)]` on the enum of one aggregate's events.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Fields, Type};

use crate::errors::Errors;
use crate::paths;

/// `impl EventSet` and `From<Payload>` for each variant.
pub(crate) fn expand(input: DeriveInput) -> TokenStream {
    let mut errors = Errors::default();
    let ident = &input.ident;
    let syn::Data::Enum(data) = &input.data else {
        return syn::Error::new_spanned(
            ident,
            "`#[derive(Events)]` goes on an enum with one variant per event, like `enum OrderEvent { OrderPlaced(OrderPlaced) }`",
        )
        .to_compile_error();
    };
    let mut variants: Vec<(&syn::Ident, &Type)> = Vec::new();
    for variant in &data.variants {
        match &variant.fields {
            Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
                variants.push((&variant.ident, &fields.unnamed[0].ty));
            }
            _ => errors.at(
                variant,
                format!(
                    "variant `{0}` must wrap its event struct, like `{0}({0})`",
                    variant.ident
                ),
            ),
        }
    }
    let Some((_, first)) = variants.first() else {
        if errors.is_empty() {
            errors.at(ident, "an aggregate has at least one event; add a variant");
        }
        return errors.to_compile_errors();
    };
    if !errors.is_empty() {
        return errors.to_compile_errors();
    }
    let private = paths::private();
    let (result, str, string, from) = (
        paths::result(),
        paths::str(),
        paths::string(),
        paths::from(),
    );
    let aggregate = quote!(<#first as #private::Event>::Aggregate);
    let types = variants
        .iter()
        .map(|(_, ty)| quote!(<#ty as #private::Event>::TYPE));
    let type_arms = variants
        .iter()
        .map(|(variant, ty)| quote!(#ident::#variant(_) => <#ty as #private::Event>::TYPE));
    let json_arms = variants.iter().map(
        |(variant, _)| quote!(#ident::#variant(event) => #private::serde_json::to_value(event)),
    );
    let version_arms = variants
        .iter()
        .map(|(variant, ty)| quote!(#ident::#variant(_) => <#ty as #private::Event>::VERSION));
    let shapes = variants
        .iter()
        .map(|(_, ty)| quote!(#private::EventShape::of::<#ty>()));
    let read_arms = variants.iter().map(|(variant, ty)| {
        quote! {
            if event.is::<#ty>() {
                return event.decode::<#ty>().map(#ident::#variant);
            }
        }
    });
    let froms = variants.iter().map(|(variant, ty)| {
        quote! {
            impl #from<#ty> for #ident {
                fn from(event: #ty) -> #ident {
                    #ident::#variant(event)
                }
            }
        }
    });
    // Every variant's event belongs to the same aggregate as the first.
    let same_aggregate = variants.iter().skip(1).map(|(_, ty)| {
        quote_spanned! {ty.span()=>
            const _: fn() = || {
                fn same<E: #private::Event<Aggregate = A>, A>() {}
                same::<#ty, #aggregate>();
            };
        }
    });
    // Each variant is stored under names of its own (today's and those it was renamed from), or
    // a stored event could not tell which it is: each pair is compared, a clash reported at the
    // later one, naming both.
    let mut distinct = Vec::new();
    for (j, (later, later_ty)) in variants.iter().enumerate() {
        for (earlier, earlier_ty) in variants.iter().take(j) {
            let message = paths::panic_message(&format!(
                "variants `{earlier}` and `{later}` are stored under the same event type name (today's, or one in `renamed_from`), so a stored event could not tell them apart; give one a name of its own with `#[event(name = \"..\")]`"
            ));
            let panic = paths::panic_at(later_ty.span());
            distinct.push(quote_spanned! {later_ty.span()=>
                const _: () = if #private::names_clash(
                    #private::EventShape::of::<#earlier_ty>(),
                    #private::EventShape::of::<#later_ty>(),
                ) {
                    #panic(#message)
                };
            });
        }
    }
    quote! {
        #(#distinct)*
        impl #private::EventSet for #ident {
            type Aggregate = #aggregate;
            const TYPES: &'static [&'static #str] = &[#(#types),*];
            const SHAPES: &'static [#private::EventShape] = &[#(#shapes),*];

            fn type_name(&self) -> &'static #str {
                match self {
                    #(#type_arms,)*
                }
            }

            fn schema_version(&self) -> ::core::primitive::u32 {
                match self {
                    #(#version_arms,)*
                }
            }

            fn to_json(&self) -> #result<#private::serde_json::Value, #private::serde_json::Error> {
                match self {
                    #(#json_arms,)*
                }
            }

            fn read(event: &#private::RecordedEvent) -> #result<Self, #private::Error> {
                #(#read_arms)*
                #result::Err(#private::Error::UnknownEventType {
                    aggregate: #string::from(<#aggregate as #private::Aggregate>::NAME),
                    event_type: ::std::clone::Clone::clone(&event.event_type),
                    known: <Self as #private::EventSet>::TYPES,
                })
            }
        }

        #(#froms)*
        #(#same_aggregate)*
    }
}
