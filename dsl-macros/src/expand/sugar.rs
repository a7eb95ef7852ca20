//! Operator sugar, rewritten before the control flow: comparisons and `o += x` on refs.
//!
//! - `a < b` (and `<=`, `>`, `>=`, `==`, `!=`) -> `(&&Pair(&a, &b)).__lt()` with the tracer's
//!   comparison traits in scope, so method resolution picks a traced comparison where an
//!   operand is traced and Rust's `PartialOrd`/`PartialEq` otherwise (see the lowering
//!   crate's `trace::__compare`). Tokens sit at the operator: a traced comparison records
//!   the user's line, and a type error (e.g. mixed element types) is reported there.
//! - `o += x` or `*o += x` (any compound assignment) on an output or scratch parameter ->
//!   `o.store(o.load() + (x))`, a load, the op and a store of the whole block. Not `AddAssign`:
//!   that needs `&mut`, and both branches of a rewritten `if` (closures) may update one ref;
//!   the ref methods take `&self`. A name some `let` (or loop pattern) in the body rebinds is
//!   left alone everywhere, as it may mean the new variable.

use std::collections::HashSet;

use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Block, Expr, Ident, Pat};

use crate::crate_path::Lowering;
use crate::parse::params::{Param, Role};

pub fn rewrite(lowering: &Lowering, params: &[Param], mut body: Block) -> Block {
    let mut rebound = Bindings(HashSet::new());
    rebound.visit_block(&body);
    let refs = params
        .iter()
        .filter(|p| matches!(p.role, Role::Output | Role::Scratch))
        .map(|p| p.name.clone())
        .filter(|name| !rebound.0.contains(name))
        .collect();
    Sugar { lowering, refs }.visit_block_mut(&mut body);
    body
}

struct Sugar<'a> {
    lowering: &'a Lowering,
    /// Writable ref parameters that `o op= x` may name.
    refs: HashSet<Ident>,
}

impl VisitMut for Sugar<'_> {
    // Items declared inside the body are plain Rust.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}

    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        visit_mut::visit_expr_mut(self, expr);
        let Expr::Binary(node) = expr else {
            return;
        };
        if let Some(method) = comparison(&node.op) {
            let span = node.op.span();
            let l = self.lowering.at(span);
            let (a, b) = (&node.left, &node.right);
            let method = Ident::new(method, span);
            let tokens = quote_spanned! {span=>
                {
                    #[allow(unused_imports)]
                    use #l::trace::__compare::{PlainEq as _, PlainOrd as _, TracedCompare as _};
                    (&&#l::trace::__compare::Pair(&(#a), &(#b))).#method()
                }
            };
            *expr = syn::parse2(tokens).expect("a rewritten comparison parses");
        } else if let Some(op) = compound_operator(&node.op) {
            let target = match &*node.left {
                Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => &*u.expr,
                other => other,
            };
            let Expr::Path(path) = target else {
                return;
            };
            let Some(name) = path.path.get_ident().filter(|_| path.qself.is_none()) else {
                return;
            };
            if !self.refs.contains(name) {
                return;
            }
            let span = node.op.span();
            let op = syn::parse_str::<BinOp>(op).expect("a binary operator");
            let op = quote_spanned!(span=> #op);
            let rhs = &node.right;
            let tokens = quote_spanned! {span=>
                #name.store(#name.load() #op (#rhs))
            };
            *expr = syn::parse2(tokens).expect("a rewritten ref update parses");
        }
    }
}

fn comparison(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::Lt(_) => "__lt",
        BinOp::Le(_) => "__le",
        BinOp::Gt(_) => "__gt",
        BinOp::Ge(_) => "__ge",
        BinOp::Eq(_) => "__eq",
        BinOp::Ne(_) => "__ne",
        _ => return None,
    })
}

/// The binary operator of a compound assignment (`+=` -> `+`).
fn compound_operator(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::AddAssign(_) => "+",
        BinOp::SubAssign(_) => "-",
        BinOp::MulAssign(_) => "*",
        BinOp::DivAssign(_) => "/",
        BinOp::RemAssign(_) => "%",
        BinOp::BitAndAssign(_) => "&",
        BinOp::BitOrAssign(_) => "|",
        BinOp::BitXorAssign(_) => "^",
        BinOp::ShlAssign(_) => "<<",
        BinOp::ShrAssign(_) => ">>",
        _ => return None,
    })
}

/// Every name a pattern in the body binds (`let`, `for`, closure parameters).
struct Bindings(HashSet<Ident>);

impl<'ast> Visit<'ast> for Bindings {
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_pat(&mut self, pat: &'ast Pat) {
        if let Pat::Ident(p) = pat {
            self.0.insert(p.ident.clone());
        }
        visit::visit_pat(self, pat);
    }
}
