//! Helpers the nn lowerings share: compute dtypes, constants, static gathers, list arguments,
//! torch-like dtype errors.

use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::Lower;
use tessera_lowering::stablehlo::{BinaryOp, GatherDims, ReduceKind, TensorType, Value};
use tessera_lowering::{DType, HostTensor};

/// The dtype PyTorch computes in for `d` ("opmath"): f16/bf16 compute in f32.
pub(crate) fn opmath(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

pub(crate) fn is_reduced_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// `x` converted to `dtype` (no op when it already is).
pub(crate) fn cast(cx: &mut Lower, x: &Value, dtype: DType) -> LowerResult<Value> {
    Ok(cx.convert(x, dtype)?)
}

/// `x` in its opmath dtype.
pub(crate) fn up(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    cast(cx, x, opmath(x.dtype()))
}

pub(crate) use crate::aten::util::torch_name;

/// `"op" not implemented for 'Long'` unless `ok`.
pub(crate) fn dtype_check(ok: bool, d: DType, op: &str) -> LowerResult<()> {
    if ok {
        Ok(())
    } else {
        Err(LowerError::dtype(
            d,
            format!("\"{op}\" not implemented for '{}'", torch_name(d)),
        ))
    }
}

/// Floats only (f16, bf16, f32, f64).
pub(crate) fn float_only(x: &Value, op: &str) -> LowerResult<()> {
    dtype_check(x.dtype().is_float(), x.dtype(), op)
}

pub(crate) fn invalid<T>(msg: impl Into<String>) -> LowerResult<T> {
    Err(LowerError::invalid(msg))
}

/// The largest size, stride, padding or output extent the lowerings accept (beyond it,
/// index arithmetic and host-built index tables would be unreasonable).
pub(crate) const MAX_EXTENT: i64 = 1 << 31;

/// Refuses `v` above [`MAX_EXTENT`] (`what` names it).
pub(crate) fn limit(v: i64, what: &str) -> LowerResult<()> {
    if v > MAX_EXTENT || v < -MAX_EXTENT {
        return Err(LowerError::Unsupported(format!("{what} of {v} is too large")));
    }
    Ok(())
}

/// Overlap-adds and unrolled window sums emit one op per kernel tap; beyond this many taps a
/// lowering refuses (or takes another route).
pub(crate) const MAX_TAPS: usize = 4096;

/// A tensor of `shape` and `dtype` filled with `v`.
pub(crate) fn splat(cx: &mut Lower, v: f64, dtype: DType, shape: &[usize]) -> LowerResult<Value> {
    Ok(cx.full(TensorType::new(shape.to_vec(), dtype), v)?)
}

/// `x op v` for a number `v` (in x's dtype).
pub(crate) fn bin_s(cx: &mut Lower, op: BinaryOp, x: &Value, v: f64) -> LowerResult<Value> {
    let c = splat(cx, v, x.dtype(), x.shape())?;
    Ok(cx.binary(op, x, &c)?)
}

pub(crate) fn mul_s(cx: &mut Lower, x: &Value, v: f64) -> LowerResult<Value> {
    bin_s(cx, BinaryOp::Multiply, x, v)
}

pub(crate) fn add_s(cx: &mut Lower, x: &Value, v: f64) -> LowerResult<Value> {
    bin_s(cx, BinaryOp::Add, x, v)
}

/// `a op b` with numpy broadcasting (dtypes must agree).
pub(crate) fn bb(cx: &mut Lower, op: BinaryOp, a: &Value, b: &Value) -> LowerResult<Value> {
    Ok(cx.broadcast_binary(op, a, b)?)
}

/// `x` (whose dims map to `dims` of the result) broadcast to `shape`.
pub(crate) fn bcast(cx: &mut Lower, x: &Value, shape: &[usize], dims: &[usize]) -> LowerResult<Value> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    Ok(cx.broadcast_in_dim(x, shape, dims)?)
}

/// A vector `v` (rank 1) broadcast along dim `dim` of `shape`.
pub(crate) fn bcast_vec(cx: &mut Lower, v: &Value, shape: &[usize], dim: usize) -> LowerResult<Value> {
    bcast(cx, v, shape, &[dim])
}

/// A host-computed constant of `dtype`.
pub(crate) fn host_const(cx: &mut Lower, dtype: DType, shape: &[usize], data: &[f64]) -> LowerResult<Value> {
    Ok(cx.constant(&HostTensor::from_f64(dtype, shape.to_vec(), data))?)
}

/// Sum over `dims`, in `x`'s dtype.
pub(crate) fn sum(cx: &mut Lower, x: &Value, dims: &[usize], keep: bool) -> LowerResult<Value> {
    Ok(cx.reduce_kind(x, ReduceKind::Sum, dims, keep)?)
}

