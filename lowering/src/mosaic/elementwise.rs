//! Elementwise IR ops -> `arith` / `math`. Integer ops pick the signed or unsigned form
//! from the IR dtype, because Mosaic's integer types are signless.

use super::body::{unsupported, Lower};
use super::error::MosaicError;
use super::printer::V;
use super::types::vector;
use crate::dtype::DType;
use crate::ir::{BinaryOp, CompareOp, Literal, Operation, UnaryOp, ValueId};

impl Lower<'_> {
    pub(crate) fn unary(
        &mut self,
        op: &Operation,
        u: UnaryOp,
        x: ValueId,
    ) -> Result<V, MosaicError> {
        let (dtype, shape) = self.value_type(Some(x), op)?;
        let v = self.val(x, op)?;
        let ty = v.ty.clone();
        // The expansions first; every other op is its row of the op-info table.
        match u {
            UnaryOp::Neg if !dtype.is_float() => {
                let zero = self.constant(Literal::Int(0), dtype, &shape);
                return Ok(self.p.op1("arith.subi", &[&zero, &v], "", ty));
            }
            UnaryOp::Not => {
                // Bitwise not: xor with all ones (`true` for bool).
                let ones = if dtype == DType::Bool {
                    Literal::Bool(true)
                } else {
                    Literal::Int(-1)
                };
                let ones = self.constant(ones, dtype, &shape);
                return Ok(self.p.op1("arith.xori", &[&v, &ones], "", ty));
            }
            UnaryOp::Logistic if dtype.is_float() => {
                // 1 / (1 + exp(-x)), the form Pallas' `jax.nn.sigmoid` lowers to.
                let neg = self.p.op1("arith.negf", &[&v], "", ty.clone());
                let e = self.math("math.exp", &[&neg], dtype, &shape);
                let one = self.constant(Literal::Float(1.0), dtype, &shape);
                let den = self.p.op1("arith.addf", &[&one, &e], "", ty.clone());
                return Ok(self.p.op1("arith.divf", &[&one, &den], "", ty));
            }
            _ => {}
        }
        let name = u
            .info()
            .mosaic
            .for_dtype(dtype)
            .ok_or_else(|| unsupported(op, format!("{} of {dtype}", u.name())))?;
        Ok(self.math(name, &[&v], dtype, &shape))
    }

    /// `name(operands)` elementwise. TPU's scalar unit has no `math` ops (libtpu fails to
    /// legalize e.g. a scalar `math.powf`), so on scalars they run on a 1x1 vector.
    fn math(&mut self, name: &str, operands: &[&V], dtype: DType, shape: &[usize]) -> V {
        if !shape.is_empty() || !name.starts_with("math.") {
            return self.p.op1(name, operands, "", vector(dtype, shape));
        }
        let one = vector(dtype, &[1, 1]);
        let lifted: Vec<V> = operands
            .iter()
            .map(|o| self.p.op1("vector.broadcast", &[o], "", one.clone()))
            .collect();
        let refs: Vec<&V> = lifted.iter().collect();
        let r = self.p.op1(name, &refs, "", one);
        self.extract_scalar(&r, dtype, 2)
    }

    pub(crate) fn binary(
        &mut self,
        op: &Operation,
        b: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
    ) -> Result<V, MosaicError> {
        let (dtype, shape) = self.value_type(Some(lhs), op)?;
        let (l, r) = (self.val(lhs, op)?, self.val(rhs, op)?);
        let name = b
            .info()
            .mosaic
            .for_dtype(dtype)
            .ok_or_else(|| unsupported(op, format!("bitwise {} of {dtype}", b.name())))?;
        if matches!(
            b,
            BinaryOp::Shl | BinaryOp::ShrArithmetic | BinaryOp::ShrLogical
        ) {
            return Ok(self.guarded_shift(b, name, dtype, &shape, &l, &r));
        }
        Ok(self.math(name, &[&l, &r], dtype, &shape))
    }

    /// `arith` shifts by an amount outside `0..bits` are undefined; StableHLO's (and the IR's)
    /// give 0, or the sign for the arithmetic right shift: out-of-range amounts (compared
    /// unsigned, so negative ones count) select that result.
    fn guarded_shift(
        &mut self,
        b: BinaryOp,
        name: &str,
        dtype: DType,
        shape: &[usize],
        x: &V,
        amount: &V,
    ) -> V {
        let ty = vector(dtype, shape);
        let bits = dtype.bits() as i64;
        let width = self.constant(Literal::Int(bits), dtype, shape);
        let outside = self.p.op1(
            "arith.cmpi",
            &[amount, &width],
            "predicate = 9 : i64",
            vector(DType::Bool, shape),
        );
        if b == BinaryOp::ShrArithmetic {
            let last = self.constant(Literal::Int(bits - 1), dtype, shape);
            let clamped = self
                .p
                .op1("arith.select", &[&outside, &last, amount], "", ty.clone());
            return self.p.op1(name, &[x, &clamped], "", ty);
        }
        let shifted = self.p.op1(name, &[x, amount], "", ty.clone());
        let zero = self.constant(Literal::Int(0), dtype, shape);
        self.p
            .op1("arith.select", &[&outside, &zero, &shifted], "", ty)
    }

    pub(crate) fn compare(
        &mut self,
        op: &Operation,
        c: CompareOp,
        lhs: ValueId,
        rhs: ValueId,
    ) -> Result<V, MosaicError> {
        let (dtype, shape) = self.value_type(Some(lhs), op)?;
        let (l, r) = (self.val(lhs, op)?, self.val(rhs, op)?);
        if c == CompareOp::Ne && dtype.is_float() {
            // libtpu has no unordered compares ("Unsupported comparison direction: une"):
            // `x != y` is `!(x == y)` (ordered), which keeps NaN != NaN true.
            let bools = vector(DType::Bool, &shape);
            let eq = self.p.op1(
                "arith.cmpf",
                &[&l, &r],
                "predicate = 1 : i64",
                bools.clone(),
            );
            let all = self.constant(Literal::Bool(true), DType::Bool, &shape);
            return Ok(self.p.op1("arith.xori", &[&eq, &all], "", bools));
        }
        // The table's Mosaic column holds `arith.cmpf`/`cmpi` predicate numbers.
        let name = if dtype.is_float() {
            "arith.cmpf"
        } else {
            "arith.cmpi"
        };
        let predicate = c
            .info()
            .mosaic
            .for_dtype(dtype)
            .ok_or_else(|| unsupported(op, format!("{} of {dtype}", c.name())))?;
        Ok(self.p.op1(
            name,
            &[&l, &r],
            &format!("predicate = {predicate} : i64"),
            vector(DType::Bool, &shape),
        ))
    }

    pub(crate) fn cast_op(&mut self, op: &Operation, x: ValueId) -> Result<V, MosaicError> {
        let (from, shape) = self.value_type(Some(x), op)?;
        let (to, _) = self.value_type(op.results.first().copied(), op)?;
        let v = self.val(x, op)?;
        Ok(self.convert(v, from, to, &shape))
    }

    /// Converts elements from `from` to `to` (floats to ints truncate toward zero).
    pub(crate) fn convert(&mut self, v: V, from: DType, to: DType, shape: &[usize]) -> V {
        let ty = vector(to, shape);
        let (kf, kt) = (Kind::of(from), Kind::of(to));
        let name = match (kf, kt) {
            _ if v.ty == ty => return v,
            (_, Kind::Bool) => {
                // Nonzero is true.
                let zero = self.constant(Literal::Int(0), from, shape);
                let (name, predicate) = if kf == Kind::Float {
                    ("arith.cmpf", 13)
                } else {
                    ("arith.cmpi", 1)
                };
                return self.p.op1(
                    name,
                    &[&v, &zero],
                    &format!("predicate = {predicate} : i64"),
                    ty,
                );
            }
            (Kind::Float, Kind::Float) if from.bits() == to.bits() => {
                // bf16 <-> f16: through f32, the common wider type.
                let wide = self.convert(v, from, DType::F32, shape);
                return self.convert(wide, DType::F32, to, shape);
            }
            (Kind::Float, Kind::Float) if from.bits() < to.bits() => "arith.extf",
            (Kind::Float, Kind::Float) => "arith.truncf",
            (Kind::Signed, Kind::Float) => "arith.sitofp",
            (Kind::Unsigned | Kind::Bool, Kind::Float) => "arith.uitofp",
            (Kind::Float, Kind::Signed) => "arith.fptosi",
            (Kind::Float, _) => "arith.fptoui",
            (_, _) if from.bits() > to.bits() => "arith.trunci",
            (Kind::Signed, _) => "arith.extsi",
            (_, _) => "arith.extui",
        };
        self.p.op1(name, &[&v], "", ty)
    }
}

/// How `arith` treats an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Float,
    Signed,
    Unsigned,
    Bool,
}

impl Kind {
    pub fn of(dtype: DType) -> Kind {
        if dtype.is_float() {
            Kind::Float
        } else if dtype.is_signed_int() {
            Kind::Signed
        } else if dtype == DType::Bool {
            Kind::Bool
        } else {
            Kind::Unsigned
        }
    }
}
