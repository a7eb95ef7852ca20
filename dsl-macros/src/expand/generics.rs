//! The kernel's generic element type -> its `Generic` kind and the dtype dispatch of `trace`.
//!
//! A generic kernel is traced through a visitor: the tracer maps the launch's dtype to a Rust type
//! and calls `visit::<T>`, so the macro needs no list of dtypes.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Ident;

use crate::crate_path::Lowering;
use crate::parse::generics::{ElementKind, KernelGeneric};

/// `L::kernel::Generic::{None, Float, Element}`.
pub fn kind(lowering: &Lowering, generic: Option<&KernelGeneric>) -> TokenStream {
    let l = lowering.at(Span::call_site());
    match generic.map(|g| g.kind) {
        None => quote!(#l::kernel::Generic::None),
        Some(ElementKind::Float) => quote!(#l::kernel::Generic::Float),
        Some(ElementKind::Element) => quote!(#l::kernel::Generic::Element),
    }
}

/// The statements of `Kernel::trace` around `run_body` (which binds the parameters from `tracer`
/// and calls the body): a non-generic kernel runs it directly; a generic one runs it inside the
/// visitor that receives the element type.
pub fn dispatch(
    lowering: &Lowering,
    generic: Option<&KernelGeneric>,
    tracer: &Ident,
    dtype: &Ident,
    run_body: TokenStream,
) -> TokenStream {
    let l = lowering.at(Span::call_site());
    let Some(generic) = generic else {
        return quote! {
            // The signature fixes every dtype; the tracer checks the launch against `info()`.
            let _ = #dtype;
            #run_body
            ::core::result::Result::Ok(())
        };
    };
    let t = &generic.ident;
    let (visitor, bound, visit) = match generic.kind {
        ElementKind::Float => (quote!(FloatVisitor), quote!(Float), quote!(visit_float)),
        ElementKind::Element => (
            quote!(ElementVisitor),
            quote!(Element),
            quote!(visit_element),
        ),
    };
    quote! {
        struct __Visitor;
        impl #l::kernel::#visitor for __Visitor {
            fn visit<#t: #l::trace::#bound>(
                self,
                #tracer: &mut #l::trace::KernelTracer,
            ) -> ::core::result::Result<(), #l::trace::TraceError> {
                #run_body
                ::core::result::Result::Ok(())
            }
        }
        #l::kernel::#visit(#dtype, #tracer, __Visitor)
    }
}
