//! Field names as serde writes them: `#[serde(rename = "..")]` and `#[serde(rename_all = "..")]`.

use heck::{
    ToKebabCase, ToLowerCamelCase, ToShoutyKebabCase, ToShoutySnakeCase, ToSnakeCase,
    ToUpperCamelCase,
};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Lit, Meta, Token};

use crate::symbol;

/// The string value of `key` in `#[serde(key = "..")]`, if given.
pub(crate) fn serde_value(attrs: &[Attribute], key: &str) -> Option<String> {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident(symbol::SERDE))
        .filter_map(|attr| {
            attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .find_map(|meta| match meta {
            Meta::NameValue(pair) if pair.path.is_ident(key) => match pair.value {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(lit), ..
                }) => Some(lit.value()),
                _ => None,
            },
            _ => None,
        })
}

/// Whether `#[serde(key)]` or `#[serde(key = ..)]` is given.
pub(crate) fn serde_has(attrs: &[Attribute], key: &str) -> bool {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident(symbol::SERDE))
        .filter_map(|attr| {
            attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .any(|meta| meta.path().is_ident(key))
}

/// Whether `#[derive(..)]` among `attrs` names `name` (`Deserialize`, `serde::Deserialize`).
pub(crate) fn derives(attrs: &[Attribute], name: &str) -> bool {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("derive"))
        .filter_map(|attr| {
            attr.parse_args_with(Punctuated::<syn::Path, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .any(|path| path.segments.last().is_some_and(|last| last.ident == name))
}

/// A field name under serde's `rename_all = rule`.
pub(crate) fn rename(field: &str, rule: &str) -> Option<String> {
    Some(match rule {
        "lowercase" => field.to_lowercase(),
        "UPPERCASE" => field.to_uppercase(),
        "PascalCase" => field.to_upper_camel_case(),
        "camelCase" => field.to_lower_camel_case(),
        "snake_case" => field.to_snake_case(),
        "SCREAMING_SNAKE_CASE" => field.to_shouty_snake_case(),
        "kebab-case" => field.to_kebab_case(),
        "SCREAMING-KEBAB-CASE" => field.to_shouty_kebab_case(),
        _ => return None,
    })
}

/// The key serde writes for field `plain` with `attrs`, under the container's `rename_all`.
pub(crate) fn key(plain: &str, attrs: &[Attribute], rename_all: Option<&str>) -> String {
    serde_value(attrs, "rename").unwrap_or_else(|| {
        rename_all
            .and_then(|rule| rename(plain, rule))
            .unwrap_or_else(|| plain.to_owned())
    })
}
