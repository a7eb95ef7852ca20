//! The whole kernel function -> `KernelModel`.

use syn::{Attribute, Block, ItemFn, ReturnType, Signature, Type, Visibility};

use super::generics::{self, KernelGeneric};
use super::params::{self, Param};
use super::{body, Errors};

/// A checked kernel function.
pub struct KernelModel {
    /// Doc comments: they document the generated kernel type.
    pub docs: Vec<Attribute>,
    /// Every other attribute stays on the body function.
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    /// The user's signature, spans intact; `sig.ident` is the kernel's name.
    pub sig: Signature,
    pub generic: Option<KernelGeneric>,
    pub params: Vec<Param>,
    pub body: Block,
}

impl KernelModel {
    pub fn parse(item: ItemFn) -> syn::Result<Self> {
        let mut errors = Errors::default();
        check_signature(&item.sig, &mut errors);
        let generic = generics::parse(&item.sig.generics, &mut errors);
        let params = params::parse(
            &item.sig.inputs,
            generic.as_ref().map(|g| &g.ident),
            &mut errors,
        );
        body::check(&item.block, &mut errors);
        let (docs, attrs) = item
            .attrs
            .into_iter()
            .partition(|a| a.path().is_ident("doc"));
        errors.finish(KernelModel {
            docs,
            attrs,
            vis: item.vis,
            sig: item.sig,
            generic,
            params,
            body: *item.block,
        })
    }
}

/// Qualifiers and the return type: a kernel is a plain, safe fn returning nothing.
fn check_signature(sig: &Signature, errors: &mut Errors) {
    let mut reject = |node: &dyn quote::ToTokens, message: &str| {
        errors.push(syn::Error::new_spanned(node, message))
    };
    if let Some(token) = &sig.constness {
        reject(
            token,
            "a kernel cannot be `const fn`: it is traced at launch",
        );
    }
    if let Some(token) = &sig.asyncness {
        reject(
            token,
            "a kernel cannot be `async fn`: kernels are traced synchronously",
        );
    }
    if let Some(token) = &sig.unsafety {
        reject(
            token,
            "a kernel cannot be `unsafe fn`: the DSL is safe to call",
        );
    }
    if let Some(abi) = &sig.abi {
        reject(
            abi,
            "a kernel cannot have an `extern` ABI: it is called by the tracer",
        );
    }
    if let Some(variadic) = &sig.variadic {
        reject(
            variadic,
            "a kernel cannot be variadic: list its refs as parameters",
        );
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        if !matches!(&**ty, Type::Tuple(t) if t.elems.is_empty()) {
            reject(
                ty,
                "a kernel returns nothing: write its results through `&mut RefMut<E>` parameters",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::KernelModel;
    use crate::parse::generics::ElementKind;
    use crate::parse::params::Role;
    use crate::test_util::assert_one_error;

    #[test]
    fn builds_the_model_of_a_generic_matmul() {
        let item = syn::parse2(quote! {
            /// Tiled matmul.
            #[inline]
            pub fn matmul<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>, acc: &mut Scratch<f32>) {}
        })
        .expect("a fn");
        let model = KernelModel::parse(item).expect("a valid kernel");
        assert_eq!(model.sig.ident, "matmul");
        assert_eq!(model.docs.len(), 1);
        assert_eq!(model.attrs.len(), 1);
        let generic = model.generic.expect("generic");
        assert_eq!(
            (generic.ident.to_string(), generic.kind),
            ("T".into(), ElementKind::Float)
        );
        let summary: Vec<_> = model
            .params
            .iter()
            .map(|p| (p.name.to_string(), p.role, p.index, p.generic))
            .collect();
        assert_eq!(
            summary,
            [
                ("x".into(), Role::Input, 0, true),
                ("y".into(), Role::Input, 1, true),
                ("o".into(), Role::Output, 0, true),
                ("acc".into(), Role::Scratch, 0, false),
            ]
        );
    }

    #[test]
    fn accepts_a_where_clause_bound_and_an_explicit_unit_return() {
        let item = syn::parse2(quote! {
            fn k<E>(x: &Ref<E>, o: &mut RefMut<E>) -> () where E: Element {}
        })
        .expect("a fn");
        let model = KernelModel::parse(item).expect("a valid kernel");
        assert_eq!(model.generic.map(|g| g.kind), Some(ElementKind::Element));
    }

    #[test]
    fn rejects_bad_signatures_with_what_to_write_instead() {
        let cases = [
            (
                quote!(
                    fn k(o: &mut RefMut<f32>) -> Tile<f32> {}
                ),
                &["returns nothing"][..],
            ),
            (
                quote!(
                    fn k(&self, o: &mut RefMut<f32>) {}
                ),
                &["remove `self`"],
            ),
            (
                quote!(
                    fn k(x: &Vec<f32>) {}
                ),
                &["`&Ref<E>` (an input block)"],
            ),
            (
                quote!(
                    fn k(x: Ref<f32>) {}
                ),
                &["by reference: `&Ref<f32>`"],
            ),
            (
                quote!(
                    fn k(x: &mut Ref<f32>) {}
                ),
                &["read-only", "`&Ref<f32>`"],
            ),
            (
                quote!(
                    fn k(o: &RefMut<T>) {}
                ),
                &["is written", "`&mut RefMut<T>`"],
            ),
            (
                quote!(
                    fn k((a, b): &Ref<f32>) {}
                ),
                &["plain identifier"],
            ),
            (
                quote!(
                    fn k<T: Float, U: Float>(x: &Ref<T>, y: &Ref<U>) {}
                ),
                &["at most one generic"],
            ),
            (
                quote!(
                    fn k<T: Copy>(x: &Ref<T>) {}
                ),
                &["unsupported bound", "`Float`", "`Element`"],
            ),
            (
                quote!(
                    fn k<T: Float + Element>(x: &Ref<T>) {}
                ),
                &["exactly one bound"],
            ),
            (
                quote!(
                    fn k<T>(x: &Ref<T>) {}
                ),
                &["`T: Float` or `T: Element`"],
            ),
            (
                quote!(
                    fn k<T: Float>(x: &Ref<T>)
                    where
                        f32: Copy,
                    {
                    }
                ),
                &["where clause"],
            ),
            (
                quote!(
                    fn k<const N: usize>(x: &Ref<f32>) {}
                ),
                &["const generics"],
            ),
            (
                quote!(
                    fn k<'a>(x: &Ref<f32>) {}
                ),
                &["explicit lifetimes"],
            ),
            (
                quote!(
                    fn k(x: &'static Ref<f32>) {}
                ),
                &["explicit lifetimes"],
            ),
            (
                quote!(
                    async fn k(x: &Ref<f32>) {}
                ),
                &["`async fn`"],
            ),
            (
                quote!(
                    unsafe fn k(x: &Ref<f32>) {}
                ),
                &["`unsafe fn`"],
            ),
            (
                quote!(
                    const fn k(x: &Ref<f32>) {}
                ),
                &["`const fn`"],
            ),
        ];
        for (item, needles) in cases {
            assert_one_error(item, needles);
        }
    }
}
