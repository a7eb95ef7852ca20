//! Resampling: `upsample_nearest{1,2,3}d`, `upsample_linear1d`, `upsample_bilinear2d`,
//! `upsample_trilinear3d` (default and `.vec` overloads; source indices and
//! weights computed on the host exactly as PyTorch's CPU kernels compute them: f32 or f64,
//! and int16 fixed point for uint8).

use super::common::*;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, TensorType, Value};
use tessera_lowering::DType;

/// Rounds `v` as an f32 operation would when `f32` (the kernels' opmath type for all but f64).
fn rnd(v: f64, f32: bool) -> f64 {
    if f32 {
        v as f32 as f64
    } else {
        v
    }
}

/// Output sizes and per-dim scales from `output_size` or `scale_factors` (exactly one given).
fn out_size(a: &Args, x: &Value, op: &str) -> LowerResult<(Vec<usize>, Vec<Option<f64>>)> {
    let os = a.opt_int_list("output_size")?;
    let sf = a.opt_float_list("scale_factors")?;
    if x.rank() != 4 || x.shape()[1..].contains(&0) {
        return invalid(format!(
            "Non-empty 4D data tensor expected but got a tensor with sizes {}",
            shape_str(x.shape())
        ));
    }
    let ins = &x.shape()[2..];
    let (out, scales) = match (os, sf) {
        (Some(o), None) => {
            if o.len() != 2 {
                return invalid(format!(
                    "It is expected output_size equals to 2, but got size {}",
                    o.len()
                ));
            }
            (o, vec![None, None])
        }
        (None, Some(s)) => {
            if s.len() != 2 {
                return invalid(format!(
                    "It is expected scale_factors equals to 2, but got size {}",
                    s.len()
                ));
            }
            let o = (0..2).map(|i| (ins[i] as f64 * s[i]) as i64).collect();
            (o, s.iter().map(|&v| Some(v)).collect())
        }
        _ => return invalid("Must specify exactly one of output_size and scale_factors"),
    };
    for &v in &out {
        limit(v, "output_size")?;
    }
    if out.iter().any(|&v| v <= 0) {
        return invalid(format!(
            "{op}: Input and output sizes should be greater than 0, but got input (H: {}, W: {}) output (H: {}, W: {})",
            ins[0], ins[1], out[0], out[1]
        ));
    }
    Ok((out.iter().map(|&v| v as usize).collect(), scales))
}

/// `compute_scales_value`: `1/scale` when a positive scale is given, else `in/out`.
fn scales_value(scale: Option<f64>, n: usize, out: usize, f32: bool) -> f64 {
    match scale {
        Some(s) if s > 0.0 => rnd(1.0 / s, f32),
        _ => rnd(n as f64 / out as f64, f32),
    }
}

pub(super) fn nearest_indices(n: usize, out: usize, scale: Option<f64>) -> Vec<i64> {
    (0..out)
        .map(|o| {
            if out == n {
                o as i64
            } else if out == 2 * n {
                (o >> 1) as i64
            } else {
                let s = scales_value(scale, n, out, true);
                let v = rnd(o as f64 * s, true).floor() as i64;
                v.min(n as i64 - 1)
            }
        })
        .collect()
}

pub(crate) fn upsample_nearest2d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let d = x.dtype();
    dtype_check(d.is_float() || d == DType::U8, d, "upsample_nearest2d")?;
    let (out, scales) = out_size(a, &x, "upsample_nearest2d")?;
    let mut y = x.clone();
    for i in 0..2 {
        let idx = nearest_indices(x.shape()[2 + i], out[i], scales[i]);
        y = take(cx, &y, 2 + i, &idx)?;
    }
    Ok(vec![Out::Tensor(y)])
}

