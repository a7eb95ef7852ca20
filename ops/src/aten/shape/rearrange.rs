//! Rearranging shape ops (copies here, views in PyTorch): squeeze (all dims), flatten,
//! unflatten, movedim, view_as, expand_as, tile, fliplr/flipud, rot90, ravel, unfold,
//! pixel_shuffle/pixel_unshuffle.

use super::common::*;
use super::misc::repeat_value;
use super::views::{infer_size, swap_dims};
use crate::args::Args;
use crate::aten::util::wrap_dim;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::Value;

/// `squeeze(self)`: every size-1 dim dropped.
pub(super) fn squeeze_all(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let shape: Vec<usize> = x.shape().iter().copied().filter(|&s| s != 1).collect();
    one(cx.reshape(&x, &shape)?)
}

/// `flatten.using_ints(self, start_dim=0, end_dim=-1)`: a rank-0 tensor becomes `[1]`.
pub(super) fn flatten(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let s = wrap_dim(a.int("start_dim")?, x.rank())?;
    let e = wrap_dim(a.int("end_dim")?, x.rank())?;
    if s > e {
        return Err(LowerError::invalid(
            "flatten() has invalid args: start_dim cannot come after end_dim",
        ));
    }
    if x.rank() == 0 {
        return one(cx.reshape(&x, &[1])?);
    }
    let mut shape = x.shape()[..s].to_vec();
    shape.push(x.shape()[s..=e].iter().product());
    shape.extend_from_slice(&x.shape()[e + 1..]);
    one(cx.reshape(&x, &shape)?)
}

/// `unflatten.int(self, dim, sizes)`: dim `dim` split into `sizes` (one may be -1).
pub(super) fn unflatten(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim_nonscalar(a.int("dim")?, x.rank(), "unflatten")?;
    let sizes = a.int_list("sizes")?;
    if sizes.is_empty() {
        return Err(LowerError::invalid("unflatten: sizes must be non-empty"));
    }
    let inner = infer_size(&sizes, x.shape()[d]).map_err(|_| {
        LowerError::invalid(format!(
            "unflatten: Provided sizes {sizes:?} don't multiply up to the size of dim {} ({}) in the input tensor",
            a.int("dim").unwrap_or(0),
            x.shape()[d]
        ))
    })?;
    let mut shape = x.shape()[..d].to_vec();
    shape.extend(inner);
    shape.extend_from_slice(&x.shape()[d + 1..]);
    one(cx.reshape(&x, &shape)?)
}

/// `movedim.int` / `movedim.intlist(self, source, destination)`.
pub(super) fn movedim(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let src = a.int_list("source")?;
    let dst = a.int_list("destination")?;
    if src.len() != dst.len() {
        return Err(LowerError::invalid(format!(
            "movedim: Invalid source or destination dims: source ({src:?} dims) should contain the same number of dims as destination ({dst:?} dims)"
        )));
    }
    let r = x.rank();
    let wrap = |v: &[i64], what: &str| -> LowerResult<Vec<usize>> {
        let mut out = Vec::new();
        for &d in v {
            let w = wrap_dim(d, r)?;
            if out.contains(&w) {
                return Err(LowerError::invalid(format!(
                    "movedim: repeated dim in `{what}` ({v:?})"
                )));
            }
            out.push(w);
        }
        Ok(out)
    };
    let (src, dst) = (wrap(&src, "source")?, wrap(&dst, "destination")?);
    if r == 0 {
        return one(x);
    }
    let mut perm = vec![usize::MAX; r];
    for (&s, &d) in src.iter().zip(&dst) {
        perm[d] = s;
    }
    let mut rest = (0..r).filter(|d| !src.contains(d));
    for p in perm.iter_mut().filter(|p| **p == usize::MAX) {
        *p = rest.next().expect("as many free dims as free slots");
    }
    one(cx.transpose(&x, &perm)?)
}

/// `swapaxes(self, axis0, axis1)`.
pub(super) fn swapaxes(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d0 = wrap_dim(a.int("axis0")?, x.rank())?;
    let d1 = wrap_dim(a.int("axis1")?, x.rank())?;
    one(swap_dims(cx, &x, d0, d1)?)
}

/// `view_as(self, other)`.
pub(super) fn view_as(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let o = a.tensor("other")?;
    let size: Vec<i64> = o.shape().iter().map(|&s| s as i64).collect();
    let shape = infer_size(&size, x.ty().num_elements())?;
    one(cx.reshape(&x, &shape)?)
}

/// `expand_as(self, other)`: `self` broadcast to `other`'s shape.
pub(super) fn expand_as(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let o = a.tensor("other")?;
    let (r, n) = (x.rank(), o.rank());
    let ok = r <= n
        && x.shape()
            .iter()
            .zip(&o.shape()[n - r.min(n)..])
            .all(|(&s, &t)| s == t || s == 1);
    if !ok {
        return Err(LowerError::invalid(format!(
            "The expanded size of the tensor must match the existing size at non-singleton dimensions. Target sizes: {:?}. Tensor sizes: {:?}",
            o.shape(),
            x.shape()
        )));
    }
    one(cx.broadcast_to(&x, o.shape())?)
}

/// `tile(self, dims)`: `repeat` with `dims` padded with leading 1s to the rank.
pub(super) fn tile(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = a.int_list("dims")?;
    let mut reps = vec![1i64; x.rank().saturating_sub(dims.len())];
    reps.extend(dims);
    one(repeat_value(cx, &x, &reps)?)
}

