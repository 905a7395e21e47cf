//! `#[read_model(name = "..")]` on a row struct (its table), and `#[read_model]` on the `impl`
//! block that holds its projections. Parse ([`ast`]), validate ([`validate`]), expand
//! ([`expand`]).

mod ast;
mod expand;
mod validate;

use proc_macro2::{Span, TokenStream};
use quote::quote;

use crate::errors::Errors;

/// Expands `#[read_model(..)]` on a struct or `#[read_model]` on an impl block.
pub(crate) fn expand(args: TokenStream, input: TokenStream) -> TokenStream {
    if let Ok(item) = syn::parse2::<syn::ItemImpl>(input.clone()) {
        return projections(args, item);
    }
    match syn::parse2::<syn::ItemStruct>(input.clone()) {
        Ok(item) => table(args, item),
        Err(_) => {
            let span = input
                .clone()
                .into_iter()
                .next()
                .map_or_else(Span::call_site, |token| token.span());
            let error = syn::Error::new(
                span,
                "`#[read_model(name = \"..\")]` goes on a read model's row struct, and `#[read_model]` on the `impl` block of its projections",
            )
            .to_compile_error();
            quote!(#error #input)
        }
    }
}

fn table(args: TokenStream, mut item: syn::ItemStruct) -> TokenStream {
    let mut errors = Errors::default();
    let table = ast::Table::parse(args, &mut item, &mut errors);
    let Some(table) = table else {
        let errors = errors.to_compile_errors();
        return quote!(#errors #item);
    };
    validate::table(&table, &mut errors);
    let errors = errors.to_compile_errors();
    let expanded = expand::table(&table);
    quote!(#errors #item #expanded)
}

fn projections(args: TokenStream, item: syn::ItemImpl) -> TokenStream {
    let mut errors = Errors::default();
    if !args.is_empty() {
        errors.at(
            &args,
            "`#[read_model]` on the projections' `impl` takes no arguments; the name goes on the struct",
        );
    }
    let mut block = ast::Projections::parse(&item, &mut errors);
    validate::projections(&item, &mut block, &mut errors);
    let errors = errors.to_compile_errors();
    let expanded = expand::projections(&item, &block);
    quote!(#errors #item #expanded)
}
