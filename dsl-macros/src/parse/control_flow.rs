//! Recognizes the loops the macro traces: `for i in range(n)` and `for i in range(lo, hi)`.
//! (`if`/`else` needs no model: every `if` is rewritten, from the `syn` node itself.)

use syn::{Expr, ExprForLoop, Pat};

/// `for pat in range(lo, hi) body`, traced once into a loop region.
#[derive(Clone, Debug)]
pub struct RangeLoop {
    pub for_token: syn::Token![for],
    pub pat: Pat,
    /// `None` for `range(n)`: the loop starts at 0.
    pub lo: Option<Expr>,
    pub hi: Expr,
    pub body: syn::Block,
}

impl RangeLoop {
    /// `Ok(None)` for a loop over anything but a `range(..)` call: it stays a Rust loop,
    /// unrolled at trace time.
    pub fn parse(for_loop: &ExprForLoop) -> syn::Result<Option<Self>> {
        let Expr::Call(call) = &*for_loop.expr else {
            return Ok(None);
        };
        let Expr::Path(func) = &*call.func else {
            return Ok(None);
        };
        let is_range = func.qself.is_none()
            && func
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "range" && s.arguments.is_none());
        if !is_range {
            return Ok(None);
        }
        let mut args = call.args.iter().cloned();
        let (lo, hi) = match (args.next(), args.next(), args.next()) {
            (Some(n), None, None) => (None, n),
            (Some(lo), Some(hi), None) => (Some(lo), hi),
            _ => {
                return Err(syn::Error::new_spanned(
                    call,
                    "`range` takes `(n)` or `(lo, hi)`: the loop runs over lo..hi with step 1",
                ))
            }
        };
        Ok(Some(RangeLoop {
            for_token: for_loop.for_token,
            pat: (*for_loop.pat).clone(),
            lo,
            hi,
            body: for_loop.body.clone(),
        }))
    }
}
