//! IR-to-IR rewrites run before the StableHLO translators, so that they see fewer op kinds:
//! - With refs discharged into values, a masked store is a select against the block's
//!   current contents: `store_masked(dst, mask, v)` becomes
//!   `store(dst, select(mask, v, load(dst)))`.
//! - `prng_seed` / `prng_random_bits` become the `i32` arithmetic of `ir::prng`'s generator
//!   (xor, logical shifts and wrapping multiplies), the bits the interpreter computes.
//!
//! Mosaic keeps these ops (a masked `tpu.vector_store`, the TPU's hardware PRNG).

use crate::dtype::DType;
use crate::ir::prng::{mix, KEY_0, MUL_1, MUL_2};
use crate::ir::{BinaryOp, Func, KernelProgram, Literal, Loc, OpKind, Operation, Region};
use crate::ir::{Type, ValueId};
use std::borrow::Cow;

/// `program` with those ops rewritten; borrowed when it has none.
pub(super) fn for_stablehlo(program: &KernelProgram) -> Cow<'_, KernelProgram> {
    if !has_rewritten_op(&program.body.body) {
        return Cow::Borrowed(program);
    }
    let mut owned = program.clone();
    let Func { values, body, .. } = &mut owned.body;
    rewrite(body, values);
    Cow::Owned(owned)
}

fn rewritten(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::StoreMasked { .. } | OpKind::PrngSeed { .. } | OpKind::PrngRandomBits { .. }
    )
}

fn has_rewritten_op(r: &Region) -> bool {
    r.ops
        .iter()
        .any(|op| rewritten(&op.kind) || op.kind.regions().into_iter().any(has_rewritten_op))
}

fn rewrite(region: &mut Region, values: &mut Vec<Type>) {
    let mut out = Emitter {
        values,
        ops: Vec::with_capacity(region.ops.len()),
        loc: Loc::UNKNOWN,
    };
    for mut op in std::mem::take(&mut region.ops) {
        for inner in op.kind.regions_mut() {
            rewrite(inner, out.values);
        }
        out.loc = op.loc;
        match op.kind {
            OpKind::StoreMasked { dst, mask, value } => {
                let ty = out.values[value.0 as usize].clone();
                let old = out.op(OpKind::Load { src: dst }, ty.clone(), None);
                let merged = out.op(
                    OpKind::Select {
                        cond: mask,
                        on_true: value,
                        on_false: old,
                    },
                    ty,
                    None,
                );
                out.ops.push(Operation {
                    results: vec![],
                    kind: OpKind::Store { dst, value: merged },
                    loc: op.loc,
                });
            }
            OpKind::PrngSeed { ref seeds } => {
                let mut key = out.constant(KEY_0, &[]);
                for (k, &s) in seeds.iter().enumerate() {
                    let last = (k + 1 == seeds.len()).then_some(op.results[0]);
                    let x = out.binary(BinaryOp::Xor, key, s, None);
                    key = out.mix(x, last);
                }
            }
            OpKind::PrngRandomBits { key, site } => {
                let shape = out.values[op.results[0].0 as usize].shape().to_vec();
                let site = out.constant(mix(site.wrapping_add(1)), &[]);
                let x = out.binary(BinaryOp::Xor, key, site, None);
                let stream = out.mix(x, None);
                let stream = out.op(
                    OpKind::Broadcast {
                        x: stream,
                        dims: vec![],
                    },
                    Type::tile(DType::I32, shape.clone()),
                    None,
                );
                let index = out.row_major_index(&shape);
                let index = out.mix(index, None);
                let x = out.binary(BinaryOp::Xor, stream, index, None);
                out.mix(x, Some(op.results[0]));
            }
            _ => out.ops.push(op),
        }
    }
    region.ops = out.ops;
}

/// Appends ops at one location, numbering new values after the function's.
struct Emitter<'a> {
    values: &'a mut Vec<Type>,
    ops: Vec<Operation>,
    loc: Loc,
}

impl Emitter<'_> {
    /// Emits `kind` with one result of type `ty`: `out` if given, else a new value.
    fn op(&mut self, kind: OpKind, ty: Type, out: Option<ValueId>) -> ValueId {
        let result = out.unwrap_or_else(|| {
            self.values.push(ty);
            ValueId((self.values.len() - 1) as u32)
        });
        self.ops.push(Operation {
            results: vec![result],
            kind,
            loc: self.loc,
        });
        result
    }

    fn ty(&self, v: ValueId) -> Type {
        self.values[v.0 as usize].clone()
    }

    /// An `i32` constant of `shape` with the bits of `bits`.
    fn constant(&mut self, bits: u32, shape: &[usize]) -> ValueId {
        let value = Literal::Int(i64::from(bits as i32));
        self.op(
            OpKind::Constant { value },
            Type::tile(DType::I32, shape),
            None,
        )
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
        out: Option<ValueId>,
    ) -> ValueId {
        let ty = self.ty(lhs);
        self.op(OpKind::Binary { op, lhs, rhs }, ty, out)
    }

    /// `x ^ (x >> n)`, logical shift.
    fn xor_shift(&mut self, x: ValueId, n: u32, out: Option<ValueId>) -> ValueId {
        let shape = self.ty(x).shape().to_vec();
        let n = self.constant(n, &shape);
        let shifted = self.binary(BinaryOp::ShrLogical, x, n, None);
        self.binary(BinaryOp::Xor, x, shifted, out)
    }

    /// `ir::prng::mix`, elementwise on `i32` (multiplies wrap as on `u32`).
    fn mix(&mut self, x: ValueId, out: Option<ValueId>) -> ValueId {
        let shape = self.ty(x).shape().to_vec();
        let x = self.xor_shift(x, 16, None);
        let m1 = self.constant(MUL_1, &shape);
        let x = self.binary(BinaryOp::Mul, x, m1, None);
        let x = self.xor_shift(x, 15, None);
        let m2 = self.constant(MUL_2, &shape);
        let x = self.binary(BinaryOp::Mul, x, m2, None);
        self.xor_shift(x, 15, out)
    }

    /// Each element's row-major index in a tile of `shape`.
    fn row_major_index(&mut self, shape: &[usize]) -> ValueId {
        let ty = Type::tile(DType::I32, shape);
        let mut index: Option<ValueId> = None;
        let mut stride = 1usize;
        for dim in (0..shape.len()).rev() {
            let along = self.op(OpKind::Iota { dim }, ty.clone(), None);
            let term = match stride {
                1 => along,
                s => {
                    let s = self.constant(s as u32, shape);
                    self.binary(BinaryOp::Mul, along, s, None)
                }
            };
            index = Some(match index {
                None => term,
                Some(acc) => self.binary(BinaryOp::Add, acc, term, None),
            });
            stride *= shape[dim];
        }
        index.unwrap_or_else(|| self.constant(0, shape))
    }
}