/// `fliplr` (dim 1, rank >= 2) and `flipud` (dim 0, rank >= 1).
pub(super) fn flip_lr_ud(cx: &mut Lower, a: &Args, lr: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let (dim, need) = if lr { (1, 2) } else { (0, 1) };
    if x.rank() < need {
        return Err(LowerError::invalid(format!("Input must be >= {need}-d.")));
    }
    one(cx.reverse(&x, &[dim])?)
}

/// `rot90(self, k=1, dims=[0, 1])`: `k` quarter turns from `dims[0]` towards `dims[1]`.
pub(super) fn rot90(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = a.int_list("dims")?;
    if dims.len() != 2 {
        return Err(LowerError::invalid(format!(
            "expected total rotation dims == 2, but got dims = {}",
            dims.len()
        )));
    }
    if x.rank() < 2 {
        return Err(LowerError::invalid(format!(
            "expected total dims >= 2, but got total dims = {}",
            x.rank()
        )));
    }
    let d0 = wrap_dim(dims[0], x.rank())?;
    let d1 = wrap_dim(dims[1], x.rank())?;
    if d0 == d1 {
        return Err(LowerError::invalid(format!(
            "expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}"
        )));
    }
    let y = match a.int("k")?.rem_euclid(4) {
        1 => {
            let f = cx.reverse(&x, &[d1])?;
            swap_dims(cx, &f, d0, d1)?
        }
        2 => cx.reverse(&x, &[d0, d1])?,
        3 => {
            let f = cx.reverse(&x, &[d0])?;
            swap_dims(cx, &f, d0, d1)?
        }
        _ => x,
    };
    one(y)
}

/// `ravel(self)`: the elements as one dim.
pub(super) fn ravel(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    one(cx.reshape(&x, &[x.ty().num_elements()])?)
}

/// `unfold(self, dimension, size, step)`: windows of `size` every `step` along `dimension`,
/// the window as a new last dim.
pub(super) fn unfold(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let scalar = x.rank() == 0;
    let x: Value = if scalar { cx.reshape(&x, &[1])? } else { x };
    let d = wrap_dim(a.int("dimension")?, x.rank())?;
    let (size, step) = (a.int("size")?, a.int("step")?);
    let n = x.shape()[d] as i64;
    if size > n {
        return Err(LowerError::invalid(format!(
            "maximum size for tensor at dimension {d} is {n} but size is {size}"
        )));
    }
    if size < 0 {
        return Err(LowerError::invalid(format!(
            "size is {size} but must be >= 0"
        )));
    }
    if step <= 0 {
        return Err(LowerError::invalid(format!(
            "step is {step} but must be > 0"
        )));
    }
    let windows = ((n - size) / step + 1) as usize;
    let mut shape = x.shape().to_vec();
    shape[d] = windows;
    shape.push(size as usize);
    let last = shape.len() - 1;
    let mut comps = Vec::with_capacity(x.rank());
    for j in 0..x.rank() {
        let io = iota(cx, &shape, j)?;
        if j == d {
            let st = i64_full(cx, &shape, step)?;
            let w = cx.mul(&io, &st)?;
            let k = iota(cx, &shape, last)?;
            comps.push(cx.add(&w, &k)?);
        } else {
            comps.push(io);
        }
    }
    let r = gather_points(cx, &x, &comps, &shape)?;
    // A rank-0 input gives just the window.
    one(if scalar {
        cx.reshape(&r, &[size as usize])?
    } else {
        r
    })
}

/// `pixel_shuffle(self, upscale_factor)`: `[*, C r^2, H, W] -> [*, C, H r, W r]`;
/// `pixel_unshuffle(self, downscale_factor)` is its inverse.
pub(super) fn pixel_shuffle(cx: &mut Lower, a: &Args, up: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let r = a.int(if up {
        "upscale_factor"
    } else {
        "downscale_factor"
    })?;
    let name = if up {
        "pixel_shuffle"
    } else {
        "pixel_unshuffle"
    };
    if x.rank() < 3 {
        return Err(LowerError::invalid(format!(
            "{name} expects input to have at least 3 dimensions, but got input with {} dimension(s)",
            x.rank()
        )));
    }
    if r <= 0 {
        return Err(LowerError::invalid(format!(
            "{name} expects {} to be greater than 0, but got: {r}",
            if up {
                "upscale_factor"
            } else {
                "downscale_factor"
            }
        )));
    }
    let r = r as usize;
    let n = x.rank();
    let (c, h, w) = (x.shape()[n - 3], x.shape()[n - 2], x.shape()[n - 1]);
    let lead = x.shape()[..n - 3].to_vec();
    let b = lead.len();
    let with = |tail: &[usize]| -> Vec<usize> { lead.iter().chain(tail).copied().collect() };
    let shifted = |p: &[usize]| -> Vec<usize> { (0..b).chain(p.iter().map(|&d| d + b)).collect() };
    let y = if up {
        if c % (r * r) != 0 {
            return Err(LowerError::invalid(format!(
                "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={c} is not divisible by {}",
                r * r
            )));
        }
        let oc = c / (r * r);
        let t = cx.reshape(&x, &with(&[oc, r, r, h, w]))?;
        let t = cx.transpose(&t, &shifted(&[0, 3, 1, 4, 2]))?;
        cx.reshape(&t, &with(&[oc, h * r, w * r]))?
    } else {
        if h % r != 0 || w % r != 0 {
            return Err(LowerError::invalid(format!(
                "pixel_unshuffle expects height and width to be divisible by downscale_factor, but got {h} and {w} for downscale_factor={r}"
            )));
        }
        let t = cx.reshape(&x, &with(&[c, h / r, r, w / r, r]))?;
        let t = cx.transpose(&t, &shifted(&[0, 2, 4, 1, 3]))?;
        cx.reshape(&t, &with(&[c * r * r, h / r, w / r]))?
    };
    one(y)
}
