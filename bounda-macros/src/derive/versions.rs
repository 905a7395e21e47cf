//! An event's versions: `version = N`, the older shapes it reads (`upcast(1 = PlacedV1, ..)`),
//! and the names it was stored under before it was renamed (`renamed_from("Taken")`). Parsed
//! from `#[event(..)]`, checked, and expanded into `Event::read`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Ident, LitInt, LitStr, Token, Type};

use crate::errors::Errors;
use crate::paths;

/// The highest version the macros accept: each older version has a shape of its own, so a
/// larger one is a typing mistake, and would have the macro build that many of them.
pub(crate) const MAX_VERSION: u32 = 1_000;

/// `1 = OrderPlacedV1`: the shape version 1 was stored in.
pub(crate) struct Step {
    pub(crate) version: LitInt,
    pub(crate) shape: Type,
}

impl syn::parse::Parse for Step {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Step> {
        let version = input.parse()?;
        input.parse::<Token![=]>()?;
        let shape = input.parse()?;
        Ok(Step { version, shape })
    }
}

/// What `#[event(..)]` says of versions, as written.
#[derive(Default)]
pub(crate) struct Versions {
    pub(crate) version: Option<LitInt>,
    /// The `upcast` keyword, to point at, and its steps.
    pub(crate) upcast: Option<(Ident, Vec<Step>)>,
    pub(crate) renamed_from: Option<(Ident, Vec<LitStr>)>,
}

