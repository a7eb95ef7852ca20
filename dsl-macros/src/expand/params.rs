//! Parameters -> their `ParamInfo`s, and the tracer bindings passed to the body.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::Ident;

use crate::crate_path::Lowering;
use crate::parse::params::{Param, Role};

/// `L::kernel::ParamInfo { name, role, dtype }` for each parameter; `dtype` is `None` where the
/// element type is the kernel's generic parameter.
pub fn infos(lowering: &Lowering, params: &[Param]) -> Vec<TokenStream> {
    params
        .iter()
        .map(|param| {
            let span = param.name.span();
            let l = lowering.at(span);
            let name = syn::LitStr::new(&param.name.unraw().to_string(), span);
            let role = match param.role {
                Role::Prefetch => quote_spanned!(span=> Prefetch),
                Role::Input => quote_spanned!(span=> Input),
                Role::Output => quote_spanned!(span=> Output),
                Role::Scratch => quote_spanned!(span=> Scratch),
            };
            let elem = &param.elem;
            let dtype = if param.generic {
                quote_spanned!(span=> ::core::option::Option::None)
            } else {
                // At the element type's span: a type that is no `Element` is reported there.
                quote_spanned!(elem.span()=>
                    ::core::option::Option::Some(<#elem as #l::trace::Element>::DTYPE))
            };
            quote_spanned! {span=>
                #l::kernel::ParamInfo { name: #name, role: #l::kernel::ParamRole::#role, dtype: #dtype }
            }
        })
        .collect()
}

/// `let __argN = tracer.input::<E>(i)?;` for each parameter (in order), and the matching
/// `&__argN` / `&mut __argN` arguments for the body.
pub fn bindings(params: &[Param], tracer: &Ident) -> (Vec<TokenStream>, Vec<TokenStream>) {
    params
        .iter()
        .enumerate()
        .map(|(position, param)| {
            let span = param.name.span();
            let arg = format_ident!("__arg{}", position, span = Span::call_site());
            let elem = &param.elem;
            let index = param.index;
            let (getter, mutability) = match param.role {
                Role::Prefetch => (quote_spanned!(span=> prefetch), None),
                Role::Input => (quote_spanned!(span=> input), None),
                Role::Output => (
                    quote_spanned!(span=> output),
                    Some(quote_spanned!(span=> mut)),
                ),
                Role::Scratch => (
                    quote_spanned!(span=> scratch),
                    Some(quote_spanned!(span=> mut)),
                ),
            };
            let binding = quote_spanned! {span=>
                let #mutability #arg = #tracer.#getter::<#elem>(#index)?;
            };
            (binding, quote_spanned!(span=> &#mutability #arg))
        })
        .unzip()
}
