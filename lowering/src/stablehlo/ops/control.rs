//! Control flow: `stablehlo.while`, `stablehlo.if`, `stablehlo.case`, and a counted loop.
//!
//! Their regions may use values from enclosing blocks (implicit capture): XLA threads them
//! through when it converts to HLO, so callers need not carry loop-invariant values.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use super::elementwise::Comparison;
use crate::dtype::DType;

/// One branch of [`FuncBuilder::case`]: builds its ops and yields the results.
pub type Branch<'a, E> = Box<dyn FnOnce(&mut FuncBuilder) -> Result<Vec<Value>, E> + 'a>;

impl FuncBuilder {
    /// `while cond(carried) { carried = body(carried) }`; returns the final carried values.
    pub fn while_loop<E: From<BuildError>>(
        &mut self,
        init: &[&Value],
        cond: impl FnOnce(&mut Self, &[Value]) -> Result<Value, E>,
        body: impl FnOnce(&mut Self, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.while";
        let types: Vec<TensorType> = init.iter().map(|v| v.ty.clone()).collect();
        let (cond_region, c) =
            self.region(OP, &types, false, |f, args| cond(f, args).map(|v| vec![v]))?;
        if c != [TensorType::scalar(DType::Bool)] {
            return Err(mismatch(OP, &[TensorType::scalar(DType::Bool)], &c).into());
        }
        let (body_region, yielded) = self.region(OP, &types, false, body)?;
        if yielded != types {
            return Err(mismatch(OP, &types, &yielded).into());
        }
        Ok(self.emit(OP, init, "", vec![cond_region, body_region], types)?)
    }

    /// `for i in lo..hi` (i32 bounds, step 1) carrying `init`; `body(f, i, carried)` yields the
    /// next carried values. Returns the final carried values.
    pub fn fori_loop<E: From<BuildError>>(
        &mut self,
        lo: &Value,
        hi: &Value,
        init: &[&Value],
        body: impl FnOnce(&mut Self, &Value, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<Value>, E> {
        let i32_ty = TensorType::scalar(DType::I32);
        for b in [lo, hi] {
            if b.ty != i32_ty {
                return Err(BuildError::TypeMismatch {
                    op: "stablehlo.while",
                    lhs: i32_ty,
                    rhs: b.ty.clone(),
                }
                .into());
            }
        }
        let mut all = vec![lo];
        all.extend_from_slice(init);
        let mut out = self.while_loop(
            &all,
            |f, a| -> Result<Value, E> { Ok(f.compare(Comparison::Lt, &a[0], hi)?) },
            |f, a| -> Result<Vec<Value>, E> {
                let mut next = body(f, &a[0], &a[1..])?;
                let one = f.scalar(DType::I32, 1.0)?;
                next.insert(0, f.add(&a[0], &one)?);
                Ok(next)
            },
        )?;
        out.remove(0);
        Ok(out)
    }

    /// `if pred { then } else { else }` with results (`pred`: rank-0 i1). Both branches must
    /// yield the same types.
    pub fn if_else<E: From<BuildError>>(
        &mut self,
        pred: &Value,
        then_branch: impl FnOnce(&mut Self) -> Result<Vec<Value>, E>,
        else_branch: impl FnOnce(&mut Self) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.if";
        if pred.ty != TensorType::scalar(DType::Bool) {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: TensorType::scalar(DType::Bool),
                rhs: pred.ty.clone(),
            }
            .into());
        }
        let (t, tt) = self.region(OP, &[], false, |f, _| then_branch(f))?;
        let (e, et) = self.region(OP, &[], false, |f, _| else_branch(f))?;
        if tt != et {
            return Err(mismatch(OP, &tt, &et).into());
        }
        Ok(self.emit(OP, &[pred], "", vec![t, e], tt)?)
    }

    /// Runs branch `index` (rank-0 i32; out of range runs the last branch).
    pub fn case<'a, E: From<BuildError>>(
        &mut self,
        index: &Value,
        branches: Vec<Branch<'a, E>>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.case";
        if index.ty != TensorType::scalar(DType::I32) {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: TensorType::scalar(DType::I32),
                rhs: index.ty.clone(),
            }
            .into());
        }
        if branches.is_empty() {
            return Err(BuildError::shape(OP, "needs at least one branch").into());
        }
        let mut regions = Vec::new();
        let mut types: Option<Vec<TensorType>> = None;
        for b in branches {
            let (r, t) = self.region(OP, &[], false, |f, _| b(f))?;
            if let Some(first) = &types {
                if *first != t {
                    return Err(mismatch(OP, first, &t).into());
                }
            }
            types.get_or_insert(t);
            regions.push(r);
        }
        Ok(self.emit(OP, &[index], "", regions, types.unwrap_or_default())?)
    }
}

fn mismatch(op: &'static str, expected: &[TensorType], got: &[TensorType]) -> BuildError {
    BuildError::RegionResults {
        op,
        expected: expected.iter().map(|t| t.to_string()).collect(),
        got: got.iter().map(|t| t.to_string()).collect(),
    }
}
