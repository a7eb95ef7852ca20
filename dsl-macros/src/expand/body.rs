//! Rewrites every `if`, `while` and `range` loop of the body, inside-out, into tracer calls.

use syn::visit_mut::{self, VisitMut};
use syn::{Block, Expr};

use super::control_flow;
use crate::carried::carried;
use crate::crate_path::Lowering;
use crate::parse::control_flow::RangeLoop;

pub fn rewrite(lowering: &Lowering, mut body: Block) -> Block {
    Rewriter { lowering }.visit_block_mut(&mut body);
    body
}

struct Rewriter<'a> {
    lowering: &'a Lowering,
}

impl VisitMut for Rewriter<'_> {
    // Items declared inside the body are plain Rust.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}

    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        let traced = match &*expr {
            Expr::If(_) | Expr::While(_) => true,
            Expr::ForLoop(node) => is_range_loop(node),
            _ => false,
        };
        // Analysed as the user wrote it, before nested constructs become generated code.
        let carried = if traced { carried(expr) } else { Vec::new() };
        visit_mut::visit_expr_mut(self, expr);
        if !traced {
            return;
        }
        let tokens = match expr {
            Expr::If(node) => control_flow::if_else(self.lowering, node, &carried),
            Expr::While(node) => control_flow::while_loop(self.lowering, node, &carried),
            Expr::ForLoop(node) => match RangeLoop::parse(node) {
                Ok(Some(range)) => control_flow::range_loop(self.lowering, range, &carried),
                _ => return,
            },
            _ => return,
        };
        *expr = Expr::Verbatim(tokens);
    }
}

/// A malformed `range(..)` call was already reported by `parse::body`; it is left as is.
fn is_range_loop(node: &syn::ExprForLoop) -> bool {
    matches!(RangeLoop::parse(node), Ok(Some(_)))
}
