//! Carried-variable analysis: which variables from outside an `if` or `range` loop it assigns.
//!
//! Those variables are threaded through the traced region (passed in, returned, reassigned after),
//! because a closure cannot assign to the caller's variables by value. A variable counts if it is
//! the target of an assignment (`v = ..`, `v += ..`, `v.0 = ..`, `(v, w) = ..`) that does not
//! resolve to a `let` (or loop pattern) inside the construct; shadowing is followed scope by scope.
//! Assignments in nested constructs count too, which is what rewriting inside-out needs: the
//! nested construct's own `(v, ..) = __carry;` assigns them in the parent.

use std::collections::HashSet;

use syn::visit::{self, Visit};
use syn::{BinOp, Expr, Ident, Pat};

/// The outer variables `construct` assigns, in order of first assignment, each with the span of
/// that assignment (so errors about them, e.g. a missing `mut`, point at the user's code).
pub fn carried(construct: &Expr) -> Vec<Ident> {
    // The root scope stays empty: every pattern sits in a block or loop of its own. (Closures,
    // `match` and `if let` bind names too, but `parse::body` rejects them before any rewriting.)
    let mut analysis = Analysis {
        scopes: vec![HashSet::new()],
        carried: Vec::new(),
    };
    analysis.visit_expr(construct);
    analysis.carried
}

struct Analysis {
    /// Names bound inside the construct, innermost scope last.
    scopes: Vec<HashSet<Ident>>,
    carried: Vec<Ident>,
}

impl Analysis {
    fn is_local(&self, ident: &Ident) -> bool {
        self.scopes.iter().any(|scope| scope.contains(ident))
    }

    fn assigned(&mut self, place: &Expr) {
        match place {
            Expr::Path(path) if path.qself.is_none() => {
                if let Some(ident) = path.path.get_ident() {
                    if !self.is_local(ident) && !self.carried.contains(ident) {
                        self.carried.push(ident.clone());
                    }
                }
            }
            // Writing a field or element changes the whole (Copy) value.
            Expr::Field(field) => self.assigned(&field.base),
            Expr::Index(index) => self.assigned(&index.expr),
            Expr::Paren(paren) => self.assigned(&paren.expr),
            Expr::Tuple(tuple) => tuple.elems.iter().for_each(|e| self.assigned(e)),
            Expr::Array(array) => array.elems.iter().for_each(|e| self.assigned(e)),
            // `*r = ..` writes through a reference; the reference itself does not change.
            _ => {}
        }
    }

    fn bind(&mut self, pat: &Pat) {
        let mut names = Bindings(Vec::new());
        names.visit_pat(pat);
        if let Some(scope) = self.scopes.last_mut() {
            scope.extend(names.0);
        }
    }

    fn in_scope(&mut self, visit: impl FnOnce(&mut Self)) {
        self.scopes.push(HashSet::new());
        visit(self);
        self.scopes.pop();
    }
}

impl<'ast> Visit<'ast> for Analysis {
    // Items declared inside the body have their own variables.
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_block(&mut self, block: &'ast syn::Block) {
        self.in_scope(|this| visit::visit_block(this, block));
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        // The initializer runs before the new names exist: `let x = { x = 1; x };` assigns the
        // outer `x`.
        if let Some(init) = &local.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.bind(&local.pat);
    }

    fn visit_expr_for_loop(&mut self, node: &'ast syn::ExprForLoop) {
        self.visit_expr(&node.expr);
        self.in_scope(|this| {
            this.bind(&node.pat);
            this.visit_block(&node.body);
        });
    }

    fn visit_expr_assign(&mut self, node: &'ast syn::ExprAssign) {
        self.assigned(&node.left);
        visit::visit_expr_assign(self, node);
    }

    fn visit_expr_binary(&mut self, node: &'ast syn::ExprBinary) {
        if is_compound_assignment(&node.op) {
            self.assigned(&node.left);
        }
        visit::visit_expr_binary(self, node);
    }
}

fn is_compound_assignment(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

/// The names a pattern binds.
struct Bindings(Vec<Ident>);

impl<'ast> Visit<'ast> for Bindings {
    fn visit_pat_ident(&mut self, node: &'ast syn::PatIdent) {
        self.0.push(node.ident.clone());
        visit::visit_pat_ident(self, node);
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::carried;

    fn names(construct: proc_macro2::TokenStream) -> Vec<String> {
        let expr: syn::Expr = syn::parse2(construct).expect("test input is an expression");
        carried(&expr).iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn outer_assignments_are_carried_in_order_once() {
        let found = names(quote! {
            if c { b = x; a = y; b = z; } else { c2 += 1; }
        });
        assert_eq!(found, ["b", "a", "c2"]);
    }

    #[test]
    fn variables_declared_inside_are_not_carried() {
        assert!(names(quote! { if c { let mut t = x; t = t + y; t += y; } }).is_empty());
    }

    #[test]
    fn shadowing_is_followed_statement_by_statement() {
        let found = names(quote! { if c { v = 1; let v = 2; v = 3; } });
        assert_eq!(found, ["v"]);
    }

    #[test]
    fn a_let_initializer_sees_the_outer_variable() {
        assert_eq!(names(quote! { if c { let v = { v = 1; v }; } }), ["v"]);
    }

    #[test]
    fn a_let_goes_out_of_scope_with_its_block() {
        assert_eq!(
            names(quote! { if c { { let v = 1; v = 2; } v = 3; } }),
            ["v"]
        );
    }

    #[test]
    fn places_count_by_their_root_variable() {
        let found = names(quote! { if c { t.0 = x; a[1] = y; (p, (q, _)) = z; [r, s] = w; } });
        assert_eq!(found, ["t", "a", "p", "q", "r", "s"]);
    }

    #[test]
    fn writes_through_a_reference_are_not_carried() {
        assert!(names(quote! { if c { *r = x; } }).is_empty());
    }

    #[test]
    fn loop_patterns_bind_inside_the_loop() {
        assert!(names(quote! { for i in range(4) { i = i + 1; } }).is_empty());
        let found = names(quote! { for (i, j) in pairs { acc = acc + i; j = 0; } });
        assert_eq!(found, ["acc"]);
    }

    #[test]
    fn nested_constructs_count_in_the_parent() {
        let found = names(quote! {
            if c { for k in range(n) { if d { acc = acc + k; } } } else { m = 1; }
        });
        assert_eq!(found, ["acc", "m"]);
    }

    #[test]
    fn the_condition_and_range_bounds_are_part_of_the_construct() {
        assert_eq!(names(quote! { if { n += 1; n > 2 } { } }), ["n"]);
    }

    #[test]
    fn nested_items_have_their_own_variables() {
        assert!(names(quote! { if c { fn helper() { let mut q = 0; q = 1; } } }).is_empty());
    }
}
