//! One `if`/`else`, `range` loop or `while` -> a call to `L::trace::__if_else` /
//! `L::trace::__fori` / `L::trace::__while`.
//!
//! The branches and the loop body become closures; the carried variables go in as a tuple, come
//! back out of the closure and are assigned back. The closures borrow what else they use
//! (not `move`): `&mut RefMut`/`&mut Scratch` parameters are not `Copy`, and the ref methods take
//! `&self`, so both branches can share them. Generated tokens sit at the `if`/`for` keyword, so
//! `#[track_caller]` in the tracer reports the user's line.

use proc_macro2::TokenStream;
use quote::{quote_spanned, ToTokens};
use syn::{ExprIf, ExprWhile, Ident};

use crate::crate_path::Lowering;
use crate::parse::control_flow::RangeLoop;

/// `if c { A } else { B }` (nested constructs already rewritten) -> a block whose value is the
/// `if`'s value. No `else` means `else {}`.
pub fn if_else(lowering: &Lowering, node: &ExprIf, carried: &[Ident]) -> TokenStream {
    let span = node.if_token.span;
    let l = lowering.at(span);
    let cond = &node.cond;
    let then_branch = &node.then_branch;
    let else_branch = match &node.else_branch {
        Some((_, else_branch)) => else_branch.to_token_stream(),
        None => quote_spanned!(span=> {}),
    };
    quote_spanned! {span=>
        {
            let (__carry, __res) = #l::trace::__if_else(
                #cond,
                (#(#carried,)*),
                |(#(mut #carried,)*)| { let __r = #then_branch; ((#(#carried,)*), __r) },
                |(#(mut #carried,)*)| { let __r = #else_branch; ((#(#carried,)*), __r) },
            );
            (#(#carried,)*) = __carry;
            __res
        }
    }
}

/// `for i in range(lo, hi) { BODY }` -> one traced loop region; `range(n)` starts at 0.
pub fn range_loop(lowering: &Lowering, range: RangeLoop, carried: &[Ident]) -> TokenStream {
    let span = range.for_token.span;
    let l = lowering.at(span);
    let RangeLoop {
        pat, lo, hi, body, ..
    } = range;
    let lo = lo.map_or_else(|| quote_spanned!(span=> 0), |lo| lo.to_token_stream());
    quote_spanned! {span=>
        {
            let __carry = #l::trace::__fori(#lo, #hi, (#(#carried,)*), |#pat, (#(mut #carried,)*)| {
                #body;
                (#(#carried,)*)
            });
            (#(#carried,)*) = __carry;
        }
    }
}

/// `while COND { BODY }` -> one traced loop (or a trace-time loop for a Rust condition):
/// the condition and the body each become a closure over the carried variables.
pub fn while_loop(lowering: &Lowering, node: &ExprWhile, carried: &[Ident]) -> TokenStream {
    let span = node.while_token.span;
    let l = lowering.at(span);
    let cond = &node.cond;
    let body = &node.body;
    quote_spanned! {span=>
        {
            let __carry = #l::trace::__while(
                (#(#carried,)*),
                |(#(mut #carried,)*)| #cond,
                |(#(mut #carried,)*)| { #body; (#(#carried,)*) },
            );
            (#(#carried,)*) = __carry;
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::{quote, ToTokens};
    use syn::{Expr, Stmt};

    use crate::test_util::{calls_to, closure_arg, rewritten_body, tuple_names, tuple_pattern};

    #[test]
    fn if_without_else_carries_the_assigned_tile() {
        let body = rewritten_body(quote! {
            fn k() {
                let mut acc = zeros();
                if program_id(2) == 0 { acc = acc + x.load(); }
                o.store(acc);
            }
        });
        let calls = calls_to(&body, "__if_else");
        assert_eq!(calls.len(), 1);
        let call = &calls[0];
        assert_eq!(call.args.len(), 4);
        assert_eq!(
            call.args[0].to_token_stream().to_string(),
            "program_id (2) == 0"
        );
        assert_eq!(tuple_names(&call.args[1]), ["acc"]);
        for branch in [2, 3] {
            let closure = closure_arg(call, branch);
            assert!(
                closure.capture.is_none(),
                "branches borrow, they do not move"
            );
            assert_eq!(closure.inputs.len(), 1);
            assert_eq!(tuple_pattern(&closure.inputs[0]), ["mut acc"]);
        }
        // The branch closures return `((acc,), __r)` and the result is assigned back.
        let text = body.to_token_stream().to_string();
        assert!(text.contains("((acc ,) , __r)"), "{text}");
        assert!(text.contains("(acc ,) = __carry"), "{text}");
    }

    #[test]
    fn if_else_as_an_expression_yields_the_result() {
        let body = rewritten_body(quote! {
            fn k() { let y = if c { a } else { b }; o.store(y); }
        });
        let Stmt::Local(local) = &body.stmts[0] else {
            panic!("expected the `let`")
        };
        let Some(init) = &local.init else {
            panic!("expected an initializer")
        };
        let Expr::Block(block) = &*init.expr else {
            panic!("expected a block, got {init:?}")
        };
        let last = block
            .block
            .stmts
            .last()
            .map(|s| s.to_token_stream().to_string());
        assert_eq!(last.as_deref(), Some("__res"));
        let calls = calls_to(&body, "__if_else");
        assert_eq!(calls.len(), 1);
        assert!(tuple_names(&calls[0].args[1]).is_empty());
    }

    #[test]
    fn else_if_chains_nest_in_the_else_branch() {
        let body = rewritten_body(quote! {
            fn k() { let mut t = x; if a { t = p; } else if b { t = q; } else { t = r; } }
        });
        let calls = calls_to(&body, "__if_else");
        assert_eq!(calls.len(), 2);
        let outer = &calls[0];
        assert_eq!(tuple_names(&outer.args[1]), ["t"]);
        assert!(calls_to(&outer.args[2], "__if_else").is_empty());
        let nested = calls_to(&outer.args[3], "__if_else");
        assert_eq!(nested.len(), 1);
        assert_eq!(tuple_names(&nested[0].args[1]), ["t"]);
    }

    #[test]
    fn range_loops_become_fori_with_their_carry() {
        let body = rewritten_body(quote! {
            fn k() {
                let mut acc = zeros();
                for i in range(4) { acc = acc + x.load_slice(i); }
                for j in range(lo, hi) { let t = acc * 2.0; o.store(t); }
            }
        });
        let calls = calls_to(&body, "__fori");
        assert_eq!(calls.len(), 2);
        let first = &calls[0];
        assert_eq!(first.args[0].to_token_stream().to_string(), "0");
        assert_eq!(first.args[1].to_token_stream().to_string(), "4");
        assert_eq!(tuple_names(&first.args[2]), ["acc"]);
        let closure = closure_arg(first, 3);
        assert!(closure.capture.is_none());
        assert_eq!(closure.inputs[0].to_token_stream().to_string(), "i");
        assert_eq!(tuple_pattern(&closure.inputs[1]), ["mut acc"]);
        let second = &calls[1];
        assert_eq!(second.args[0].to_token_stream().to_string(), "lo");
        assert_eq!(second.args[1].to_token_stream().to_string(), "hi");
        assert!(tuple_names(&second.args[2]).is_empty());
    }

    #[test]
    fn while_loops_become_while_with_their_carry() {
        let body = rewritten_body(quote! {
            fn k() {
                let mut i = zeros();
                let mut acc = zeros();
                while i.lt(n) { acc = acc + x.load(); i = i + 1; }
            }
        });
        let calls = calls_to(&body, "__while");
        assert_eq!(calls.len(), 1);
        let call = &calls[0];
        assert_eq!(call.args.len(), 3);
        assert_eq!(tuple_names(&call.args[0]), ["acc", "i"]);
        for arg in [1, 2] {
            let closure = closure_arg(call, arg);
            assert!(
                closure.capture.is_none(),
                "closures borrow, they do not move"
            );
            assert_eq!(tuple_pattern(&closure.inputs[0]), ["mut acc", "mut i"]);
        }
    }

    #[test]
    fn rust_for_loops_stay_loops_with_their_body_rewritten() {
        let body = rewritten_body(quote! {
            fn k() { let mut s = zeros(); for j in 0..3 { if j == 1 { s = s + x.load(); } } }
        });
        let Stmt::Expr(Expr::ForLoop(for_loop), _) = &body.stmts[1] else {
            panic!(
                "the Rust loop should stay a `for`: {}",
                body.to_token_stream()
            )
        };
        let calls = calls_to(&for_loop.body, "__if_else");
        assert_eq!(calls.len(), 1);
        assert_eq!(tuple_names(&calls[0].args[1]), ["s"]);
    }

    #[test]
    fn nested_constructs_are_rewritten_inside_out() {
        let body = rewritten_body(quote! {
            fn k() {
                let mut acc = zeros();
                if first { for i in range(n) { if i == 0 { acc = acc + x.load(); } } }
            }
        });
        let outer = &calls_to(&body, "__if_else")[0];
        assert_eq!(tuple_names(&outer.args[1]), ["acc"]);
        let fori = calls_to(&outer.args[2], "__fori");
        assert_eq!(fori.len(), 1);
        assert_eq!(tuple_names(&fori[0].args[2]), ["acc"]);
        assert_eq!(calls_to(&fori[0].args[3], "__if_else").len(), 1);
    }

    #[test]
    fn nested_items_are_left_alone() {
        let body = rewritten_body(quote! {
            fn k() { fn helper(c: bool) -> i32 { if c { 1 } else { 2 } } }
        });
        assert!(calls_to(&body, "__if_else").is_empty());
    }
}