impl Versions {
    /// Parses `version = N`, `upcast(..)` or `renamed_from(..)`; `false` when `meta` is none of
    /// them.
    pub(crate) fn parse(&mut self, meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
        let Some(ident) = meta.path.get_ident().cloned() else {
            return Ok(false);
        };
        if ident == "version" {
            if self.version.is_some() {
                return Err(meta.error("`version` is given twice; keep one"));
            }
            self.version = Some(meta.value()?.parse()?);
        } else if ident == "upcast" {
            if self.upcast.is_some() {
                return Err(meta.error(
                    "`upcast` is given twice; list every older version in one `upcast(..)`",
                ));
            }
            let content;
            syn::parenthesized!(content in meta.input);
            let steps = Punctuated::<Step, Token![,]>::parse_terminated(&content)?;
            self.upcast = Some((ident, steps.into_iter().collect()));
        } else if ident == "renamed_from" {
            if self.renamed_from.is_some() {
                return Err(meta.error(
                    "`renamed_from` is given twice; list every old name in one `renamed_from(..)`",
                ));
            }
            let content;
            syn::parenthesized!(content in meta.input);
            let names = Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?;
            self.renamed_from = Some((ident, names.into_iter().collect()));
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// The version this build writes, and the older shapes in order from version 1; each rule
    /// broken is recorded at the token that breaks it.
    pub(crate) fn validate<'a>(
        &'a self,
        type_name: &str,
        errors: &mut Errors,
    ) -> (u32, Vec<&'a Type>) {
        let version = match &self.version {
            None => 1,
            Some(literal) => match literal.base10_parse::<u32>() {
                Ok(0) => {
                    errors.at(
                        literal,
                        "versions count from 1: the first shape of an event is `version = 1`",
                    );
                    return (1, Vec::new());
                }
                Ok(version) if version > MAX_VERSION => {
                    errors.at(
                        literal,
                        format!("a version above {MAX_VERSION} is not a version an event reaches; count one per change of its shape"),
                    );
                    return (1, Vec::new());
                }
                Ok(version) => version,
                Err(error) => {
                    errors.push(error);
                    return (1, Vec::new());
                }
            },
        };
        let mut shapes: Vec<Option<&Type>> = vec![None; version as usize - 1];
        match (&self.upcast, &self.version) {
            (Some((keyword, _)), None) => {
                errors.at(
                    keyword,
                    "`upcast` reads the older versions of a versioned event: say which version this one is, `version = 2` after one change",
                );
                return (1, Vec::new());
            }
            (None, Some(literal)) if version > 1 => errors.at(
                literal,
                format!(
                    "version {version} is read from every older version as it was stored: name their shapes, `upcast({})`",
                    older_example(type_name, version)
                ),
            ),
            _ => {}
        }
        if let Some((keyword, steps)) = &self.upcast {
            for step in steps {
                let Ok(older) = step.version.base10_parse::<u32>() else {
                    errors.at(&step.version, "an older version is a number, like `1`");
                    continue;
                };
                if older == 0 || older >= version {
                    errors.at(
                        &step.version,
                        format!(
                            "version {older} is not an older version of this event, which is at version {version}: its upcasts read {}",
                            older_versions(version)
                        ),
                    );
                    continue;
                }
                let slot = &mut shapes[older as usize - 1];
                if slot.is_some() {
                    errors.at(
                        &step.version,
                        format!("version {older} is given twice; each older version is stored in one shape"),
                    );
                    continue;
                }
                *slot = Some(&step.shape);
            }
            let missing: Vec<String> = shapes
                .iter()
                .enumerate()
                .filter(|(_, shape)| shape.is_none())
                .map(|(index, _)| (index + 1).to_string())
                .collect();
            if !missing.is_empty() && version > 1 {
                errors.at(
                    keyword,
                    format!(
                        "version {} {} no shape: an event stored at any older version must read, one step at a time, so list {}: `upcast({})`",
                        missing.join(", "),
                        if missing.len() == 1 { "has" } else { "have" },
                        older_versions(version),
                        older_example(type_name, version)
                    ),
                );
            }
        }
        if let Some((_, names)) = &self.renamed_from {
            for (index, name) in names.iter().enumerate() {
                if name.value() == type_name {
                    errors.at(
                        name,
                        format!("`{type_name}` is this event's name today; `renamed_from` lists the names it had before"),
                    );
                } else if names[..index]
                    .iter()
                    .any(|other| other.value() == name.value())
                {
                    errors.at(name, format!("`{}` is given twice; keep one", name.value()));
                }
            }
        }
        (version, shapes.into_iter().flatten().collect())
    }

    /// The old names, for `Event::RENAMED_FROM`.
    pub(crate) fn renamed_from(&self) -> Vec<String> {
        self.renamed_from
            .iter()
            .flat_map(|(_, names)| names.iter().map(LitStr::value))
            .collect()
    }
}

/// The versions older than `version`: `version 1`, or `versions 1 to 3`.
fn older_versions(version: u32) -> String {
    match version {
        2 => "version 1".to_owned(),
        _ => format!("versions 1 to {}", version - 1),
    }
}

/// `1 = PlacedV1, 2 = PlacedV2` for an event `Placed` at `version`.
fn older_example(type_name: &str, version: u32) -> String {
    (1..version)
        .map(|older| format!("{older} = {type_name}V{older}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The statements that bring `shape`, read as the shape at `index` in `shapes` (the older
/// shapes from version 1), up to `Self`: one `From` a version. Each call is spanned at the older
/// shape's name, where a missing `From` is reported. Events and process states share it.
pub(crate) fn upcast_steps<T: quote::ToTokens>(shapes: &[T], index: usize) -> TokenStream {
    let private = paths::private();
    let steps = shapes[index + 1..]
        .iter()
        .map(|next| quote!(#next))
        .chain(std::iter::once(quote!(Self)))
        .zip(shapes[index..].iter())
        .map(|(next, current)| {
            let step = quote_spanned!(current.span()=> upcast_step::<#current, _>);
            quote! {
                let shape: #next = #private::#step(shape);
            }
        });
    quote!(#(#steps)*)
}

/// `Event::read`: today's shape at `version`; each older one read as its shape, then brought up
/// one `From` at a time. Each check is spanned at the user's type, so a shape that does not
/// deserialise, or a missing `From`, is reported there.
pub(crate) fn expand_read(version: u32, shapes: &[&Type]) -> TokenStream {
    let private = paths::private();
    let result = paths::result();
    let arms = shapes.iter().enumerate().map(|(index, shape)| {
        let older = index as u32 + 1;
        let read = quote_spanned! {shape.span()=>
            #private::read_shape::<#shape>(version, payload)?
        };
        let steps = upcast_steps(shapes, index);
        quote! {
            #older => {
                let shape: #shape = #read;
                #steps
                #result::Ok(shape)
            }
        }
    });
    quote! {
        const VERSION: ::core::primitive::u32 = #version;

        fn read(
            version: ::core::primitive::u32,
            payload: #private::serde_json::Value,
        ) -> #result<Self, #private::ShapeError> {
            match version {
                #version => #private::read_shape::<Self>(version, payload),
                #(#arms)*
                stored => #result::Err(#private::ShapeError::Newer { stored, known: #version }),
            }
        }
    }
}
