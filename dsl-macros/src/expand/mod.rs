//! `KernelModel` -> the tokens `docs/macro-contract.md` specifies. User tokens keep their spans,
//! so rustc's own errors (e.g. a dtype mismatch in `a + b`) point at the user's code.

pub mod body;
pub mod control_flow;
pub mod generics;
pub mod kernel;
pub mod params;
pub mod sugar;

use proc_macro2::TokenStream;

use crate::crate_path::Lowering;
use crate::parse::kernel::KernelModel;

/// The whole macro, on `proc_macro2` tokens so it can be unit-tested.
pub fn tpu_kernel(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if !attr.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            "`#[tpu_kernel]` takes no arguments: grid, block specs and scratch go on the launch \
             (`name::launch()`)",
        ));
    }
    let syn::Item::Fn(function) = syn::parse2(item)? else {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "`#[tpu_kernel]` applies to a `fn`",
        ));
    };
    let model = KernelModel::parse(function)?;
    Ok(kernel::kernel(&Lowering::find(), model))
}
