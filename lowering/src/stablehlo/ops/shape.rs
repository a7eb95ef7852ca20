//! Shape ops: reshape, transpose, broadcast_in_dim, iota, slices (static and dynamic),
//! concatenate, pad, reverse.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use super::{as_i64, check_axes, i64_array};
use crate::dtype::DType;

impl FuncBuilder {
    /// Same elements, new shape (row-major order). Returns `x` when the shape is unchanged.
    pub fn reshape(&mut self, x: &Value, shape: &[usize]) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.reshape";
        if x.shape() == shape {
            return Ok(x.clone());
        }
        let n: usize = shape.iter().product();
        if n != x.ty.num_elements() {
            return Err(BuildError::shape(
                OP,
                format!(
                    "cannot reshape {:?} to {:?}: element counts differ",
                    x.shape(),
                    shape
                ),
            ));
        }
        self.emit1(OP, &[x], "", x.ty.with_shape(shape))
    }

    /// Result dim `i` is operand dim `perm[i]`.
    pub fn transpose(&mut self, x: &Value, perm: &[usize]) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.transpose";
        if perm.len() != x.rank() {
            return Err(BuildError::shape(
                OP,
                format!("permutation {perm:?} does not match rank {}", x.rank()),
            ));
        }
        check_axes(OP, perm, x.rank())?;
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x.clone());
        }
        let shape: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
        self.emit1(
            OP,
            &[x],
            &format!("permutation = {}", i64_array(&as_i64(perm))),
            x.ty.with_shape(shape),
        )
    }

    /// Operand dim `i` becomes result dim `dims[i]` (its size equal, or 1 to stretch).
    pub fn broadcast_in_dim(
        &mut self,
        x: &Value,
        shape: &[usize],
        dims: &[usize],
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.broadcast_in_dim";
        if dims.len() != x.rank() {
            return Err(BuildError::shape(
                OP,
                format!("{} broadcast dims for rank {}", dims.len(), x.rank()),
            ));
        }
        check_axes(OP, dims, shape.len())?;
        for (i, &d) in dims.iter().enumerate() {
            let s = x.shape()[i];
            if s != 1 && s != shape[d] {
                return Err(BuildError::shape(
                    OP,
                    format!("operand dim {i} (size {s}) cannot broadcast to dim {d} of {shape:?}"),
                ));
            }
        }
        let attrs = format!("broadcast_dimensions = {}", i64_array(&as_i64(dims)));
        self.emit1(OP, &[x], &attrs, x.ty.with_shape(shape))
    }

    /// `0, 1, 2, ...` along `dim` of `ty`.
    pub fn iota(&mut self, ty: TensorType, dim: usize) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.iota";
        if dim >= ty.rank() {
            return Err(BuildError::AxisOutOfRange {
                op: OP,
                axis: dim as i64,
                rank: ty.rank(),
            });
        }
        if ty.dtype == DType::Bool {
            return Err(BuildError::UnsupportedDType {
                op: OP,
                dtype: ty.dtype,
                expected: "a numeric type",
            });
        }
        self.emit1(OP, &[], &format!("iota_dimension = {dim} : i64"), ty)
    }

    /// Static strided slice `x[start:limit:stride]` per dim.
    pub fn slice(
        &mut self,
        x: &Value,
        start: &[usize],
        limit: &[usize],
        strides: &[usize],
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.slice";
        let r = x.rank();
        if start.len() != r || limit.len() != r || strides.len() != r {
            return Err(BuildError::shape(
                OP,
                format!("start/limit/strides must each have {r} entries"),
            ));
        }
        let mut shape = Vec::with_capacity(r);
        for i in 0..r {
            if start[i] > limit[i] || limit[i] > x.shape()[i] || strides[i] == 0 {
                return Err(BuildError::shape(
                    OP,
                    format!(
                        "dim {i}: bad slice {}:{}:{} of size {}",
                        start[i],
                        limit[i],
                        strides[i],
                        x.shape()[i]
                    ),
                ));
            }
            shape.push((limit[i] - start[i]).div_ceil(strides[i]));
        }
        let attrs = format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            i64_array(&as_i64(start)),
            i64_array(&as_i64(limit)),
            i64_array(&as_i64(strides))
        );
        self.emit1(OP, &[x], &attrs, x.ty.with_shape(shape))
    }

    /// `x[start : start+len]` along one axis, everything along the others.
    pub fn slice_axis(
        &mut self,
        x: &Value,
        axis: usize,
        start: usize,
        len: usize,
    ) -> Result<Value, BuildError> {
        if axis >= x.rank() {
            return Err(BuildError::AxisOutOfRange {
                op: "stablehlo.slice",
                axis: axis as i64,
                rank: x.rank(),
            });
        }
        let mut lo = vec![0; x.rank()];
        let mut hi = x.shape().to_vec();
        lo[axis] = start;
        hi[axis] = start + len;
        self.slice(x, &lo, &hi, &vec![1; x.rank()])
    }

    /// Slice of `sizes` at run-time `starts` (rank-0 integer tensors, one per dim, all the same
    /// type). Out-of-range starts are clamped by StableHLO so the slice fits.
    pub fn dynamic_slice(
        &mut self,
        x: &Value,
        starts: &[&Value],
        sizes: &[usize],
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.dynamic_slice";
        check_starts(OP, x, starts)?;
        if sizes.len() != x.rank() || sizes.iter().zip(x.shape()).any(|(s, d)| s > d) {
            return Err(BuildError::shape(
                OP,
                format!("slice sizes {sizes:?} do not fit {:?}", x.shape()),
            ));
        }
        let mut operands = vec![x];
        operands.extend_from_slice(starts);
        let attrs = format!("slice_sizes = {}", i64_array(&as_i64(sizes)));
        self.emit1(OP, &operands, &attrs, x.ty.with_shape(sizes))
    }

    /// `x` with `update` written at run-time `starts` (clamped so the update fits).
    pub fn dynamic_update_slice(
        &mut self,
        x: &Value,
        update: &Value,
        starts: &[&Value],
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.dynamic_update_slice";
        check_starts(OP, x, starts)?;
        let fits =
            update.rank() == x.rank() && update.shape().iter().zip(x.shape()).all(|(u, d)| u <= d);
        if update.dtype() != x.dtype() || !fits {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: x.ty.clone(),
                rhs: update.ty.clone(),
            });
        }
        let mut operands = vec![x, update];
        operands.extend_from_slice(starts);
        self.emit1(OP, &operands, "", x.ty.clone())
    }

    /// Joins tensors of equal dtype and shape (except along `dim`).
    pub fn concatenate(&mut self, xs: &[&Value], dim: usize) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.concatenate";
        let Some(first) = xs.first() else {
            return Err(BuildError::shape(OP, "needs at least one operand"));
        };
        if dim >= first.rank() {
            return Err(BuildError::AxisOutOfRange {
                op: OP,
                axis: dim as i64,
                rank: first.rank(),
            });
        }
        let mut shape = first.shape().to_vec();
        shape[dim] = 0;
        for x in xs {
            let same_other_dims = x.rank() == first.rank()
                && (0..x.rank()).all(|i| i == dim || x.shape()[i] == first.shape()[i]);
            if x.dtype() != first.dtype() || !same_other_dims {
                return Err(BuildError::TypeMismatch {
                    op: OP,
                    lhs: first.ty.clone(),
                    rhs: x.ty.clone(),
                });
            }
            shape[dim] += x.shape()[dim];
        }
        self.emit1(
            OP,
            xs,
            &format!("dimension = {dim} : i64"),
            first.ty.with_shape(shape),
        )
    }

    /// Pads with `value` (rank 0, x's dtype): `low`/`high` per dim (negative values crop),
    /// `interior` elements between neighbours.
    pub fn pad(
        &mut self,
        x: &Value,
        value: &Value,
        low: &[i64],
        high: &[i64],
        interior: &[usize],
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.pad";
        let r = x.rank();
        if value.rank() != 0 || value.dtype() != x.dtype() {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: x.ty.clone(),
                rhs: value.ty.clone(),
            });
        }
        if low.len() != r || high.len() != r || interior.len() != r {
            return Err(BuildError::shape(
                OP,
                format!("low/high/interior must each have {r} entries"),
            ));
        }
        let mut shape = Vec::with_capacity(r);
        for i in 0..r {
            let d = x.shape()[i] as i64;
            let size = d + low[i] + high[i] + (d - 1).max(0) * interior[i] as i64;
            if size < 0 {
                return Err(BuildError::shape(
                    OP,
                    format!("dim {i} would have negative size {size}"),
                ));
            }
            shape.push(size as usize);
        }
        let attrs = format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64_array(low),
            i64_array(high),
            i64_array(&as_i64(interior))
        );
        self.emit1(OP, &[x, value], &attrs, x.ty.with_shape(shape))
    }

    /// Reverses the order of elements along `dims`.
    pub fn reverse(&mut self, x: &Value, dims: &[usize]) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.reverse";
        check_axes(OP, dims, x.rank())?;
        self.emit1(
            OP,
            &[x],
            &format!("dimensions = {}", i64_array(&as_i64(dims))),
            x.ty.clone(),
        )
    }
}

/// Start indices: one rank-0 integer tensor per dim of `x`, all of one type.
fn check_starts(op: &'static str, x: &Value, starts: &[&Value]) -> Result<(), BuildError> {
    if starts.len() != x.rank() {
        return Err(BuildError::shape(
            op,
            format!("{} start indices for rank {}", starts.len(), x.rank()),
        ));
    }
    if let Some(s0) = starts.first() {
        for s in starts {
            if s.rank() != 0 || !s.dtype().is_int() || s.ty != s0.ty {
                return Err(BuildError::shape(
                    op,
                    format!(
                        "start indices must be rank-0 integers of one type, got {}",
                        s.ty
                    ),
                ));
            }
        }
    }
    Ok(())
}
