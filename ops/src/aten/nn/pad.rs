//! Reflection and replication padding (1-3 spatial dims; negative padding crops), as static
//! gathers along each padded dim.

use super::common::*;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::DType;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Reflect,
    Replicate,
}

/// The source index of each output position of a dim of size `n` padded by `(lo, hi)`.
pub(crate) fn source_indices(n: i64, lo: i64, hi: i64, mode: Mode) -> Vec<i64> {
    (-lo..n + hi)
        .map(|j| match mode {
            Mode::Replicate => j.clamp(0, n - 1),
            Mode::Reflect => {
                if n == 1 {
                    0
                } else {
                    let period = 2 * (n - 1);
                    let m = j.rem_euclid(period);
                    if m < n {
                        m
                    } else {
                        period - m
                    }
                }
            }
        })
        .collect()
}

pub(crate) fn pad(cx: &mut Lower, a: &Args, n: usize, mode: Mode) -> LowerResult<Vec<Out>> {
    let name = match mode {
        Mode::Reflect => format!("reflection_pad{n}d"),
        Mode::Replicate => format!("replication_pad{n}d"),
    };
    let x = a.tensor("self")?;
    let p = a.int_list("padding")?;
    if p.len() != 2 * n {
        return invalid(format!(
            "padding size is expected to be {}, but got: {}",
            2 * n,
            p.len()
        ));
    }
    dtype_check(x.dtype() != DType::Bool, x.dtype(), &name)?;
    let r = x.rank();
    let ok =
        (r == n + 1 && x.shape().iter().all(|&v| v != 0)) || (r == n + 2 && x.shape()[1..].iter().all(|&v| v != 0));
    if !ok {
        return invalid(format!(
            "Expected {}D or {}D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: {}",
            n + 1,
            n + 2,
            shape_str(x.shape())
        ));
    }
    let mut y = x.clone();
    let mut out_shape = x.shape().to_vec();
    for i in 0..n {
        // padding lists the last dim first.
        let (lo, hi) = (p[2 * i], p[2 * i + 1]);
        let axis = r - 1 - i;
        let len = x.shape()[axis] as i64;
        if mode == Mode::Reflect && (lo >= len || hi >= len) {
            return invalid(format!(
                "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({lo}, {hi}) at dimension {axis} of input {}",
                shape_str(x.shape())
            ));
        }
        limit(lo, "padding")?;
        limit(hi, "padding")?;
        let out = len + lo + hi;
        limit(out, "the padded size")?;
        if out < 1 {
            return invalid(format!(
                "input (size {len} at dimension {axis}) is too small. Calculated output size: {out}"
            ));
        }
        out_shape[axis] = out as usize;
    }
    if out_shape.contains(&0) {
        return Ok(vec![Out::Tensor(splat(cx, 0.0, x.dtype(), &out_shape)?)]);
    }
    for i in 0..n {
        let (lo, hi) = (p[2 * i], p[2 * i + 1]);
        if lo == 0 && hi == 0 {
            continue;
        }
        let axis = r - 1 - i;
        let idx = source_indices(x.shape()[axis] as i64, lo, hi, mode);
        y = take(cx, &y, axis, &idx)?;
    }
    Ok(vec![Out::Tensor(y)])
}
