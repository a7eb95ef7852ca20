//! Helpers for the unit tests: expand, re-parse, and look at the structure of the output.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::visit::{self, Visit};
use syn::{Expr, ExprCall};

use crate::crate_path::Lowering;
use crate::expand::body::rewrite;

/// The body of the fn in `item`, rewritten, re-parsed so generated code can be inspected.
pub fn rewritten_body(item: TokenStream) -> syn::Block {
    let function: syn::ItemFn = syn::parse2(item).expect("test input is a fn");
    let rewritten = rewrite(&Lowering::find(), *function.block);
    syn::parse2(rewritten.into_token_stream()).expect("rewritten body parses")
}

/// Every call to a function whose path ends in `name` (e.g. `__if_else`), outermost first.
pub fn calls_to(node: &impl ToTokens, name: &str) -> Vec<ExprCall> {
    struct Finder<'n> {
        name: &'n str,
        found: Vec<ExprCall>,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_expr_call(&mut self, call: &'ast ExprCall) {
            if let Expr::Path(path) = &*call.func {
                if path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == self.name)
                {
                    self.found.push(call.clone());
                }
            }
            visit::visit_expr_call(self, call);
        }
    }
    let file: syn::File = syn::parse2(quote::quote!(fn __wrapper() { #node })).expect("parses");
    let mut finder = Finder {
        name,
        found: Vec::new(),
    };
    finder.visit_file(&file);
    finder.found
}

/// `(a, b,)` -> `["a", "b"]`.
pub fn tuple_names(expr: &Expr) -> Vec<String> {
    match expr {
        Expr::Tuple(tuple) => tuple
            .elems
            .iter()
            .map(|e| e.to_token_stream().to_string())
            .collect(),
        other => panic!("expected a tuple, got `{}`", other.to_token_stream()),
    }
}

/// The closure argument at `index` of `call`.
pub fn closure_arg(call: &ExprCall, index: usize) -> &syn::ExprClosure {
    match &call.args[index] {
        Expr::Closure(closure) => closure,
        other => panic!("expected a closure, got `{}`", other.to_token_stream()),
    }
}

/// A closure parameter's tuple pattern `(mut a, mut b,)` -> `["mut a", "mut b"]`.
pub fn tuple_pattern(pat: &syn::Pat) -> Vec<String> {
    match pat {
        syn::Pat::Tuple(tuple) => tuple
            .elems
            .iter()
            .map(|p| p.to_token_stream().to_string())
            .collect(),
        other => panic!(
            "expected a tuple pattern, got `{}`",
            other.to_token_stream()
        ),
    }
}

/// The messages `KernelModel::parse` reports for the fn in `item` (empty if it is accepted).
pub fn parse_errors(item: TokenStream) -> Vec<String> {
    let function: syn::ItemFn = syn::parse2(item).expect("test input is a fn");
    match crate::parse::kernel::KernelModel::parse(function) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.into_iter().map(|e| e.to_string()).collect(),
    }
}

/// Asserts exactly one error, containing every one of `needles`.
pub fn assert_one_error(item: TokenStream, needles: &[&str]) {
    let errors = parse_errors(item);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    for needle in needles {
        assert!(
            errors[0].contains(needle),
            "`{needle}` not in {:?}",
            errors[0]
        );
    }
}
