//! The kernel's generics: none, or one element type parameter bounded by `Float` or `Element`.

use syn::spanned::Spanned;
use syn::{GenericParam, Generics, Ident, TypeParamBound, WherePredicate};

use super::Errors;

/// The trait bounding the element type parameter; it picks the dtypes a launch may trace with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementKind {
    Float,
    Element,
}

/// `T: Float` or `T: Element`.
#[derive(Clone, Debug)]
pub struct KernelGeneric {
    pub ident: Ident,
    pub kind: ElementKind,
}

const ONE_GENERIC: &str = "a kernel has at most one generic parameter, its element type \
     (`T: Float` or `T: Element`); use a concrete element type such as `f32` for the other operands";

/// Checks `generics` (params and where clause) and returns the element type parameter, if any.
pub fn parse(generics: &Generics, errors: &mut Errors) -> Option<KernelGeneric> {
    let mut found: Option<(Ident, Vec<&TypeParamBound>)> = None;
    for param in &generics.params {
        match param {
            GenericParam::Type(ty) if found.is_none() => {
                if let Some(default) = &ty.default {
                    errors.push(syn::Error::new_spanned(
                        default,
                        "kernel generics take no default: the dtype comes from the launch",
                    ));
                }
                found = Some((ty.ident.clone(), ty.bounds.iter().collect()));
            }
            GenericParam::Type(ty) => errors.push(syn::Error::new_spanned(ty, ONE_GENERIC)),
            GenericParam::Lifetime(lt) => errors.push(syn::Error::new_spanned(
                lt,
                "explicit lifetimes are not supported in a kernel signature: leave them elided",
            )),
            GenericParam::Const(c) => errors.push(syn::Error::new_spanned(
                c,
                "const generics are not supported in a kernel: block shapes come from the \
                 launch's `BlockSpec`s, and Rust constants can be used directly in the body",
            )),
        }
    }
    for predicate in generics.where_clause.iter().flat_map(|w| &w.predicates) {
        match (predicate, &mut found) {
            (WherePredicate::Type(p), Some((ident, bounds)))
                if p.lifetimes.is_none() && is_ident(&p.bounded_ty, ident) =>
            {
                bounds.extend(&p.bounds)
            }
            _ => errors.push(syn::Error::new_spanned(
                predicate,
                "a kernel's where clause may only bound its element type parameter, by `Float` \
                 or `Element`",
            )),
        }
    }
    let (ident, bounds) = found?;
    let kind = element_kind(&ident, &bounds, errors)?;
    Some(KernelGeneric { ident, kind })
}

/// The single bound must be `Float` or `Element` (any path ending in one of them).
fn element_kind(
    ident: &Ident,
    bounds: &[&TypeParamBound],
    errors: &mut Errors,
) -> Option<ElementKind> {
    let mut kind = None;
    for bound in bounds {
        let known = match bound {
            TypeParamBound::Trait(t)
                if t.lifetimes.is_none() && matches!(t.modifier, syn::TraitBoundModifier::None) =>
            {
                t.path
                    .segments
                    .last()
                    .filter(|s| s.arguments.is_none())
                    .and_then(|s| match s.ident.to_string().as_str() {
                        "Float" => Some(ElementKind::Float),
                        "Element" => Some(ElementKind::Element),
                        _ => None,
                    })
            }
            _ => None,
        };
        match (known, kind) {
            (None, _) => errors.push(syn::Error::new(
                bound.span(),
                format!(
                    "unsupported bound on `{ident}`: bound the element type by exactly one of \
                     `Float` (float dtypes) or `Element` (every dtype)"
                ),
            )),
            (Some(_), Some(_)) => errors.push(syn::Error::new(
                bound.span(),
                format!("`{ident}` takes exactly one bound: `Float` or `Element`"),
            )),
            (Some(k), None) => kind = Some(k),
        }
    }
    if kind.is_none() && bounds.is_empty() {
        errors.push(syn::Error::new_spanned(
            ident,
            format!("bound the element type: `{ident}: Float` or `{ident}: Element`"),
        ));
    }
    kind
}

fn is_ident(ty: &syn::Type, ident: &Ident) -> bool {
    matches!(ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident(ident))
}
