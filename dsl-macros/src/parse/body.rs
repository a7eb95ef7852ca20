//! Rejects the syntax the tracer cannot follow, each at its own span with what to use instead.
//!
//! The rewriting turns `if` branches and `range` loop bodies into closures, so anything that
//! would have to jump out of them (`return`, `?`, `break`/`continue` across one) is rejected here
//! rather than surfacing as a confusing rustc error about closures.

use quote::ToTokens;
use syn::visit::{self, Visit};
use syn::{Block, Expr, Lifetime};

use super::control_flow::RangeLoop;
use super::Errors;

/// Checks the kernel body; nested items (`fn`s declared inside it) are plain Rust, not checked.
pub fn check(body: &Block, errors: &mut Errors) {
    let mut checker = Checker {
        errors,
        frames: Vec::new(),
    };
    checker.visit_block(body);
}

/// What a `break`/`continue` would have to cross to reach its loop.
enum Frame {
    /// A Rust `for` loop: stays a loop, so `break`/`continue` into it are fine.
    /// (Rejected `loop`s count too, so their jumps are not reported twice.)
    RustLoop(Option<Lifetime>),
    /// A rewritten `if` branch: a closure.
    IfBranch,
    /// A rewritten `range` loop body: a closure traced once.
    RangeBody,
    /// A rewritten `while` body: a closure (traced once, or run per trip at trace time).
    WhileBody,
}

struct Checker<'a> {
    errors: &'a mut Errors,
    frames: Vec<Frame>,
}

impl Checker<'_> {
    fn reject(&mut self, node: impl ToTokens, message: &str) {
        self.errors.push(syn::Error::new_spanned(node, message));
    }

    /// `break`/`continue` may only target a Rust loop with no rewritten construct in between.
    fn check_jump(&mut self, node: impl ToTokens, keyword: &str, label: Option<&Lifetime>) {
        for frame in self.frames.iter().rev() {
            match frame {
                Frame::RustLoop(own) if label.is_none() || label == own.as_ref() => return,
                Frame::RustLoop(_) => {}
                Frame::IfBranch => {
                    return self.reject(
                        node,
                        &format!(
                            "`{keyword}` cannot leave an `if` in a kernel body (its branches are \
                             traced as regions): restructure the loop, e.g. guard the rest of \
                             its body with the `if`"
                        ),
                    )
                }
                Frame::WhileBody => {
                    return self.reject(
                        node,
                        &format!(
                            "`{keyword}` cannot be used in a `while` loop of a kernel body: its \
                             body is traced as a region; fold the exit into the condition (carry \
                             a flag and test it in the `while`)"
                        ),
                    )
                }
                Frame::RangeBody => {
                    return self.reject(
                        node,
                        &format!(
                            "`{keyword}` cannot be used in a `range` loop: it is traced once and \
                             runs its full trip count; guard the body with `if`, or loop over a \
                             Rust range (`for i in 0..n`) to unroll it at trace time"
                        ),
                    )
                }
            }
        }
        // No enclosing loop at all: rustc reports that itself.
    }

    fn within(&mut self, frame: Frame, visit: impl FnOnce(&mut Self)) {
        self.frames.push(frame);
        visit(self);
        self.frames.pop();
    }
}

impl<'ast> Visit<'ast> for Checker<'_> {
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_expr_if(&mut self, node: &'ast syn::ExprIf) {
        self.visit_expr(&node.cond);
        self.within(Frame::IfBranch, |this| {
            this.visit_block(&node.then_branch);
            if let Some((_, else_branch)) = &node.else_branch {
                this.visit_expr(else_branch);
            }
        });
    }

    fn visit_expr_for_loop(&mut self, node: &'ast syn::ExprForLoop) {
        let frame = match RangeLoop::parse(node) {
            Ok(Some(_)) => Frame::RangeBody,
            Ok(None) => Frame::RustLoop(node.label.as_ref().map(|l| l.name.clone())),
            Err(error) => {
                self.errors.push(error);
                Frame::RangeBody
            }
        };
        self.visit_expr(&node.expr);
        self.within(frame, |this| this.visit_block(&node.body));
    }

    fn visit_expr_while(&mut self, node: &'ast syn::ExprWhile) {
        if let Some(label) = &node.label {
            self.reject(
                label,
                "a labeled `while` is not supported in a kernel body: nothing can jump to it",
            );
        }
        self.within(Frame::WhileBody, |this| {
            this.visit_expr(&node.cond);
            this.visit_block(&node.body)
        });
    }

    fn visit_expr_loop(&mut self, node: &'ast syn::ExprLoop) {
        let label = node.label.as_ref().map(|l| l.name.clone());
        self.within(Frame::RustLoop(label), |this| this.visit_block(&node.body));
    }

    fn visit_expr_break(&mut self, node: &'ast syn::ExprBreak) {
        self.check_jump(node, "break", node.label.as_ref());
        visit::visit_expr_break(self, node);
    }

    fn visit_expr_continue(&mut self, node: &'ast syn::ExprContinue) {
        self.check_jump(node, "continue", node.label.as_ref());
    }

    fn visit_expr_let(&mut self, node: &'ast syn::ExprLet) {
        self.reject(
            node,
            "`if let` and `let` conditions are not supported in a kernel body: traced values \
             have no patterns to match; use a plain `if` on a condition",
        );
        visit::visit_expr_let(self, node);
    }

    fn visit_local(&mut self, node: &'ast syn::Local) {
        if let Some(init) = node.init.as_ref().and_then(|init| init.diverge.as_ref()) {
            self.reject(
                init.0,
                "`let ... else` is not supported in a kernel body: bind with a plain `let`",
            );
        }
        visit::visit_local(self, node);
    }

    fn visit_expr(&mut self, node: &'ast Expr) {
        // `run_scoped(spec, |buf| { .. })` takes its body as a closure (called once, at once,
        // so it is traced straight through): its body is checked like any other block.
        if let Expr::Call(call) = node {
            if is_run_scoped(&call.func) {
                self.visit_expr(&call.func);
                for arg in &call.args {
                    match arg {
                        Expr::Closure(c) => self.visit_expr(&c.body),
                        other => self.visit_expr(other),
                    }
                }
                return;
            }
        }
        let error = |tokens: &dyn ToTokens, message: &str| syn::Error::new_spanned(tokens, message);
        let rejected = match node {
            Expr::Match(m) => Some(error(&m.match_token, MATCH)),
            Expr::Loop(l) => Some(error(&l.loop_token, &loops("loop"))),
            Expr::Closure(c) => Some(error(c, CLOSURE)),
            Expr::Return(r) => Some(error(r, RETURN)),
            Expr::Try(t) => Some(error(&t.question_token, TRY)),
            Expr::TryBlock(t) => Some(error(&t.try_token, TRY)),
            Expr::Async(a) => Some(error(&a.async_token, ASYNC)),
            Expr::Await(a) => Some(error(&a.await_token, ASYNC)),
            Expr::Unsafe(u) => Some(error(&u.unsafe_token, UNSAFE)),
            _ => None,
        };
        if let Some(error) = rejected {
            self.errors.push(error);
        }
        visit::visit_expr(self, node);
    }
}

