//! A convolution as one GEMM over its kernel taps (im2col), for the shapes where XLA's own
//! convolution is pathological.
//!
//! XLA's algebraic simplifier swaps a convolution's operands when the kernel's spatial product
//! exceeds the input's (and there is one feature group), and XLA CPU runs the swapped form on
//! its naive loop emitter. Measured with jax.jit on this machine (f32, NCHW, 512 -> 512
//! channels, batch 2, 3x3 kernel, padding 1): a 2x2 input 23.7 ms, 2x4 52.9 ms, 1x1 4.4 ms,
//! against 2.8-3.5 ms for the unswapped 3x3, 2x5 and 4x4 inputs (torch: 0.64 ms for 2x2).
//! That is ResNet's last stage on 64x64 images, forward and input gradient.

use super::common::*;
use crate::error::LowerResult;
use crate::lower::Lower;
use tessera_lowering::stablehlo::{DotDims, Precision, Value};

/// Whether XLA would swap the operands of a convolution of input spatial sizes `input` by a
/// kernel of spatial sizes `kernel` in `groups` feature groups (the case [`conv_by_taps`]
/// lowers instead).
pub(crate) fn xla_swaps_operands(input: &[usize], kernel: &[usize], groups: usize) -> bool {
    let k: usize = kernel.iter().product();
    groups == 1 && k <= MAX_TAPS && k > input.iter().product::<usize>()
}

/// Where a convolution's window goes, per spatial dim: padding of the input (negative crops),
/// zeros between input elements (`lhs_dil`), between kernel taps (`rhs_dil`), and the stride.
pub(crate) struct Window<'a> {
    pub padding: &'a [(i64, i64)],
    pub lhs_dil: &'a [usize],
    pub rhs_dil: &'a [usize],
    pub stride: &'a [usize],
}

/// `x [N, C, *in]` (*) `w [O, C, *k]` -> `[N, O, *out]` (one feature group, as where XLA
/// swaps) as StableHLO's convolution computes it: the input padded (and dilated), one strided
/// slice per kernel tap, stacked, then one GEMM with the weight.
pub(crate) fn conv_by_taps(
    cx: &mut Lower,
    x: &Value,
    w: &Value,
    win: &Window,
) -> LowerResult<Value> {
    let s = x.rank() - 2;
    let (n, c, o) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    let k: Vec<usize> = w.shape()[2..].to_vec();
    let taps: usize = k.iter().product();
    let zero = splat(cx, 0.0, x.dtype(), &[])?;
    let mut low = vec![0, 0];
    let mut high = vec![0, 0];
    let mut interior = vec![0, 0];
    for i in 0..s {
        low.push(win.padding[i].0);
        high.push(win.padding[i].1);
        interior.push(win.lhs_dil[i] - 1);
    }
    let xp = cx.pad(x, &zero, &low, &high, &interior)?;
    let padded: Vec<usize> = xp.shape()[2..].to_vec();
    let mut out = Vec::with_capacity(s);
    for i in 0..s {
        let window = (k[i] - 1) * win.rhs_dil[i] + 1;
        if padded[i] < window {
            // No window fits: an empty result, as the convolution gives.
            let mut sh = vec![n, o];
            sh.extend((0..s).map(|j| if j == i { 0 } else { 1 }));
            return splat(cx, 0.0, x.dtype(), &sh);
        }
        out.push((padded[i] - window) / win.stride[i] + 1);
    }
    let mut slice_shape = vec![n, c, 1];
    slice_shape.extend_from_slice(&out);
    let mut cols = Vec::with_capacity(taps);
    for t in 0..taps {
        // Taps in row-major order of the kernel's spatial dims, as `w` flattens them below.
        let mut rest = t;
        let mut start = vec![0; s + 2];
        for i in (0..s).rev() {
            start[2 + i] = (rest % k[i]) * win.rhs_dil[i];
            rest /= k[i];
        }
        let mut limit = vec![n, c];
        let mut strides = vec![1, 1];
        for i in 0..s {
            limit.push(start[2 + i] + (out[i] - 1) * win.stride[i] + 1);
            strides.push(win.stride[i]);
        }
        let tap = cx.slice(&xp, &start, &limit, &strides)?;
        cols.push(cx.reshape(&tap, &slice_shape)?);
    }
    let refs: Vec<&Value> = cols.iter().collect();
    // [N, C, taps, *out]
    let cols = cx.concatenate(&refs, 2)?;
    // One plain GEMM, rows (batch, output position) by columns (channel, tap): XLA CPU runs a
    // dot with several contracting dims far slower (10 ms here for what this does in 0.5).
    let mut perm = vec![0];
    perm.extend(3..s + 3);
    perm.extend([1, 2]);
    let cols = cx.transpose(&cols, &perm)?; // [N, *out, C, taps]
    let positions: usize = out.iter().product();
    let cols = cx.reshape(&cols, &[n * positions, c * taps])?;
    let w2 = cx.reshape(w, &[o, c * taps])?;
    let dd = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contract: vec![1],
        rhs_contract: vec![1],
    };
    let y = cx.dot_general(&cols, &w2, &dd, Precision::Highest)?; // [N * positions, O]
    let mut sh = vec![n];
    sh.extend_from_slice(&out);
    sh.push(o);
    let y = cx.reshape(&y, &sh)?;
    let mut perm = vec![0, s + 1];
    perm.extend(1..s + 1);
    Ok(cx.transpose(&y, &perm)?) // [N, O, *out]
}
