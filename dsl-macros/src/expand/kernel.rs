//! `KernelModel` -> the kernel type, its `body` and `launch`, `impl Kernel` and its registration.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::Ident;

use super::generics;
use super::{body, params, sugar};
use crate::crate_path::Lowering;
use crate::parse::kernel::KernelModel;

pub fn kernel(lowering: &Lowering, model: KernelModel) -> TokenStream {
    let l = lowering.at(Span::call_site());
    let KernelModel {
        docs,
        attrs,
        vis,
        mut sig,
        generic,
        params,
        body,
    } = model;
    let name = sig.ident.clone();
    sig.ident = Ident::new("body", name.span());
    let body = sugar::rewrite(lowering, &params, body);
    let body = body::rewrite(lowering, body);

    let name_str = syn::LitStr::new(&name.unraw().to_string(), name.span());
    // Spanned at the fn name: `file!`/`line!`/`column!` then report where the user wrote it.
    let location = quote_spanned! {name.span()=>
        file: ::core::file!(), line: ::core::line!(), column: ::core::column!(),
    };
    let generic_kind = generics::kind(lowering, generic.as_ref());
    let infos = params::infos(lowering, &params);
    let tracer = Ident::new("__tracer", Span::call_site());
    let dtype = Ident::new("__dtype", Span::call_site());
    let (bindings, args) = params::bindings(&params, &tracer);
    let turbofish = generic.as_ref().map(|g| {
        let t = &g.ident;
        quote!(::<#t>)
    });
    let run_body = quote! {
        #(#bindings)*
        #name::body #turbofish (#(#args),*);
    };
    let trace = generics::dispatch(lowering, generic.as_ref(), &tracer, &dtype, run_body);

    quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #name;

        impl #name {
            /// The kernel body as written, with `if`/`else` and `range` loops rewritten into
            /// traced regions.
            #[allow(unused_mut, unused_variables, unused_assignments, clippy::all)]
            #(#attrs)*
            #vis #sig #body

            /// Starts a launch spec for this kernel (Pallas' `pallas_call`). `#[track_caller]`:
            /// the launch's errors point at the caller's `launch()`.
            #[track_caller]
            #vis fn launch() -> #l::trace::Launch {
                #l::trace::Launch::new(&#name)
            }
        }

        impl #l::kernel::Kernel for #name {
            fn info(&self) -> &'static #l::kernel::KernelInfo {
                static INFO: #l::kernel::KernelInfo = #l::kernel::KernelInfo {
                    name: #name_str,
                    #location
                    generic: #generic_kind,
                    params: &[#(#infos),*],
                };
                &INFO
            }

            fn trace(
                &self,
                #tracer: &mut #l::trace::KernelTracer,
                #dtype: ::core::option::Option<#l::DType>,
            ) -> ::core::result::Result<(), #l::trace::TraceError> {
                #trace
            }
        }

        #l::inventory::submit! { #l::kernel::KernelRegistration(&#name) }
    }
}

#[cfg(test)]
mod tests {
    use quote::{quote, ToTokens};
    use syn::{ImplItem, Item};

    use crate::expand::tpu_kernel;
    use crate::test_util::calls_to;

    fn expand(item: proc_macro2::TokenStream) -> syn::File {
        let tokens = tpu_kernel(quote!(), item).expect("a valid kernel");
        syn::parse2(tokens).expect("the expansion parses as items")
    }

    fn impl_fns(file: &syn::File, trait_name: Option<&str>) -> Vec<String> {
        file.items
            .iter()
            .filter_map(|item| match item {
                Item::Impl(i) => Some(i),
                _ => None,
            })
            .filter(|i| {
                let path = i
                    .trait_
                    .as_ref()
                    .map(|(_, p, _)| p.segments.last().map(|s| s.ident.to_string()));
                path.flatten().as_deref() == trait_name
            })
            .flat_map(|i| &i.items)
            .filter_map(|item| match item {
                ImplItem::Fn(f) => Some(f.sig.ident.to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn generates_the_type_its_methods_the_kernel_impl_and_the_registration() {
        let file = expand(quote! {
            /// Adds.
            pub fn add(x: &Ref<f32>, y: &Ref<f32>, o: &mut RefMut<f32>) { o.store(x.load() + y.load()); }
        });
        let Item::Struct(kernel_type) = &file.items[0] else {
            panic!("first item is the type")
        };
        assert_eq!(kernel_type.ident, "add");
        assert!(matches!(kernel_type.fields, syn::Fields::Unit));
        assert!(matches!(kernel_type.vis, syn::Visibility::Public(_)));
        assert_eq!(impl_fns(&file, None), ["body", "launch"]);
        assert_eq!(impl_fns(&file, Some("Kernel")), ["info", "trace"]);
        let Some(Item::Macro(submit)) = file.items.last() else {
            panic!("last item registers")
        };
        assert_eq!(
            submit
                .mac
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .as_deref(),
            Some("submit")
        );
        let text = file.to_token_stream().to_string();
        assert!(text.contains("KernelRegistration (& add)"), "{text}");
    }

    #[test]
    fn describes_params_by_role_and_position() {
        let file = expand(quote! {
            fn k<T: Float>(a: &Ref<T>, b: &Ref<T>, acc: &mut Scratch<f32>, o: &mut RefMut<T>) {}
        });
        let text = file.to_token_stream().to_string();
        for expected in [
            "name : \"acc\" , role : :: tessera_lowering :: kernel :: ParamRole :: Scratch , dtype : :: core :: option :: Option :: Some (< f32 as :: tessera_lowering :: trace :: Element > :: DTYPE)",
            "name : \"b\" , role : :: tessera_lowering :: kernel :: ParamRole :: Input , dtype : :: core :: option :: Option :: None",
            "let __arg1 = __tracer . input :: < T > (1usize) ?",
            "let mut __arg2 = __tracer . scratch :: < f32 > (0usize) ?",
            "let mut __arg3 = __tracer . output :: < T > (0usize) ?",
            "k :: body :: < T > (& __arg0 , & __arg1 , & mut __arg2 , & mut __arg3)",
            "impl :: tessera_lowering :: kernel :: FloatVisitor for __Visitor",
            ":: tessera_lowering :: kernel :: visit_float (__dtype , __tracer , __Visitor)",
            "generic : :: tessera_lowering :: kernel :: Generic :: Float",
        ] {
            assert!(text.contains(expected), "`{expected}` not in {text}");
        }
    }

    #[test]
    fn a_non_generic_kernel_calls_its_body_directly() {
        let file = expand(
            quote! { fn k(x: &Ref<i32>, o: &mut RefMut<i32>) { if c { o.store(x.load()); } } },
        );
        let text = file.to_token_stream().to_string();
        assert!(
            text.contains("k :: body (& __arg0 , & mut __arg1)"),
            "{text}"
        );
        assert!(text.contains("Generic :: None"), "{text}");
        assert!(!text.contains("Visitor"), "{text}");
        assert_eq!(calls_to(&file, "__if_else").len(), 1);
    }

    #[test]
    fn rejects_arguments_and_non_fns() {
        assert!(tpu_kernel(
            quote!(grid = 4),
            quote!(
                fn k() {}
            )
        )
        .is_err());
        assert!(tpu_kernel(
            quote!(),
            quote!(
                struct S;
            )
        )
        .is_err());
    }
}
