//! Kernel parameters: `&Prefetch<i32>` scalar-prefetch arrays, `&Ref<E>` inputs,
//! `&mut RefMut<E>` outputs, `&mut Scratch<E>` scratch.

use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::token::Comma;
use syn::{FnArg, GenericArgument, Ident, Pat, PathArguments, Type, TypeReference};

use super::Errors;

/// What a parameter is to the launch; it decides which tracer getter binds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Prefetch,
    Input,
    Output,
    Scratch,
}

impl Role {
    fn of(type_name: &str) -> Option<Self> {
        match type_name {
            "Prefetch" => Some(Role::Prefetch),
            "Ref" => Some(Role::Input),
            "RefMut" => Some(Role::Output),
            "Scratch" => Some(Role::Scratch),
            _ => None,
        }
    }

    /// How a parameter of this role with element type `elem` must be written, for messages.
    fn spelling(self, elem: &Type) -> String {
        let elem = elem.to_token_stream().to_string();
        match self {
            Role::Prefetch => format!("&Prefetch<{elem}>"),
            Role::Input => format!("&Ref<{elem}>"),
            Role::Output => format!("&mut RefMut<{elem}>"),
            Role::Scratch => format!("&mut Scratch<{elem}>"),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Role::Prefetch => "a scalar-prefetch array",
            Role::Input => "an input block ref",
            Role::Output => "an output block ref",
            Role::Scratch => "a scratch buffer",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: Ident,
    pub role: Role,
    /// Position among the parameters of the same role: the tracer numbers operands that way.
    pub index: usize,
    /// The element type as the user wrote it (spans kept so bad types are reported there).
    pub elem: Type,
    /// Whether `elem` is the kernel's generic parameter (its dtype is only known at launch).
    pub generic: bool,
}

const PARAM_TYPES: &str = "a kernel parameter is `&Ref<E>` (an input block), `&mut RefMut<E>` \
     (an output block), `&mut Scratch<E>` (a scratch buffer) or `&Prefetch<i32>` (a \
     scalar-prefetch array), where `E` is an element type such as `f32` or the kernel's generic \
     parameter";

pub fn parse(
    inputs: &Punctuated<FnArg, Comma>,
    generic: Option<&Ident>,
    errors: &mut Errors,
) -> Vec<Param> {
    let mut params: Vec<Param> = Vec::new();
    for input in inputs {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                errors.push(syn::Error::new_spanned(
                    receiver,
                    "a kernel is a free function: remove `self` (the macro generates the kernel \
                     type and its methods)",
                ));
                continue;
            }
            FnArg::Typed(typed) => typed,
        };
        let name = match &*typed.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
            other => {
                errors.push(syn::Error::new_spanned(
                    other,
                    "name each kernel parameter with a plain identifier",
                ));
                continue;
            }
        };
        let Some((role, elem)) = classify(&typed.ty, errors) else {
            continue;
        };
        let index = params.iter().filter(|p| p.role == role).count();
        let generic = generic.is_some_and(
            |g| matches!(&elem, Type::Path(p) if p.qself.is_none() && p.path.is_ident(g)),
        );
        params.push(Param {
            name,
            role,
            index,
            elem,
            generic,
        });
    }
    params
}

/// `&Ref<E>` -> `(Input, E)`, ...; reports anything else.
fn classify(ty: &Type, errors: &mut Errors) -> Option<(Role, Type)> {
    let Type::Reference(reference) = ty else {
        let message = match ref_type(ty) {
            Some((role, elem)) => {
                format!(
                    "take {} by reference: `{}`",
                    role.noun(),
                    role.spelling(&elem)
                )
            }
            None => PARAM_TYPES.to_string(),
        };
        errors.push(syn::Error::new_spanned(ty, message));
        return None;
    };
    let Some((role, elem)) = ref_type(&reference.elem) else {
        errors.push(syn::Error::new_spanned(ty, PARAM_TYPES));
        return None;
    };
    if let Some(lifetime) = &reference.lifetime {
        errors.push(syn::Error::new_spanned(
            lifetime,
            "explicit lifetimes are not supported in a kernel signature: leave them elided",
        ));
    }
    check_mutability(reference, role, &elem, errors);
    Some((role, elem))
}

fn check_mutability(reference: &TypeReference, role: Role, elem: &Type, errors: &mut Errors) {
    let wants_mut = !matches!(role, Role::Input | Role::Prefetch);
    if reference.mutability.is_some() != wants_mut {
        let why = if wants_mut {
            "is written"
        } else {
            "is read-only"
        };
        errors.push(syn::Error::new_spanned(
            reference,
            format!(
                "{} {why}: write it as `{}`",
                role.noun(),
                role.spelling(elem)
            ),
        ));
    }
}

/// `Ref<E>` / `RefMut<E>` / `Scratch<E>` / `Prefetch<E>` (any path ending so) -> its role
/// and `E`.
fn ref_type(ty: &Type) -> Option<(Role, Type)> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last().filter(|_| path.qself.is_none())?;
    let role = Role::of(&last.ident.to_string())?;
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>()[..] {
        [GenericArgument::Type(elem)] => Some((role, elem.clone())),
        _ => None,
    }
}
