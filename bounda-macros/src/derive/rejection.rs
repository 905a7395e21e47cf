//! `#[derive(Rejection)]` on a command's rejection enum.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{DeriveInput, Fields, LitStr};

use crate::errors::Errors;
use crate::paths;
use crate::symbol;

/// `impl Rejection`: the code is the variant's name, the message its `#[rejection("..")]`.
pub(crate) fn expand(input: DeriveInput) -> TokenStream {
    let mut errors = Errors::default();
    let ident = &input.ident;
    let syn::Data::Enum(data) = &input.data else {
        return syn::Error::new_spanned(
            ident,
            "`#[derive(Rejection)]` goes on an enum with one variant per code, like `enum PlaceOrderRejection { AlreadyPlaced }`",
        )
        .to_compile_error();
    };
    let mut code_arms = Vec::new();
    let mut message_arms = Vec::new();
    for variant in &data.variants {
        let name = &variant.ident;
        let code = crate::names::plain(name);
        let mut message: Option<LitStr> = None;
        for attr in variant
            .attrs
            .iter()
            .filter(|attr| attr.path().is_ident(symbol::REJECTION))
        {
            match attr.parse_args::<LitStr>() {
                Ok(_) if message.is_some() => {
                    errors.at(attr, "`#[rejection]` is given twice; keep one message")
                }
                Ok(lit) => message = Some(lit),
                Err(_) => errors.at(
                    attr,
                    "`#[rejection]` takes the message, like `#[rejection(\"order is not open\")]`",
                ),
            }
        }
        let pattern = match &variant.fields {
            Fields::Unit => quote!(#ident::#name),
            Fields::Unnamed(_) => quote!(#ident::#name(..)),
            Fields::Named(fields) => {
                let names = fields.named.iter().filter_map(|field| field.ident.as_ref());
                quote!(#ident::#name { #(#names),* })
            }
        };
        code_arms.push(quote!(#ident::#name { .. } => #code));
        // A variant without a message uses its code as the message (spec 17).
        let (format, string) = (paths::format(), paths::string());
        let message = match message {
            Some(lit) => quote!(#format(#lit)),
            None => quote!(#string::from(#code)),
        };
        message_arms.push(quote! {
            #[allow(unused_variables, reason = "a message need not name every field")]
            #pattern => #message
        });
    }
    if !errors.is_empty() {
        return errors.to_compile_errors();
    }
    let private = paths::private();
    let (str, string) = (paths::str(), paths::string());
    let body = |arms: &[TokenStream]| {
        if arms.is_empty() {
            quote!(match *self {})
        } else {
            quote!(match self { #(#arms,)* })
        }
    };
    let codes = body(&code_arms);
    let messages = body(&message_arms);
    quote! {
        impl #private::Rejection for #ident {
            fn code(&self) -> &'static #str {
                #codes
            }

            fn message(&self) -> #string {
                #messages
            }
        }
    }
}
