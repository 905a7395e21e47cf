//! The generated code: `ReadModel` and the column constants for the struct; `Projections` and
//! the registration for the impl block. It cannot fail; rules that need types are `const`
//! checks spanned at the user's token.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemImpl, Type};

use crate::paths;
use crate::read_model::ast::{Projections, Table};
use crate::register;

/// `impl ReadModel`, the column constants, and the check that projections exist.
pub(crate) fn table(table: &Table) -> TokenStream {
    let private = paths::private();
    let (result, str) = (paths::result(), paths::str());
    let ident = &table.ident;
    let vis = &table.vis;
    let name = &table.name;
    let columns = table.fields.iter().map(|field| {
        let (column, ty) = (field.column(), &field.ty);
        let (key, index, unique) = (
            field.key.is_some(),
            field.index.is_some(),
            field.unique.is_some(),
        );
        quote_spanned! {ty.span()=>
            #private::ColumnDef {
                name: #column,
                sql_type: <#ty as #private::ColumnType>::SQL_TYPE,
                nullable: <#ty as #private::ColumnType>::NULLABLE,
                key: #key,
                unique: #unique,
                index: #index,
            }
        }
    });
    let to_row = table.fields.iter().map(|field| {
        let (field_ident, ty) = (&field.ident, &field.ty);
        quote!(<#ty as #private::ColumnType>::to_sql(&self.#field_ident))
    });
    let from_row = table.fields.iter().map(|field| {
        let (field_ident, ty, column) = (&field.ident, &field.ty, field.column());
        quote! {
            #field_ident: <#ty as #private::ColumnType>::from_sql(
                values.next().unwrap_or(#private::SqlValue::Null),
            ).map_err(|error| error.in_column(#column))?
        }
    });
    let width = table.fields.len();
    let constants = table.fields.iter().map(|field| {
        let (constant, ty, column) = (field.constant(), &field.ty, field.column());
        let doc = format!("The column `{column}`, to filter and order by.");
        quote! {
            #[doc = #doc]
            #vis const #constant: #private::Column<#ident, #ty> = #private::Column::new(#column);
        }
    });
    // Without a key (reported), a column type stands in, so nothing else is reported.
    let key_ty = table.key().map_or_else(paths::string, |key| {
        let ty = &key.ty;
        quote!(#ty)
    });
    let key_check = table.key().map(|key| {
        let ty = &key.ty;
        let panic = paths::panic_at(ty.span());
        let message = paths::panic_message(&format!(
            "the primary key `{}` cannot be an `Option`: every row has a key",
            key.column()
        ));
        quote_spanned! {ty.span()=>
            const _: () = if <#ty as #private::ColumnType>::NULLABLE { #panic(#message) };
        }
    });
    let projections_check = quote_spanned! {ident.span()=>
        const _: fn() = || {
            fn projected<R: #private::Projections>() {}
            projected::<#ident>();
        };
    };
    let error_message = format!("a row of `{}` has {width} columns", name.value());
    quote! {
        impl #private::ReadModel for #ident {
            const NAME: &'static #str = #name;
            const TABLE: &'static #private::TableDef = &#private::TableDef {
                name: #name,
                columns: &[#(#columns),*],
            };
            type Key = #key_ty;

            fn to_row(&self) -> ::std::vec::Vec<#private::SqlValue> {
                ::std::vec![#(#to_row),*]
            }

            fn from_row(
                values: ::std::vec::Vec<#private::SqlValue>,
            ) -> #result<Self, #private::ColumnError> {
                if values.len() != #width {
                    return #result::Err(#private::ColumnError::new(#error_message));
                }
                let mut values = values.into_iter();
                #result::Ok(#ident { #(#from_row),* })
            }
        }

        #[allow(dead_code, reason = "the columns are there to filter and order by")]
        impl #ident {
            #(#constants)*
        }

        #key_check
        #projections_check
    }
}

/// `impl Projections` and the registration.
pub(crate) fn projections(item: &ItemImpl, block: &Projections) -> TokenStream {
    let private = paths::private();
    let (option, str) = (paths::option(), paths::str());
    let self_ty = &item.self_ty;
    let events: Vec<&Type> = block
        .projections
        .iter()
        .filter(|p| !p.refused)
        .filter_map(|p| p.event.as_ref())
        .collect();
    let keys = events.iter().map(|event| {
        quote_spanned! {event.span()=>
            #private::EventKey {
                aggregate: <<#event as #private::Event>::Aggregate as #private::Aggregate>::NAME,
                event: <#event as #private::Event>::TYPE,
            }
        }
    });
    let shapes = events.iter().map(|event| {
        quote_spanned! {event.span()=>
            <<<#event as #private::Event>::Aggregate as #private::Aggregate>::Event as #private::EventSet>::SHAPES
        }
    });
    // Trait paths, not generic calls, name the event: an event type that is not one is
    // reported once, at the user's token.
    let dispatch = block
        .projections
        .iter()
        .filter(|p| p.is_async && !p.refused)
        .filter_map(|projection| {
            let event = projection.event.as_ref()?;
            let function = &projection.function;
            Some(quote_spanned! {event.span()=>
                if event.has_key(<#event as #private::Event>::key()) {
                    return #option::Some(::std::boxed::Box::pin(async move {
                        let payload = <#event as #private::Event>::read(
                            event.metadata.schema_version,
                            event.payload.clone(),
                        )
                        .map_err(|error| event.shape_error(error))?;
                        #private::handler_result_unit(
                            Self::#function(#private::Projected::new(event, payload), table).await,
                        )
                    }));
                }
            })
        });
    let code = fingerprint(&quote!(#item).to_string());
    let registration = register::registration(register::Kind::ReadModel, self_ty);
    quote! {
        impl #private::Projections for #self_ty {
            const EVENTS: &'static [#private::EventKey] = &[#(#keys),*];
            const SHAPES: &'static [&'static [#private::EventShape]] = &[#(#shapes),*];
            const CODE: &'static #str = #code;

            fn project<'a>(
                event: &'a #private::RecordedEvent,
                table: &'a mut #private::Table<'_, Self>,
            ) -> #option<#private::ProjectionFuture<'a>> {
                #(#dispatch)*
                let _ = table;
                #option::None
            }
        }

        #registration
    }
}

/// A hash of the projections' code, as hex: FNV-1a over its tokens, which are the same for the
/// same source whatever its spacing.
fn fingerprint(code: &str) -> String {
    let hash = code.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{hash:016x}")
}
