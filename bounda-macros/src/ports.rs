//! `ports = [GatewayPort, Arc<dyn Mailer>]` on `#[process(..)]` and `#[policy(..)]`: the
//! ports a handler reads, parsed once and expanded once for both.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote_spanned};
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Token, Type};

use crate::paths;

/// What `ports` takes.
pub(crate) const EXPECTED: &str =
    "`ports` lists the port types its handlers read, like `ports = [GatewayPort, Arc<dyn Mailer>]`";

/// The bracketed list of port types after `ports =`, and its tokens as written.
pub(crate) fn parse(input: ParseStream<'_>) -> syn::Result<(TokenStream, Vec<Type>)> {
    if !input.peek(syn::token::Bracket) {
        return Err(syn::Error::new(input.span(), EXPECTED));
    }
    let tokens = input
        .fork()
        .parse::<proc_macro2::Group>()?
        .into_token_stream();
    let content;
    syn::bracketed!(content in input);
    let types = Punctuated::<Type, Token![,]>::parse_terminated(&content)
        .map_err(|error| syn::Error::new(error.span(), EXPECTED))?;
    Ok((tokens, types.into_iter().collect()))
}

/// `const PORTS`: each port's declaration, spanned at its type, so a type that cannot be a
/// port (not `Send + Sync + 'static`) is reported there.
pub(crate) fn expand(ports: &[Type]) -> TokenStream {
    let private = paths::private();
    let decls = ports.iter().map(|ty| {
        quote_spanned! {ty.span()=> #private::PortDecl::of::<#ty>()}
    });
    quote::quote! {
        const PORTS: &'static [#private::PortDecl] = &[#(#decls),*];
    }
}
