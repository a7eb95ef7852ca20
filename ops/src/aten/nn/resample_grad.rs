//! Backward ops of the gather-like resamplings: reflection / replication padding and
//! nearest / bilinear upsampling. Each forward is separable, one static map per dim from
//! output positions to input taps; its backward contracts the gradient with that map's
//! `[out, in]` matrix along each dim (a transposed gather: every tap receives the sum of the
//! gradients that read it), in opmath.

use super::common::*;
use super::pad::{source_indices, Mode};
use super::upsample::{linear_weights, nearest_indices};
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{DotDims, Precision, Value};
use tessera_lowering::DType;

/// `g` with dim `axis` (of size `out`) mapped to size `inn` by `m` (`[out, inn]` row-major):
/// `r[.., j, ..] = sum_o g[.., o, ..] m[o, j]`.
fn contract_axis(
    cx: &mut Lower,
    g: &Value,
    axis: usize,
    m: &[f64],
    inn: usize,
) -> LowerResult<Value> {
    let out = g.shape()[axis];
    let mat = host_const(cx, g.dtype(), &[out, inn], m)?;
    let dd = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contract: vec![axis],
        rhs_contract: vec![0],
    };
    let r = cx.dot_general(g, &mat, &dd, Precision::Highest)?;
    // dot_general puts the new dim last; move it back to `axis`.
    let rank = r.rank();
    let perm: Vec<usize> = (0..rank)
        .map(|d| {
            if d < axis {
                d
            } else if d == axis {
                rank - 1
            } else {
                d - 1
            }
        })
        .collect();
    Ok(cx.transpose(&r, &perm)?)
}

/// The one-hot map of source indices `src` (one per output) onto `inn` inputs.
fn one_hot_map(src: &[i64], inn: usize) -> Vec<f64> {
    let mut m = vec![0.0; src.len() * inn];
    for (o, &s) in src.iter().enumerate() {
        m[o * inn + s as usize] += 1.0;
    }
    m
}

/// `{reflection,replication}_pad{n}d_backward(grad_output, self, padding)`.
pub(crate) fn pad_backward(
    cx: &mut Lower,
    a: &Args,
    n: usize,
    mode: Mode,
) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let x = a.tensor("self")?;
    let p = a.int_list("padding")?;
    if p.len() != 2 * n {
        return invalid(format!(
            "padding size is expected to be {}, but got: {}",
            2 * n,
            p.len()
        ));
    }
    let r = x.rank();
    if r != n + 1 && r != n + 2 {
        return invalid(format!(
            "Expected {}D or {}D input, but got: {}",
            n + 1,
            n + 2,
            shape_str(x.shape())
        ));
    }
    let mut want = x.shape().to_vec();
    for i in 0..n {
        let axis = r - 1 - i;
        let size = x.shape()[axis] as i64 + p[2 * i] + p[2 * i + 1];
        if size < 1 {
            return invalid(format!(
                "input (size {} at dimension {axis}) is too small",
                x.shape()[axis]
            ));
        }
        want[axis] = size as usize;
    }
    if g.shape() != want.as_slice() {
        return invalid(format!(
            "grad_output of size {} does not match the padded input's size {}",
            shape_str(g.shape()),
            shape_str(&want)
        ));
    }
    float_only(&g, "padding_backward")?;
    let mut y = up(cx, &g)?;
    for i in 0..n {
        let axis = r - 1 - i;
        let len = x.shape()[axis];
        let src = source_indices(len as i64, p[2 * i], p[2 * i + 1], mode);
        y = contract_axis(cx, &y, axis, &one_hot_map(&src, len), len)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &y, g.dtype())?)])
}

/// The checked `(output_size, input_size)` of a 2-d upsample backward.
fn upsample_sizes(a: &Args, g: &Value) -> LowerResult<([usize; 2], Vec<usize>)> {
    let os = a.int_list("output_size")?;
    let is = a.int_list("input_size")?;
    if os.len() != 2 || is.len() != 4 || os.iter().chain(&is).any(|&v| v <= 0) {
        return invalid(format!(
            "upsample backward expects output_size of 2 and input_size of 4 positive sizes, got {os:?} and {is:?}"
        ));
    }
    let want = [
        is[0] as usize,
        is[1] as usize,
        os[0] as usize,
        os[1] as usize,
    ];
    if g.shape() != want {
        return invalid(format!(
            "Expected grad_output to have the shape {}, but got {}",
            shape_str(&want),
            shape_str(g.shape())
        ));
    }
    Ok((
        [os[0] as usize, os[1] as usize],
        is.iter().map(|&v| v as usize).collect(),
    ))
}

/// `upsample_nearest2d_backward(grad_output, output_size, input_size, scales_h, scales_w)`.
pub(crate) fn upsample_nearest2d_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    float_only(&g, "upsample_nearest2d_backward")?;
    let (out, ins) = upsample_sizes(a, &g)?;
    let scales = [a.opt_float("scales_h")?, a.opt_float("scales_w")?];
    let mut y = up(cx, &g)?;
    for i in 0..2 {
        let src = nearest_indices(ins[2 + i], out[i], scales[i]);
        y = contract_axis(cx, &y, 2 + i, &one_hot_map(&src, ins[2 + i]), ins[2 + i])?;
    }
    Ok(vec![Out::Tensor(cast(cx, &y, g.dtype())?)])
}

/// `upsample_bilinear2d_backward(grad_output, output_size, input_size, align_corners,
/// scales_h, scales_w)`: the interpolation weights (as the forward computes them) transposed.
pub(crate) fn upsample_bilinear2d_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    float_only(&g, "upsample_bilinear2d_backward")?;
    let (out, ins) = upsample_sizes(a, &g)?;
    let align = a.bool("align_corners")?;
    let scales = [a.opt_float("scales_h")?, a.opt_float("scales_w")?];
    let f32 = g.dtype() != DType::F64;
    let mut y = up(cx, &g)?;
    for i in 0..2 {
        let n = ins[2 + i];
        let (i0, i1, l0, l1) = linear_weights(n, out[i], align, scales[i], f32);
        let mut m = vec![0.0; out[i] * n];
        for o in 0..out[i] {
            m[o * n + i0[o] as usize] += l0[o];
            m[o * n + i1[o] as usize] += l1[o];
        }
        y = contract_axis(cx, &y, 2 + i, &m, n)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &y, g.dtype())?)])
}
