//! Overlap-add ("fold"): `col2im`, and the helper the transposed convolution and the
//! average-pool gradient share.

use super::common::*;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::Value;

/// Overlap-add over the last `kernel.len()` dims: the sum, over every kernel offset `o`
/// (row-major, or its reverse), of `part(o)` (shape `lead + windows`) spread into a zero tensor of
/// `lead + padded` at positions `o * dil + j * stride`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fold_add(
    cx: &mut Lower,
    lead: &[usize],
    windows: &[usize],
    kernel: &[usize],
    stride: &[usize],
    dil: &[usize],
    padded: &[usize],
    dtype: tessera_lowering::DType,
    rd: Option<&Rounding>,
    reverse: bool,
    part: &mut dyn FnMut(&mut Lower, &[usize]) -> LowerResult<Value>,
) -> LowerResult<Value> {
    let mut shape = lead.to_vec();
    shape.extend_from_slice(padded);
    let mut acc: Option<Value> = None;
    let n: usize = kernel.iter().product();
    if windows.contains(&0) || lead.contains(&0) || n == 0 {
        return splat(cx, 0.0, dtype, &shape);
    }
    if n > MAX_TAPS {
        return Err(crate::error::LowerError::Unsupported(format!(
            "an overlap-add over a kernel of {kernel:?} ({n} taps, at most {MAX_TAPS})"
        )));
    }
    let zero = splat(cx, 0.0, dtype, &[])?;
    for step in 0..n {
        let flat = if reverse { n - 1 - step } else { step };
        let mut o = vec![0; kernel.len()];
        let mut r = flat;
        for i in (0..kernel.len()).rev() {
            o[i] = r % kernel[i];
            r /= kernel[i];
        }
        let v = part(cx, &o)?;
        let mut lo = vec![0i64; lead.len()];
        let mut hi = vec![0i64; lead.len()];
        let mut interior = vec![0usize; lead.len()];
        for i in 0..kernel.len() {
            let l = (o[i] * dil[i]) as i64;
            let end = l + ((windows[i] - 1) * stride[i]) as i64 + 1;
            lo.push(l);
            hi.push(padded[i] as i64 - end);
            interior.push(stride[i] - 1);
        }
        let p = cx.pad(&v, &zero, &lo, &hi, &interior)?;
        acc = Some(match (acc, rd) {
            (None, _) => p,
            (Some(a), Some(rd)) => rd.add(cx, &a, &p)?,
            (Some(a), None) => cx.add(&a, &p)?,
        });
    }
    match acc {
        Some(a) => Ok(a),
        None => splat(cx, 0.0, dtype, &shape),
    }
}

pub(crate) fn col2im(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut x = a.tensor("self")?;
    let out_size = int_list_n(a, "output_size", 2, "col2im")?;
    let k = int_list_n(a, "kernel_size", 2, "col2im")?;
    let d = int_list_n(a, "dilation", 2, "col2im")?;
    let p = int_list_n(a, "padding", 2, "col2im")?;
    let s = int_list_n(a, "stride", 2, "col2im")?;
    float_only(&x, "col2im")?;
    for &v in out_size.iter().chain(&k).chain(&d).chain(&p).chain(&s) {
        limit(v, "a col2im parameter")?;
    }
    if k.iter().any(|&v| v <= 0) {
        return invalid(format!(
            "kernel size should be greater than zero, but got kernel_height: {} kernel_width: {}",
            k[0], k[1]
        ));
    }
    if s.iter().any(|&v| v <= 0) {
        return invalid(format!(
            "stride should be greater than zero, but got stride_height: {} stride_width: {}",
            s[0], s[1]
        ));
    }
    if d.iter().any(|&v| v <= 0) {
        return invalid(format!(
            "dilation should be greater than zero, but got dilation_height: {} dilation_width: {}",
            d[0], d[1]
        ));
    }
    if p.iter().any(|&v| v < 0) {
        return invalid(format!(
            "padding should be non-negative, but got pad_height: {} pad_width: {}",
            p[0], p[1]
        ));
    }
    if out_size.iter().any(|&v| v < 1) {
        return invalid(format!(
            "Expected output spatial size to be positive, but got: output_size={out_size:?}"
        ));
    }
    let batched = x.rank() == 3;
    let nonzero = x.shape().iter().skip(if batched { 1 } else { 0 }).all(|&v| v != 0);
    if !(x.rank() == 2 || x.rank() == 3) || !nonzero {
        return invalid(format!(
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {}",
            shape_str(x.shape())
        ));
    }
    if !batched {
        x = unsqueeze0(cx, &x)?;
    }
    let (n, cols, l) = (x.shape()[0], x.shape()[1] as i64, x.shape()[2] as i64);
    let kk = k[0] * k[1];
    if cols % kk != 0 {
        return invalid(format!(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={cols} and kernel_size=({}, {})",
            k[0], k[1]
        ));
    }
    let blocks: Vec<i64> = (0..2)
        .map(|i| (out_size[i] + 2 * p[i] - (d[i] * (k[i] - 1) + 1)) / s[i] + 1)
        .collect();
    if blocks.iter().any(|&b| b < 1) || blocks[0] * blocks[1] != l {
        return invalid(format!(
            "Given output_size=({}, {}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), stride=({}, {}), expected size of input's dimension 2 to match the calculated number of sliding blocks {} * {} = {}, but got input.size(2)={l}.",
            out_size[0], out_size[1], k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], blocks[0], blocks[1], blocks[0] * blocks[1]
        ));
    }
    let c = (cols / kk) as usize;
    let dt = x.dtype();
    let xc = up(cx, &x)?;
    let (bh, bw) = (blocks[0] as usize, blocks[1] as usize);
    let (kh, kw) = (k[0] as usize, k[1] as usize);
    let x6 = cx.reshape(&xc, &[n, c, kh, kw, bh, bw])?;
    let padded: Vec<usize> = (0..2).map(|i| (out_size[i] + 2 * p[i]) as usize).collect();
    let su: Vec<usize> = s.iter().map(|&v| v as usize).collect();
    let du: Vec<usize> = d.iter().map(|&v| v as usize).collect();
    let ku = [kh, kw];
    let mut part = |cx: &mut Lower, o: &[usize]| -> LowerResult<Value> {
        let sl = cx.slice(
            &x6,
            &[0, 0, o[0], o[1], 0, 0],
            &[n, c, o[0] + 1, o[1] + 1, bh, bw],
            &[1; 6],
        )?;
        Ok(cx.reshape(&sl, &[n, c, bh, bw])?)
    };
    let rd = Rounding::new(dt);
    let full = fold_add(
        cx,
        &[n, c],
        &[bh, bw],
        &ku,
        &su,
        &du,
        &padded,
        rd.ct,
        Some(&rd),
        false,
        &mut part,
    )?;
    let (h, w) = (out_size[0] as usize, out_size[1] as usize);
    let (ph, pw) = (p[0] as usize, p[1] as usize);
    let y = cx.slice(&full, &[0, 0, ph, pw], &[n, c, ph + h, pw + w], &[1; 4])?;
    let mut y = cast(cx, &y, dt)?;
    if !batched {
        y = squeeze0(cx, &y)?;
    }
    Ok(vec![Out::Tensor(y)])
}