/// Source indices `(i0, i1)` and weights `(l0, l1)` of linear interpolation along one dim.
pub(super) fn linear_weights(
    n: usize,
    out: usize,
    align: bool,
    scale: Option<f64>,
    f32: bool,
) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>) {
    let sc = if align {
        if out > 1 {
            rnd((n as f64 - 1.0) / (out as f64 - 1.0), f32)
        } else {
            0.0
        }
    } else {
        scales_value(scale, n, out, f32)
    };
    let (mut i0, mut i1, mut l0, mut l1) = (vec![], vec![], vec![], vec![]);
    for o in 0..out {
        let src = if align {
            rnd(sc * o as f64, f32)
        } else {
            let s = rnd(rnd(sc * rnd(o as f64 + 0.5, f32), f32) - 0.5, f32);
            if s < 0.0 {
                0.0
            } else {
                s
            }
        };
        let idx = (src.floor() as i64).min(n as i64 - 1);
        let lam = rnd(src - idx as f64, f32).clamp(0.0, 1.0);
        let off = if idx < n as i64 - 1 { 1 } else { 0 };
        i0.push(idx);
        i1.push(idx + off);
        l1.push(lam);
        l0.push(rnd(1.0 - lam, f32));
    }
    (i0, i1, l0, l1)
}

pub(crate) fn upsample_bilinear2d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let align = a.bool("align_corners")?;
    let d = x.dtype();
    dtype_check(d.is_float() || d == DType::U8, d, "upsample_bilinear2d")?;
    let (out, scales) = out_size(a, &x, "upsample_bilinear2d")?;
    if d == DType::U8 {
        return Ok(vec![Out::Tensor(bilinear_u8(cx, &x, &out, align, &scales)?)]);
    }
    let ct = if d == DType::F64 { DType::F64 } else { DType::F32 };
    let f32 = ct == DType::F32;
    let mut y = cast(cx, &x, ct)?;
    // Width first, then height: PyTorch's nesting (out = l_h0 * row(h0) + l_h1 * row(h1)).
    for dim in [3usize, 2] {
        let i = dim - 2;
        let weights = linear_weights(x.shape()[dim], out[i], align, scales[i], f32);
        y = two_taps(cx, &y, dim, out[i], weights)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &y, d)?)])
}

/// `y` (in its compute dtype) resampled along `dim` to `out` points: each output the sum of
/// two taps `(i0, i1)` weighted `(l0, l1)` ([`linear_weights`]).
fn two_taps(
    cx: &mut Lower,
    y: &Value,
    dim: usize,
    out: usize,
    (i0, i1, l0, l1): (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>),
) -> LowerResult<Value> {
    let ct = y.dtype();
    let a0 = take(cx, y, dim, &i0)?;
    let a1 = take(cx, y, dim, &i1)?;
    let shape = a0.shape().to_vec();
    let w0 = host_const(cx, ct, &[out], &l0)?;
    let w0 = bcast_vec(cx, &w0, &shape, dim)?;
    let w1 = host_const(cx, ct, &[out], &l1)?;
    let w1 = bcast_vec(cx, &w1, &shape, dim)?;
    let t0 = cx.mul(&a0, &w0)?;
    let t1 = cx.mul(&a1, &w1)?;
    Ok(cx.add(&t0, &t1)?)
}

