//! Elementwise gathers and scatters along one dim (`gather`, `scatter*`), the row gathers and
//! scatters of `index_select`/`index_add`/`index_copy`, and `nonzero`'s sort.

use crate::aten::shape::common::*;
use crate::error::{LowerError, LowerResult};
use crate::lower::Lower;
use tessera_lowering::stablehlo::{Comparison, GatherDims, ScatterDims, Value};
use tessera_lowering::DType;

/// How a scatter combines the current value with an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    Replace,
    Add,
    Mul,
    Max,
    Min,
}

fn combine(f: &mut tessera_lowering::stablehlo::FuncBuilder, c: Combine, a: &[Value]) -> Result<Vec<Value>, LowerError> {
    Ok(vec![match c {
        Combine::Replace => a[1].clone(),
        Combine::Add => f.add(&a[0], &a[1])?,
        Combine::Mul => f.mul(&a[0], &a[1])?,
        Combine::Max => f.max(&a[0], &a[1])?,
        Combine::Min => f.min(&a[0], &a[1])?,
    }])
}

/// Integer index tensors are int32 or int64 (`what` names the op in the error).
pub(crate) fn check_index_dtype(index: &Value, what: &str) -> LowerResult<()> {
    if matches!(index.dtype(), DType::I64 | DType::I32) {
        Ok(())
    } else {
        Err(LowerError::dtype(index.dtype(), format!("{what}(): Expected dtype int32/int64 for index")))
    }
}

/// Index vectors `S + [r]` (i64) from one integer index tensor per dim of the operand.
pub(crate) fn stack_indices(cx: &mut Lower, comps: &[Value], shape: &[usize]) -> LowerResult<Value> {
    let mut s1 = shape.to_vec();
    s1.push(1);
    let mut cols = Vec::with_capacity(comps.len());
    for c in comps {
        let c = cx.convert(c, DType::I64)?;
        let c = cx.broadcast_to(&c, shape)?;
        cols.push(cx.reshape(&c, &s1)?);
    }
    if cols.len() == 1 {
        return Ok(cols.remove(0));
    }
    let refs: Vec<&Value> = cols.iter().collect();
    Ok(cx.concatenate(&refs, shape.len())?)
}

/// `x[c0, c1, ...] (op)= updates` elementwise (`comps` and `updates` of `shape`).
pub(crate) fn scatter_points(
    cx: &mut Lower,
    x: &Value,
    comps: &[Value],
    shape: &[usize],
    updates: &Value,
    c: Combine,
) -> LowerResult<Value> {
    let n: usize = shape.iter().product();
    if n == 0 || x.ty().num_elements() == 0 {
        return Ok(x.clone());
    }
    let r = x.rank();
    let idx = stack_indices(cx, comps, shape)?;
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: (0..r).collect(),
        scatter_dims_to_operand_dims: (0..r).collect(),
        index_vector_dim: shape.len(),
    };
    let mut out = cx.scatter(&[x], &idx, &[updates], &dims, |f, a| combine(f, c, a))?;
    Ok(out.remove(0))
}

/// The index vectors of `gather`/`scatter` along `dim`: `index` at `dim`, the position
/// elsewhere (all of `index`'s shape).
pub(crate) fn along_dim(cx: &mut Lower, index: &Value, dim: usize) -> LowerResult<Vec<Value>> {
    let shape = index.shape().to_vec();
    (0..shape.len())
        .map(|d| if d == dim { Ok(cx.convert(index, DType::I64)?) } else { iota(cx, &shape, d) })
        .collect()
}

/// `x` indexed along `dim` by the 1-D `index` (`index_select`).
pub(crate) fn take_rows(cx: &mut Lower, x: &Value, dim: usize, index: &Value) -> LowerResult<Value> {
    let n = index.ty().num_elements();
    let mut shape = x.shape().to_vec();
    shape[dim] = n;
    if n == 0 || x.ty().num_elements() == 0 {
        return zeros(cx, &shape, x.dtype());
    }
    let idx = cx.convert(index, DType::I64)?;
    let idx = cx.reshape(&idx, &[n])?;
    let r = x.rank();
    let mut slice = x.shape().to_vec();
    slice[dim] = 1;
    let dims = GatherDims {
        offset_dims: (0..r).filter(|&d| d != dim).collect(),
        collapsed_slice_dims: vec![dim],
        start_index_map: vec![dim],
        index_vector_dim: 1,
    };
    Ok(cx.gather(x, &idx, &dims, &slice)?)
}

/// `x` with the rows `index` (1-D) along `dim` combined with `source`'s (`index_add`, `index_copy`).
pub(crate) fn put_rows(cx: &mut Lower, x: &Value, dim: usize, index: &Value, source: &Value, c: Combine) -> LowerResult<Value> {
    let n = index.ty().num_elements();
    if n == 0 || x.ty().num_elements() == 0 {
        return Ok(x.clone());
    }
    let idx = cx.convert(index, DType::I64)?;
    let idx = cx.reshape(&idx, &[n])?;
    let r = x.rank();
    let dims = ScatterDims {
        update_window_dims: (0..r).filter(|&d| d != dim).collect(),
        inserted_window_dims: vec![dim],
        scatter_dims_to_operand_dims: vec![dim],
        index_vector_dim: 1,
    };
    let mut out = cx.scatter(&[x], &idx, &[source], &dims, |f, a| combine(f, c, a))?;
    Ok(out.remove(0))
}

/// The flat (row-major) positions of `x`'s nonzero elements, in order, followed by the
/// others; and their count (rank-0 i64).
pub(crate) fn nonzero_flat(cx: &mut Lower, x: &Value) -> LowerResult<(Value, Value)> {
    let n = x.ty().num_elements();
    if n == 0 {
        return Ok((zeros(cx, &[0], DType::I64)?, i64_scalar(cx, 0)?));
    }
    let flat = cx.reshape(x, &[n])?;
    let nz = if x.dtype() == DType::Bool {
        flat
    } else {
        let z = zeros(cx, &[n], x.dtype())?;
        cx.compare(Comparison::Ne, &flat, &z)?
    };
    let key = cx.convert(&nz, DType::I32)?;
    let pos = iota(cx, &[n], 0)?;
    let sorted = cx.sort(&[&key, &pos], 0, true, |f, a| {
        Ok::<_, LowerError>(f.compare(Comparison::Gt, &a[0], &a[1])?)
    })?;
    let ones = cx.convert(&nz, DType::I64)?;
    let count = cx.reduce_sum(&ones, &[0], false)?;
    Ok((sorted[1].clone(), count))
}

/// Row-major coordinates (i64, one per dim of `shape`) of flat positions `p`.
pub(crate) fn unravel(cx: &mut Lower, p: &Value, shape: &[usize]) -> LowerResult<Vec<Value>> {
    let strides = contiguous_strides(shape);
    let ps = p.shape().to_vec();
    let mut out = Vec::with_capacity(shape.len());
    for (d, &s) in shape.iter().enumerate() {
        let st = i64_full(cx, &ps, strides[d])?;
        let q = cx.div(p, &st)?;
        let c = if d == 0 {
            q
        } else {
            let m = i64_full(cx, &ps, s as i64)?;
            cx.binary(tessera_lowering::stablehlo::BinaryOp::Remainder, &q, &m)?
        };
        out.push(c);
    }
    Ok(out)
}
