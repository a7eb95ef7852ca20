//! A convolution as one GEMM over its kernel taps (im2col), for the shapes where XLA's own
//! convolution is pathological.
//!
//! XLA's algebraic simplifier swaps a convolution's operands when the kernel's spatial product
//! exceeds the input's (and there is one feature group), and XLA CPU runs the swapped form on
//! its naive loop emitter. Measured with jax.jit on this machine (f32, NCHW, 512 -> 512
//! channels, batch 2, 3x3 kernel, padding 1): a 2x2 input 23.7 ms, 2x4 52.9 ms, 1x1 4.4 ms,
//! against 2.8-3.5 ms for the unswapped 3x3, 2x5 and 4x4 inputs (torch: 0.64 ms for 2x2).
//! That is ResNet's last stage on 64x64 images (forward and input gradient; a weight
//! gradient under heavy padding too).

use super::common::*;
use crate::error::LowerResult;
use crate::lower::Lower;
use tessera_lowering::stablehlo::{ConvDims, ConvOptions, DotDims, Value};

/// StableHLO's `convolution` of `x` by `w`, emitted as one GEMM over the kernel taps where
/// XLA would swap its operands (one feature and one batch group, the kernel's spatial product
/// above the input's), else as a `stablehlo.convolution`. The convolutions of the forward,
/// the input gradient and the weight gradient all go through here.
pub(crate) fn convolution(
    cx: &mut Lower,
    x: &Value,
    w: &Value,
    dims: &ConvDims,
    o: &ConvOptions,
) -> LowerResult<Value> {
    let size = |v: &Value, at: &[usize]| at.iter().map(|&d| v.shape()[d]).product::<usize>();
    let taps = size(w, &dims.kernel_spatial);
    let swapped = o.feature_group_count == 1
        && o.batch_group_count == 1
        && taps <= MAX_TAPS
        && taps > size(x, &dims.input_spatial);
    if !swapped {
        return Ok(cx.convolution(x, w, dims, o)?);
    }
    // To [N, C, *in] and [O, C, *k], and the result from [N, O, *out] to `dims`' order.
    let mut to_nchw = vec![dims.input_batch, dims.input_feature];
    to_nchw.extend(&dims.input_spatial);
    let mut to_oihw = vec![dims.kernel_output_feature, dims.kernel_input_feature];
    to_oihw.extend(&dims.kernel_spatial);
    let mut from_nchw = vec![0; x.rank()];
    from_nchw[dims.output_batch] = 0;
    from_nchw[dims.output_feature] = 1;
    for (i, &d) in dims.output_spatial.iter().enumerate() {
        from_nchw[d] = 2 + i;
    }
    let xc = permuted(cx, x, &to_nchw)?;
    let wc = permuted(cx, w, &to_oihw)?;
    let y = conv_by_taps(cx, &xc, &wc, o)?;
    permuted(cx, &y, &from_nchw)
}

/// `x` transposed by `perm`, or `x` itself where `perm` keeps every dim in place.
fn permuted(cx: &mut Lower, x: &Value, perm: &[usize]) -> LowerResult<Value> {
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(x.clone());
    }
    Ok(cx.transpose(x, perm)?)
}

/// `x [N, C, *in]` (*) `w [O, C, *k]` -> `[N, O, *out]` as StableHLO's convolution with
/// options `o` computes it (one group): the input padded (and dilated), one strided slice per
/// kernel tap, stacked, then one GEMM with the weight.
fn conv_by_taps(cx: &mut Lower, x: &Value, w: &Value, o: &ConvOptions) -> LowerResult<Value> {
    let s = x.rank() - 2;
    let (n, c, oc) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    let k: Vec<usize> = w.shape()[2..].to_vec();
    let taps: usize = k.iter().product();
    let zero = splat(cx, 0.0, x.dtype(), &[])?;
    let mut low = vec![0, 0];
    let mut high = vec![0, 0];
    let mut interior = vec![0, 0];
    for i in 0..s {
        low.push(o.padding[i].0);
        high.push(o.padding[i].1);
        interior.push(o.lhs_dilation[i] - 1);
    }
    let xp = cx.pad(x, &zero, &low, &high, &interior)?;
    let padded: Vec<usize> = xp.shape()[2..].to_vec();
    let mut out = Vec::with_capacity(s);
    for i in 0..s {
        let window = (k[i] - 1) * o.rhs_dilation[i] + 1;
        if padded[i] < window {
            // No window fits: an empty result, as the convolution gives.
            let mut sh = vec![n, oc];
            sh.extend((0..s).map(|j| if j == i { 0 } else { 1 }));
            return splat(cx, 0.0, x.dtype(), &sh);
        }
        out.push((padded[i] - window) / o.window_strides[i] + 1);
    }
    let mut slice_shape = vec![n, c, 1];
    slice_shape.extend_from_slice(&out);
    let mut cols = Vec::with_capacity(taps);
    for t in 0..taps {
        // Taps in row-major order of the kernel's spatial dims, as `w` flattens them below.
        let mut rest = t;
        let mut start = vec![0; s + 2];
        for i in (0..s).rev() {
            start[2 + i] = (rest % k[i]) * o.rhs_dilation[i];
            rest /= k[i];
        }
        let mut limit = vec![n, c];
        let mut strides = vec![1, 1];
        for i in 0..s {
            limit.push(start[2 + i] + (out[i] - 1) * o.window_strides[i] + 1);
            strides.push(o.window_strides[i]);
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
    let w2 = cx.reshape(w, &[oc, c * taps])?;
    let dd = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contract: vec![1],
        rhs_contract: vec![1],
    };
    let y = cx.dot_general(&cols, &w2, &dd, o.precision)?; // [N * positions, O]
    let mut sh = vec![n];
    sh.extend_from_slice(&out);
    sh.push(oc);
    let y = cx.reshape(&y, &sh)?;
    let mut perm = vec![0, s + 1];
    perm.extend(1..s + 1);
    Ok(cx.transpose(&y, &perm)?) // [N, O, *out]
}