/// `x[..., idx[j], ...]` along `dim` for host-known indices `idx` (each in range): a gather,
/// or a slice when the indices are a contiguous run.
pub(crate) fn take(cx: &mut Lower, x: &Value, dim: usize, idx: &[i64]) -> LowerResult<Value> {
    let n = x.shape()[dim] as i64;
    if idx.iter().any(|&i| i < 0 || i >= n) {
        return invalid(format!("index out of range in dim {dim} of size {n}"));
    }
    if idx.is_empty() || x.shape().contains(&0) {
        let mut shape = x.shape().to_vec();
        shape[dim] = idx.len();
        return splat(cx, 0.0, x.dtype(), &shape);
    }
    if idx.windows(2).all(|w| w[1] == w[0] + 1) {
        return Ok(cx.slice_axis(x, dim, idx[0] as usize, idx.len())?);
    }
    let data = if n <= i32::MAX as i64 {
        HostTensor::from_vec::<i32>(vec![idx.len(), 1], idx.iter().map(|&i| i as i32).collect())
    } else {
        HostTensor::from_vec::<i64>(vec![idx.len(), 1], idx.to_vec())
    };
    let ind = cx.constant(&data)?;
    let r = x.rank();
    let mut sizes = x.shape().to_vec();
    sizes[dim] = 1;
    let dims = GatherDims {
        offset_dims: (0..r).filter(|&d| d != dim).collect(),
        collapsed_slice_dims: vec![dim],
        start_index_map: vec![dim],
        index_vector_dim: 1,
    };
    Ok(cx.gather(x, &ind, &dims, &sizes)?)
}

/// An int list argument of `n` entries (a single entry is repeated, as ATen's
/// `expand_param_if_needed` does).
pub(crate) fn int_list_n(a: &Args, name: &str, n: usize, op: &str) -> LowerResult<Vec<i64>> {
    let v = a.int_list(name)?;
    expand(v, n, name, op)
}

pub(crate) fn expand(v: Vec<i64>, n: usize, name: &str, op: &str) -> LowerResult<Vec<i64>> {
    if v.len() == n {
        Ok(v)
    } else if v.len() == 1 {
        Ok(vec![v[0]; n])
    } else {
        invalid(format!("{op}: expected {name} to be a single integer value or a list of {n} values to match the convolution dimensions, but got {name}={v:?}"))
    }
}

/// Insert size-1 dims so that `x` has rank `rank` (leading dims), returning the new value.
pub(crate) fn unsqueeze0(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let mut s = vec![1];
    s.extend_from_slice(x.shape());
    Ok(cx.reshape(x, &s)?)
}

pub(crate) fn squeeze0(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    Ok(cx.reshape(x, &x.shape()[1..])?)
}

/// Integer floor division (Python's `//`).
pub(crate) fn div_floor(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Shape text as torch prints it: `[2, 3, 4]`.
pub(crate) fn shape_str(s: &[usize]) -> String {
    format!("{s:?}")
}

/// The output-size reduction code of the losses: 0 none, 1 mean, 2 sum.
pub(crate) fn reduction(a: &Args) -> LowerResult<i64> {
    let r = a.int("reduction")?;
    if !(0..=2).contains(&r) {
        return invalid(format!("{r} is not a valid value for reduction"));
    }
    Ok(r)
}

/// A rank-0 result of `x`'s sum (or mean) over all elements, by `reduction`; `none` returns x.
pub(crate) fn apply_reduction(cx: &mut Lower, x: &Value, r: i64) -> LowerResult<Value> {
    match r {
        0 => Ok(x.clone()),
        _ => {
            let dims: Vec<usize> = (0..x.rank()).collect();
            let s = sum(cx, x, &dims, false)?;
            if r == 1 {
                let n = x.shape().iter().product::<usize>() as f64;
                let d = splat(cx, n, x.dtype(), &[])?;
                Ok(cx.div(&s, &d)?)
            } else {
                Ok(s)
            }
        }
    }
}

/// Arithmetic that rounds every result to `dt` while computing in its opmath type: how
/// PyTorch's scalar CPU kernels compute with `c10::Half`/`c10::BFloat16` (each operator
/// rounds). For f32/f64 it is plain arithmetic. The rounding is an explicit convert pair, so
/// XLA keeps it.
#[derive(Clone, Copy)]
pub(crate) struct Rounding {
    pub dt: DType,
    pub ct: DType,
}

impl Rounding {
    pub fn new(dt: DType) -> Self {
        Rounding { dt, ct: opmath(dt) }
    }

    /// `v` (in `ct`) rounded to `dt`, still held in `ct`.
    pub fn r(&self, cx: &mut Lower, v: &Value) -> LowerResult<Value> {
        if self.dt == self.ct {
            return Ok(v.clone());
        }
        let n = cx.convert(v, self.dt)?;
        Ok(cx.convert(&n, self.ct)?)
    }

    pub fn bin(&self, cx: &mut Lower, op: BinaryOp, a: &Value, b: &Value) -> LowerResult<Value> {
        let v = cx.binary(op, a, b)?;
        self.r(cx, &v)
    }

    pub fn add(&self, cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
        self.bin(cx, BinaryOp::Add, a, b)
    }

    pub fn sub(&self, cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
        self.bin(cx, BinaryOp::Subtract, a, b)
    }

    pub fn mul(&self, cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
        self.bin(cx, BinaryOp::Multiply, a, b)
    }

    pub fn div(&self, cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
        self.bin(cx, BinaryOp::Divide, a, b)
    }

    /// `a op v` for a number `v` (rounded to `dt` first, as a `scalar_t` constant would be).
    pub fn bin_s(&self, cx: &mut Lower, op: BinaryOp, a: &Value, v: f64) -> LowerResult<Value> {
        let c = splat(cx, v, self.dt, a.shape())?;
        let c = cx.convert(&c, self.ct)?;
        self.bin(cx, op, a, &c)
    }

    /// `v op a` for a number `v`.
    pub fn s_bin(&self, cx: &mut Lower, op: BinaryOp, v: f64, a: &Value) -> LowerResult<Value> {
        let c = splat(cx, v, self.dt, a.shape())?;
        let c = cx.convert(&c, self.ct)?;
        self.bin(cx, op, &c, a)
    }
}
