//! Shape IR ops -> `vector`/`tpu`: broadcast, reshape, transpose, iota, reductions and
//! `tpu.matmul`.

use super::body::{unsupported, Lower};
use super::elementwise::Kind;
use super::error::MosaicError;
use super::printer::{Flavor, V};
use super::types::{dense_array, vector};
use crate::dtype::DType;
use crate::ir::{BinaryOp, Literal, Operation, ReduceOp, ValueId};

impl Lower<'_> {
    /// `tpu.iota` makes i32; other dtypes are converted after.
    pub(crate) fn iota(&mut self, op: &Operation, dim: usize) -> Result<V, MosaicError> {
        let (dtype, shape) = self.value_type(op.results.first().copied(), op)?;
        if shape.is_empty() {
            return Err(unsupported(op, "a scalar iota".into()));
        }
        let attr = format!("dimensions = {}", dense_array("i32", &[dim]));
        let v = self
            .p
            .op1("tpu.iota", &[], &attr, vector(DType::I32, &shape));
        Ok(self.convert(v, DType::I32, dtype, &shape))
    }

    /// broadcast_in_dim as `vector.shape_cast` (insert the new dims as 1s) then
    /// `vector.broadcast` (stretch 1s), which is how numpy-style broadcasting lowers.
    pub(crate) fn broadcast(
        &mut self,
        op: &Operation,
        x: ValueId,
        dims: &[usize],
    ) -> Result<V, MosaicError> {
        let (dtype, from) = self.value_type(Some(x), op)?;
        let (_, to) = self.value_type(op.results.first().copied(), op)?;
        let v = self.val(x, op)?;
        if from.is_empty() {
            return Ok(if to.is_empty() {
                v
            } else {
                self.p
                    .op1("vector.broadcast", &[&v], "", vector(dtype, &to))
            });
        }
        if dims.windows(2).any(|w| w[0] >= w[1]) {
            return Err(unsupported(
                op,
                format!("a broadcast that reorders dims ({dims:?}); transpose first"),
            ));
        }
        let mut aligned = vec![1; to.len()];
        for (i, &d) in dims.iter().enumerate() {
            aligned[d] = from[i];
        }
        let v = self.shape_cast(v, dtype, &from, &aligned);
        Ok(if aligned == to {
            v
        } else {
            self.p
                .op1("vector.broadcast", &[&v], "", vector(dtype, &to))
        })
    }

    pub(crate) fn reshape(&mut self, op: &Operation, x: ValueId) -> Result<V, MosaicError> {
        let (dtype, from) = self.value_type(Some(x), op)?;
        let (_, to) = self.value_type(op.results.first().copied(), op)?;
        let v = self.val(x, op)?;
        Ok(match (from.is_empty(), to.is_empty()) {
            (true, true) => v,
            // One element either way: a scalar becomes a 1x..x1 vector and back.
            (true, false) => self
                .p
                .op1("vector.broadcast", &[&v], "", vector(dtype, &to)),
            (false, true) => self.extract_scalar(&v, dtype, from.len()),
            (false, false) => self.shape_cast(v, dtype, &from, &to),
        })
    }

    fn shape_cast(&mut self, v: V, dtype: DType, from: &[usize], to: &[usize]) -> V {
        if from == to {
            return v;
        }
        self.p
            .op1("vector.shape_cast", &[&v], "", vector(dtype, to))
    }

    pub(crate) fn transpose(
        &mut self,
        op: &Operation,
        x: ValueId,
        perm: &[usize],
    ) -> Result<V, MosaicError> {
        let (dtype, _) = self.value_type(Some(x), op)?;
        let (_, to) = self.value_type(op.results.first().copied(), op)?;
        let v = self.val(x, op)?;
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(v);
        }
        let attr = format!("permutation = {}", dense_array("i64", perm));
        Ok(self
            .p
            .op1("vector.transpose", &[&v], &attr, vector(dtype, &to)))
    }

    /// `vector.multi_reduction` with the op's identity as accumulator. A reduction of
    /// every dim would give a 0-D result, so, as Pallas does, a leading unit dim is added
    /// and the single element extracted (or reshaped, for `keepdims`: the result type
    /// says which).
    pub(crate) fn reduce(
        &mut self,
        op: &Operation,
        r: ReduceOp,
        x: ValueId,
        axes: &[usize],
    ) -> Result<V, MosaicError> {
        let (dtype, shape) = self.value_type(Some(x), op)?;
        let (_, result) = self.value_type(op.results.first().copied(), op)?;
        if shape.is_empty() {
            return self.val(x, op);
        }
        let (kind, init) = reduction_kind(r, dtype)
            .ok_or_else(|| unsupported(op, format!("{} of {dtype}", op.kind.name())))?;
        let mut v = self.val(x, op)?;
        let (mut src_shape, mut axes) = (shape.clone(), axes.to_vec());
        if axes.len() == shape.len() {
            src_shape.insert(0, 1);
            v = self.shape_cast(v, dtype, &shape, &src_shape);
            axes = (1..src_shape.len()).collect();
        }
        let kept: Vec<usize> = src_shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        let acc = self.constant(init, dtype, &kept);
        let attr = format!(
            "kind = #vector.kind<{kind}>, reduction_dims = {}",
            dense_array("i64", &axes)
        );
        let reduced = self.p.op1(
            "vector.multi_reduction",
            &[&v, &acc],
            &attr,
            vector(dtype, &kept),
        );
        Ok(if result.is_empty() {
            self.extract_scalar(&reduced, dtype, 1)
        } else {
            self.shape_cast(reduced, dtype, &kept, &result)
        })
    }

    /// Inclusive scan along `axis` as Hillis-Steele steps (what a Pallas user writes by hand
    /// with `pltpu.roll`): for `s = 1, 2, 4, .. < n`, `acc = acc (op) where(i >= s,
    /// roll(acc, s), identity)`, `roll` being `tpu.dynamic_rotate` (jnp.roll's direction:
    /// element `i` moves to `i + s`). log2(n) rotates, selects and combines; 32-bit
    /// elements along one of the last two dims (the rotates the TPU has).
    pub(crate) fn scan(
        &mut self,
        op: &Operation,
        r: ReduceOp,
        x: ValueId,
        axis: usize,
    ) -> Result<V, MosaicError> {
        let (dtype, shape) = self.value_type(Some(x), op)?;
        let rank = shape.len();
        if rank < 2 || axis + 2 < rank || dtype.bits() != 32 {
            return Err(unsupported(
                op,
                format!(
                    "a scan of {dtype}{shape:?} along axis {axis}: on TPU scans run on 32-bit \
                     elements along one of the last two dims of a tile of rank >= 2"
                ),
            ));
        }
        let (_, identity) = reduction_kind(r, dtype)
            .ok_or_else(|| unsupported(op, format!("{} of {dtype}", op.kind.name())))?;
        let combine = match r {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        let combine = combine
            .info()
            .mosaic
            .for_dtype(dtype)
            .ok_or_else(|| unsupported(op, format!("{} of {dtype}", op.kind.name())))?;
        let ty = vector(dtype, &shape);
        let mut acc = self.val(x, op)?;
        let n = shape[axis];
        if n <= 1 {
            return Ok(acc);
        }
        let attr = format!("dimensions = {}", dense_array("i32", &[axis]));
        let position = self
            .p
            .op1("tpu.iota", &[], &attr, vector(DType::I32, &shape));
        let fill = self.constant(identity, dtype, &shape);
        let mut s = 1;
        while s < n {
            let amount = self.constant(Literal::Int(s as i64), DType::I32, &[]);
            let rolled = self.p.op1(
                "tpu.dynamic_rotate",
                &[&acc, &amount],
                &format!("dimension = {axis} : si32"),
                ty.clone(),
            );
            let bound = self.constant(Literal::Int(s as i64), DType::I32, &shape);
            // `sge`: lanes at or past the shift receive a rotated element, the others the
            // identity (their rotated element wrapped around from the end).
            let valid = self.p.op1(
                "arith.cmpi",
                &[&position, &bound],
                "predicate = 5 : i64",
                vector(DType::Bool, &shape),
            );
            let shifted = self
                .p
                .op1("arith.select", &[&valid, &rolled, &fill], "", ty.clone());
            acc = self.p.op1(combine, &[&acc, &shifted], "", ty.clone());
            s *= 2;
        }
        Ok(acc)
    }

    /// `tpu.matmul(lhs, rhs, zeros)`: f32 accumulation (the IR's dot result is f32).
    /// Transposed operands are expressed in the dimension numbers, as Pallas does.
    pub(crate) fn dot(
        &mut self,
        op: &Operation,
        lhs: ValueId,
        rhs: ValueId,
        t_lhs: bool,
        t_rhs: bool,
    ) -> Result<V, MosaicError> {
        let (acc_dtype, out) = self.value_type(op.results.first().copied(), op)?;
        let (l, r) = (self.val(lhs, op)?, self.val(rhs, op)?);
        let zeros = self.constant(Literal::Float(0.0), acc_dtype, &out);
        let (lc, ln) = if t_lhs { (0, 1) } else { (1, 0) };
        let (rc, rn) = if t_rhs { (1, 0) } else { (0, 1) };
        // <lhs contracting, rhs contracting, lhs free, rhs free, output (operand, dim) pairs, batch dims>
        let dims = format!("#tpu.dot_dimension_numbers<[{lc}], [{rc}], [{ln}], [{rn}], [0, {ln}, 1, {rn}], [], []>");
        // Version 11 spells the transposes as two flags; deserializing upgrades them to the
        // current `transpose_lhs_hint`, which the readable (current) form must use directly.
        let flags = match self.p.flavor() {
            Flavor::Serialized => "transpose_lhs = false, transpose_rhs = false",
            Flavor::Readable => "transpose_lhs_hint = false",
        };
        let attr = format!("dimension_numbers = {dims}, {flags}");
        Ok(self.p.op1(
            "tpu.matmul",
            &[&l, &r, &zeros],
            &attr,
            vector(acc_dtype, &out),
        ))
    }
}

/// The `vector.kind` (the op-info table's Mosaic column) and identity of a reduction over
/// `dtype`.
fn reduction_kind(r: ReduceOp, dtype: DType) -> Option<(&'static str, Literal)> {
    let shift = 64 - dtype.bits().min(64);
    if dtype == DType::Bool {
        return None;
    }
    let kind = r.info().mosaic.for_dtype(dtype)?;
    let identity = match (r, Kind::of(dtype)) {
        (ReduceOp::Sum, Kind::Float) => Literal::Float(0.0),
        (ReduceOp::Sum, _) => Literal::Int(0),
        (ReduceOp::Max, Kind::Float) => Literal::Float(f64::NEG_INFINITY),
        (ReduceOp::Min, Kind::Float) => Literal::Float(f64::INFINITY),
        (ReduceOp::Max, Kind::Signed) => Literal::Int(i64::MIN >> shift),
        (ReduceOp::Min, Kind::Signed) => Literal::Int(i64::MAX >> shift),
        (ReduceOp::Max, _) => Literal::Int(0),
        // All ones: the largest unsigned value, spelled as signless -1.
        (ReduceOp::Min, _) => Literal::Int(-1),
    };
    Some((kind, identity))
}
