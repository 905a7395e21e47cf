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
    let decode_arms = variants.iter().map(|(variant, ty)| {
        quote! {
            if event_type == <#ty as #private::Event>::TYPE {
                return #private::serde_json::from_value::<#ty>(payload)
                    .map(#ident::#variant)
                    .map_err(|source| #private::Error::InvalidPayload {
                        aggregate: #string::from(<#aggregate as #private::Aggregate>::NAME),
                        event_type: #string::from(event_type),
                        event_id: ::std::string::String::new(),
                        source,
                    });
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
    // Each variant is stored under a name of its own, or a stored event could not tell which
    // it is: each pair is compared, a clash reported at the later one, naming both.
    let mut distinct = Vec::new();
    for (j, (later, later_ty)) in variants.iter().enumerate() {
        for (earlier, earlier_ty) in variants.iter().take(j) {
            let message = paths::panic_message(&format!(
                "variants `{earlier}` and `{later}` are stored under the same event type name, so a stored event could not tell them apart; give one a name of its own with `#[event(name = \"..\")]`"
            ));
            let panic = paths::panic_at(later_ty.span());
            distinct.push(quote_spanned! {later_ty.span()=>
                const _: () = if #private::str_eq(
                    <#earlier_ty as #private::Event>::TYPE,
                    <#later_ty as #private::Event>::TYPE,
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

            fn type_name(&self) -> &'static #str {
                match self {
                    #(#type_arms,)*
                }
            }

            fn to_json(&self) -> #result<#private::serde_json::Value, #private::serde_json::Error> {
                match self {
                    #(#json_arms,)*
                }
            }

            fn from_json(
                event_type: &#str,
                payload: #private::serde_json::Value,
            ) -> #result<Self, #private::Error> {
                #(#decode_arms)*
                #result::Err(#private::Error::UnknownEventType {
                    aggregate: #string::from(<#aggregate as #private::Aggregate>::NAME),
                    event_type: #string::from(event_type),
                    known: <Self as #private::EventSet>::TYPES,
                })
            }
        }

        #(#froms)*
        #(#same_aggregate)*
    }
}