/// The two taps `(first index, int16 weights)` of each output and the weights' precision, as
/// PyTorch's uint8 kernel computes them (`_compute_index_ranges_int16_weights`, antialias
/// off): f64 weights, accumulated onto in-range taps, scaled to int16.
fn u8_weights(n: usize, out: usize, align: bool, scale: Option<f64>) -> (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>, u32) {
    let sc = if align {
        if out > 1 {
            (n as f64 - 1.0) / (out as f64 - 1.0)
        } else {
            0.0
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => 1.0 / s,
            _ => n as f64 / out as f64,
        }
    };
    let n = n as i64;
    let mut taps = Vec::new();
    let mut wmax = 0.0f64;
    for i in 0..out {
        let real = if align {
            sc * i as f64
        } else {
            let s = sc * (i as f64 + 0.5) - 0.5;
            if s < 0.0 {
                0.0
            } else {
                s
            }
        };
        let idx = ((real as f32).floor() as i64).min(n - 1);
        let lam = (real - idx as f64).clamp(0.0, 1.0);
        let (umin, umax) = (idx, idx + 2);
        let imin = umin.max(0);
        let size = (umax.min(n) - imin).clamp(0, 2);
        let mut wt = [0.0f64; 2];
        let mut wi: i64 = 0;
        for j in 0..2i64 {
            let xw = (j as f64 - lam).abs();
            let w = if xw < 1.0 { 1.0 - xw } else { 0.0 };
            if umin + j <= 0 {
                wi = 0;
            } else if umin + j >= n - 1 {
                wi = size - 1;
            }
            let k = wi.clamp(0, 1) as usize;
            wt[k] += w;
            wmax = wmax.max(wt[k]);
            wi += 1;
        }
        taps.push((imin, size, wt));
    }
    let mut prec = 0u32;
    while prec < 22 {
        let next = (0.5 + wmax * (1u64 << (prec + 1)) as f64) as i64;
        if next >= 1 << 15 {
            break;
        }
        prec += 1;
    }
    let q = |w: f64| {
        let v = w * (1u64 << prec) as f64;
        if v < 0.0 {
            (-0.5 + v) as i64
        } else {
            (0.5 + v) as i64
        }
    };
    let (mut i0, mut i1, mut w0, mut w1) = (vec![], vec![], vec![], vec![]);
    for (imin, size, wt) in taps {
        i0.push(imin);
        i1.push(if size > 1 { imin + 1 } else { imin });
        w0.push(q(wt[0]));
        w1.push(if size > 1 { q(wt[1]) } else { 0 });
    }
    (i0, i1, w0, w1, prec)
}

/// uint8 bilinear resampling as PyTorch computes it: separable passes (width, then height),
/// each an integer dot product with int16 weights, rounded (`+ 2^(p-1) >> p`) and clamped to
/// [0, 255] before the next pass.
fn bilinear_u8(cx: &mut Lower, x: &Value, out: &[usize], align: bool, scales: &[Option<f64>]) -> LowerResult<Value> {
    let mut y = x.clone();
    for dim in [3usize, 2] {
        let i = dim - 2;
        let n = x.shape()[dim];
        if n == out[i] {
            continue;
        }
        let (i0, i1, w0, w1, prec) = u8_weights(n, out[i], align, scales[i]);
        let a0 = take(cx, &y, dim, &i0)?;
        let a1 = take(cx, &y, dim, &i1)?;
        let a0 = cx.convert(&a0, DType::I32)?;
        let a1 = cx.convert(&a1, DType::I32)?;
        let shape = a0.shape().to_vec();
        let k0 = cx.constant(&tessera_lowering::HostTensor::from_vec::<i32>(
            vec![out[i]],
            w0.iter().map(|&v| v as i32).collect(),
        ))?;
        let k0 = bcast_vec(cx, &k0, &shape, dim)?;
        let k1 = cx.constant(&tessera_lowering::HostTensor::from_vec::<i32>(
            vec![out[i]],
            w1.iter().map(|&v| v as i32).collect(),
        ))?;
        let k1 = bcast_vec(cx, &k1, &shape, dim)?;
        let half = cx.full_int(
            TensorType::new(shape.clone(), DType::I32),
            if prec > 0 { 1i128 << (prec - 1) } else { 0 },
        )?;
        let t0 = cx.mul(&a0, &k0)?;
        let t1 = cx.mul(&a1, &k1)?;
        let t = cx.add(&half, &t0)?;
        let t = cx.add(&t, &t1)?;
        let sh = cx.full_int(TensorType::new(shape.clone(), DType::I32), prec as i128)?;
        let t = cx.binary(BinaryOp::ShiftRightArithmetic, &t, &sh)?;
        let lo = cx.full_int(TensorType::scalar(DType::I32), 0)?;
        let hi = cx.full_int(TensorType::scalar(DType::I32), 255)?;
        let t = cx.clamp(&lo, &t, &hi)?;
        y = cx.convert(&t, DType::U8)?;
    }
    Ok(y)
}

/// The names of the per-dim scale hints of an n-d upsample's default overload.
fn scale_names(n: usize) -> &'static [&'static str] {
    match n {
        1 => &["scales"],
        2 => &["scales_h", "scales_w"],
        _ => &["scales_d", "scales_h", "scales_w"],
    }
}