fn is_run_scoped(func: &Expr) -> bool {
    matches!(func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "run_scoped"))
}

fn loops(keyword: &str) -> String {
    format!(
        "`{keyword}` is not supported in a kernel body: use `for i in range(lo, hi)` (a \
         traced loop with a fixed trip count), `while cond {{ .. }}` (a traced condition) or a \
         Rust `for` over a Rust range (unrolled at trace time)"
    )
}

const MATCH: &str = "`match` is not supported in a kernel body: use `if`/`else` (traced as a \
     region), or `where_(mask, a, b)` to choose between tiles element by element";
const CLOSURE: &str = "closures are not supported in a kernel body (except as the body of \
     `run_scoped`): write a helper `fn` (mark it `#[track_caller]` so errors point at its call) \
     or inline the code";
const RETURN: &str = "early `return` is not supported in a kernel body: put the code that should \
     not run in the `else` of an `if`";
const TRY: &str = "`?` is not supported in a kernel body: kernel operations never return \
     `Result`; the tracer records errors with their location and reports them after tracing";
const ASYNC: &str = "`async`/`.await` are not supported in a kernel body: kernels are traced \
     synchronously";
const UNSAFE: &str = "`unsafe` blocks are not supported in a kernel body: keep unsafe code \
     outside kernels";

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::test_util::{assert_one_error, parse_errors};

    #[test]
    fn rejects_each_unsupported_construct_with_what_to_use_instead() {
        let cases = [
            (
                quote!(match v {
                    _ => {}
                }),
                &["`match`", "`if`/`else`"][..],
            ),
            (quote!('a: while c {}), &["labeled `while`"]),
            (quote!(loop {}), &["`loop` is not", "range(lo, hi)"]),
            (quote!(let f = |t| t;), &["closures", "helper `fn`"]),
            (quote!(return;), &["`return`", "`else`"]),
            (quote!(let t = x.try_load()?;), &["`?`", "never return"]),
            (quote!(if let Some(t) = v {}), &["`if let`", "plain `if`"]),
            (
                quote!(let Some(t) = v else { panic!() };),
                &["`let ... else`"],
            ),
            (quote!(unsafe {}), &["`unsafe`"]),
            (quote!(let f = async {};), &["`async`"]),
            (quote!(for i in range(1, 2, 3) {}), &["`(n)` or `(lo, hi)`"]),
        ];
        for (statement, needles) in cases {
            assert_one_error(quote!(fn k() { #statement }), needles);
        }
    }

    #[test]
    fn break_and_continue_cannot_leave_a_traced_region() {
        assert_one_error(
            quote!(
                fn k() {
                    for i in range(4) {
                        break;
                    }
                }
            ),
            &["`range` loop"],
        );
        assert_one_error(
            quote!(
                fn k() {
                    for i in range(4) {
                        continue;
                    }
                }
            ),
            &["`continue`"],
        );
        assert_one_error(
            quote!(
                fn k() {
                    for j in 0..4 {
                        if j == 2 {
                            break;
                        }
                    }
                }
            ),
            &["`break` cannot leave an `if`"],
        );
        assert_one_error(
            quote!(
                fn k() {
                    'outer: for j in 0..4 {
                        for i in range(2) {
                            for m in 0..2 {
                                break 'outer;
                            }
                        }
                    }
                }
            ),
            &["`range` loop"],
        );
    }

    #[test]
    fn break_and_continue_within_a_rust_loop_are_fine() {
        assert!(parse_errors(quote!(
            fn k() {
                for j in 0..4 {
                    if c {
                        for m in 0..2 {
                            break;
                        }
                    }
                    continue;
                }
            }
        ))
        .is_empty());
        assert!(parse_errors(quote!(
            fn k() {
                for i in range(4) {
                    for m in 0..2 {
                        continue;
                    }
                }
            }
        ))
        .is_empty());
    }

    #[test]
    fn reports_every_problem_at_once_and_skips_nested_items() {
        let errors = parse_errors(quote!(
            fn k() {
                match v {
                    _ => {}
                }
                loop {}
                fn helper(v: Option<i32>) -> i32 {
                    match v {
                        Some(x) => x,
                        None => return 0,
                    }
                }
            }
        ));
        assert_eq!(errors.len(), 2, "{errors:#?}");
    }
}