/// Output sizes and per-dim scales of an `n`-d upsample: the `.vec` overload's
/// `output_size` or `scale_factors` (exactly one), or the default overload's `output_size`
/// with its optional `scales_*` hints.
fn sizes_nd(a: &Args, x: &Value, n: usize, op: &str) -> LowerResult<(Vec<usize>, Vec<Option<f64>>)> {
    if x.rank() != n + 2 || x.shape()[1..].contains(&0) {
        return invalid(format!(
            "Non-empty {}D data tensor expected but got a tensor with sizes {}",
            n + 2,
            shape_str(x.shape())
        ));
    }
    let ins = &x.shape()[2..];
    let vec_form = a.schema.overload == "vec";
    let os = a.opt_int_list("output_size")?;
    let (out, scales): (Vec<i64>, Vec<Option<f64>>) = if vec_form {
        match (os, a.opt_float_list("scale_factors")?) {
            (Some(o), None) => (o, vec![None; n]),
            (None, Some(s)) if s.len() == n => {
                ((0..n).map(|i| (ins[i] as f64 * s[i]) as i64).collect(), s.iter().map(|&v| Some(v)).collect())
            }
            (None, Some(s)) => {
                return invalid(format!("It is expected scale_factors equals to {n}, but got size {}", s.len()))
            }
            _ => return invalid("Must specify exactly one of output_size and scale_factors"),
        }
    } else {
        let hints = scale_names(n).iter().map(|k| a.opt_float(k)).collect::<LowerResult<Vec<_>>>()?;
        (os.unwrap_or_default(), hints)
    };
    if out.len() != n {
        return invalid(format!("It is expected output_size equals to {n}, but got size {}", out.len()));
    }
    for &v in &out {
        limit(v, "output_size")?;
    }
    if out.iter().any(|&v| v <= 0) {
        return invalid(format!(
            "{op}: Input and output sizes should be greater than 0, but got input {:?} output {out:?}",
            ins
        ));
    }
    Ok((out.iter().map(|&v| v as usize).collect(), scales))
}

/// `upsample_nearest{1,2,3}d` (default and `.vec`): each output position takes its nearest
/// source along each spatial dim (float and uint8).
pub(crate) fn upsample_nearest_nd(cx: &mut Lower, a: &Args, n: usize) -> LowerResult<Vec<Out>> {
    let op = format!("upsample_nearest{n}d");
    let x = a.tensor(if a.schema.overload == "vec" { "input" } else { "self" })?;
    let d = x.dtype();
    dtype_check(d.is_float() || d == DType::U8, d, &op)?;
    let (out, scales) = sizes_nd(a, &x, n, &op)?;
    let mut y = x.clone();
    for i in 0..n {
        let idx = nearest_indices(x.shape()[2 + i], out[i], scales[i]);
        y = take(cx, &y, 2 + i, &idx)?;
    }
    Ok(vec![Out::Tensor(y)])
}

/// `upsample_linear1d`, `upsample_bilinear2d`, `upsample_trilinear3d` (default and `.vec`):
/// separable linear interpolation, the last dim first (PyTorch's nesting), in f32 (f64 for
/// f64); uint8 in 2-d as PyTorch's fixed-point kernel.
pub(crate) fn upsample_linear_nd(cx: &mut Lower, a: &Args, n: usize) -> LowerResult<Vec<Out>> {
    let op = ["upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d"][n - 1];
    let x = a.tensor(if a.schema.overload == "vec" { "input" } else { "self" })?;
    let align = a.bool("align_corners")?;
    let d = x.dtype();
    dtype_check(d.is_float() || (d == DType::U8 && n == 2), d, op)?;
    let (out, scales) = sizes_nd(a, &x, n, op)?;
    if d == DType::U8 {
        return Ok(vec![Out::Tensor(bilinear_u8(cx, &x, &out, align, &scales)?)]);
    }
    let ct = if d == DType::F64 { DType::F64 } else { DType::F32 };
    let f32 = ct == DType::F32;
    let mut y = cast(cx, &x, ct)?;
    for i in (0..n).rev() {
        let dim = 2 + i;
        let weights = linear_weights(x.shape()[dim], out[i], align, scales[i], f32);
        y = two_taps(cx, &y, dim, out[i], weights)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &y, d)?)])
}
