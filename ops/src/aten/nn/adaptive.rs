//! Adaptive average pooling (1-3 spatial dims) and its 2-d backward op, with PyTorch's
//! windows `[floor(o*in/out), ceil((o+1)*in/out))` and its summation orders.

use super::common::*;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, DotDims, Precision, Value};
use tessera_lowering::DType;

/// PyTorch's adaptive windows: `[floor(o*in/out), ceil((o+1)*in/out))`.
fn adaptive_windows(n: usize, out: usize) -> Vec<(usize, usize)> {
    (0..out).map(|o| ((o * n) / out, ((o + 1) * n).div_ceil(out))).collect()
}

fn adaptive_check(x: &Value, sizes: &[i64], n: usize, op: &str) -> LowerResult<Vec<usize>> {
    let r = x.rank();
    if !(r == n + 1 || r == n + 2) {
        return invalid(format!(
            "{op}(): Expected {}D or {}D tensor, but got {}",
            n + 1,
            n + 2,
            shape_str(x.shape())
        ));
    }
    for d in (r - n - 1)..r {
        if x.shape()[d] == 0 {
            return invalid(format!(
                "{op}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {} with dimension {d} being empty",
                shape_str(x.shape())
            ));
        }
    }
    for &s in sizes {
        limit(s, "output_size")?;
    }
    if sizes.len() != n || sizes.iter().any(|&s| s < 0) {
        return invalid(format!(
            "{op}: output_size must be {n} non-negative ints, got {sizes:?}"
        ));
    }
    float_only(x, op)?;
    Ok(sizes.iter().map(|&s| s as usize).collect())
}

fn adaptive_avg(cx: &mut Lower, x: &Value, out: &[usize], op: &str) -> LowerResult<Value> {
    let n = out.len();
    let lead = x.rank() - n;
    let dt = x.dtype();
    let mut oshape = x.shape()[..lead].to_vec();
    oshape.extend_from_slice(out);
    if oshape.contains(&0) {
        return splat(cx, 0.0, dt, &oshape);
    }
    let _ = op;
    let mut cur = up(cx, x)?;
    let mut counts: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        let axis = lead + i;
        let len = x.shape()[axis];
        let win = adaptive_windows(len, out[i]);
        counts.push(win.iter().map(|(s, e)| e - s).collect());
        let l = win.iter().map(|(s, e)| e - s).max().unwrap_or(1);
        let mut idx = Vec::with_capacity(out[i] * l);
        let mut mask = Vec::with_capacity(out[i] * l);
        for &(s, e) in &win {
            for j in 0..l {
                idx.push((s + j).min(e - 1) as i64);
                mask.push(if s + j < e { 1.0 } else { 0.0 });
            }
        }
        let g = take(cx, &cur, axis, &idx)?;
        let mut sh = cur.shape().to_vec();
        sh[axis] = out[i];
        sh.insert(axis + 1, l);
        let g = cx.reshape(&g, &sh)?;
        let g = if mask.iter().all(|&m| m == 1.0) {
            g
        } else {
            let m = host_const(cx, DType::Bool, &[out[i], l], &mask)?;
            let m = bcast(cx, &m, &sh, &[axis, axis + 1])?;
            let z = splat(cx, 0.0, g.dtype(), &sh)?;
            cx.select(&m, &g, &z)?
        };
        cur = if l == 1 {
            cx.reshape(&g, &{
                let mut s2 = sh.clone();
                s2.remove(axis + 1);
                s2
            })?
        } else {
            sum(cx, &g, &[axis + 1], false)?
        };
    }
    let total: usize = out.iter().product();
    let mut div = Vec::with_capacity(total);
    for flat in 0..total {
        let mut r = flat;
        let mut c = 1usize;
        for i in (0..n).rev() {
            c *= counts[i][r % out[i]];
            r /= out[i];
        }
        div.push(c as f64);
    }
    let dv = host_const(cx, cur.dtype(), out, &div)?;
    let dims: Vec<usize> = (lead..lead + n).collect();
    let dv = bcast(cx, &dv, cur.shape(), &dims)?;
    let y = cx.div(&cur, &dv)?;
    cast(cx, &y, dt)
}

/// Adaptive average pooling as PyTorch's 3-d CPU kernel computes it: a running sum in the
/// input dtype over each window (row-major), then divided by each window extent in turn.
/// Returns None when the windows are too large to unroll (the caller then sums in opmath).
fn adaptive_avg_seq(cx: &mut Lower, x: &Value, out: &[usize]) -> LowerResult<Option<Value>> {
    let n = out.len();
    let lead = x.rank() - n;
    let dt = x.dtype();
    let wins: Vec<Vec<(usize, usize)>> = (0..n).map(|i| adaptive_windows(x.shape()[lead + i], out[i])).collect();
    let ls: Vec<usize> = wins
        .iter()
        .map(|w| w.iter().map(|(s, e)| e - s).max().unwrap_or(1))
        .collect();
    let taps: usize = ls.iter().product();
    if taps > 256 || out.contains(&0) {
        return Ok(None);
    }
    // Patches: lead + [O1, L1, O2, L2, ...], masks per dim.
    let mut cur = x.clone();
    let mut masks = Vec::new();
    for i in 0..n {
        let axis = lead + 2 * i;
        let mut idx = Vec::new();
        let mut mask = Vec::new();
        for &(s, e) in &wins[i] {
            for j in 0..ls[i] {
                idx.push((s + j).min(e - 1) as i64);
                mask.push(if s + j < e { 1.0 } else { 0.0 });
            }
        }
        let g = take(cx, &cur, axis, &idx)?;
        let mut sh = cur.shape().to_vec();
        sh[axis] = out[i];
        sh.insert(axis + 1, ls[i]);
        cur = cx.reshape(&g, &sh)?;
        masks.push(mask);
    }
    let rd = Rounding::new(dt);
    let cur = cast(cx, &cur, rd.ct)?;
    let mut oshape = x.shape()[..lead].to_vec();
    oshape.extend_from_slice(out);
    let mut acc = splat(cx, 0.0, rd.ct, &oshape)?;
    let zero = splat(cx, 0.0, rd.ct, &oshape)?;
    let tile = Tile { cur: &cur, lead, oshape: &oshape, zero: &zero };
    for flat in 0..taps {
        let mut r = flat;
        let mut tap = vec![0; n];
        for i in (0..n).rev() {
            tap[i] = r % ls[i];
            r /= ls[i];
        }
        let cols: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..out[i]).map(|o| masks[i][o * ls[i] + tap[i]]).collect())
            .collect();
        acc = tile.add_tap(cx, &rd, &acc, &tap, &cols)?;
    }
    for i in 0..n {
        let ext: Vec<f64> = wins[i].iter().map(|(s, e)| (e - s) as f64).collect();
        let ev = host_const(cx, rd.ct, &[out[i]], &ext)?;
        let ev = bcast_vec(cx, &ev, &oshape, lead + i)?;
        acc = rd.div(cx, &acc, &ev)?;
    }
    Ok(Some(cast(cx, &acc, dt)?))
}

/// The taps of an overlap-add, both directions: `cur` holds every tap at axes `lead + 2i + 1`
/// (one per spatial axis `i`); a tap's slice is reshaped to `oshape`.
struct Tile<'a> {
    cur: &'a Value,
    lead: usize,
    oshape: &'a [usize],
    zero: &'a Value,
}

impl Tile<'_> {
    /// `acc` plus tap `tap`'s slice, zeroed where a per-axis mask `cols[i]` (along axis
    /// `lead + i` of `oshape`) is 0; an all-ones mask costs nothing.
    fn add_tap(
        &self,
        cx: &mut Lower,
        rd: &Rounding,
        acc: &Value,
        tap: &[usize],
        cols: &[Vec<f64>],
    ) -> LowerResult<Value> {
        let pshape = self.cur.shape().to_vec();
        let mut lo = vec![0; pshape.len()];
        let mut hi = pshape.clone();
        for (i, &t) in tap.iter().enumerate() {
            lo[self.lead + 2 * i + 1] = t;
            hi[self.lead + 2 * i + 1] = t + 1;
        }
        let sl = cx.slice(self.cur, &lo, &hi, &vec![1; pshape.len()])?;
        let sl = cx.reshape(&sl, self.oshape)?;
        let mut m: Option<Value> = None;
        for (i, col) in cols.iter().enumerate() {
            if col.iter().all(|&v| v == 1.0) {
                continue;
            }
            let mv = host_const(cx, DType::Bool, &[col.len()], col)?;
            let mv = bcast_vec(cx, &mv, self.oshape, self.lead + i)?;
            m = Some(match m {
                None => mv,
                Some(p) => cx.binary(BinaryOp::And, &p, &mv)?,
            });
        }
        let sl = match m {
            Some(m) => cx.select(&m, &sl, self.zero)?,
            None => sl,
        };
        rd.add(cx, acc, &sl)
    }
}

fn adaptive(cx: &mut Lower, a: &Args, n: usize, op: &str) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let sizes = a.int_list("output_size")?;
    let sizes = if sizes.len() == 1 && n > 1 {
        vec![sizes[0]; n]
    } else {
        sizes
    };
    let out = adaptive_check(&x, &sizes, n, op)?;
    if n == 3 {
        if let Some(y) = adaptive_avg_seq(cx, &x, &out)? {
            return Ok(vec![Out::Tensor(y)]);
        }
    }
    Ok(vec![Out::Tensor(adaptive_avg(cx, &x, &out, op)?)])
}

pub(crate) fn adaptive_avg_pool1d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    adaptive(cx, a, 1, "adaptive_avg_pool1d")
}

pub(crate) fn adaptive_avg_pool2d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    adaptive(cx, a, 2, "adaptive_avg_pool2d")
}

pub(crate) fn adaptive_avg_pool3d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    adaptive(cx, a, 3, "adaptive_avg_pool3d")
}

pub(crate) fn adaptive_avg_pool2d_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let op = "adaptive_avg_pool2d_backward";
    let gy = a.tensor("grad_output")?;
    let x = a.tensor("self")?;
    let n = 2;
    if gy.rank() != x.rank() || x.rank() < 3 || gy.shape()[..x.rank() - n] != x.shape()[..x.rank() - n] {
        return invalid(format!(
            "{op}: grad_output {} does not match input {}",
            shape_str(gy.shape()),
            shape_str(x.shape())
        ));
    }
    float_only(&x, op)?;
    if gy.dtype() != x.dtype() {
        return invalid(format!(
            "expected dtype {} for `grad_output` but got dtype {}",
            x.dtype(),
            gy.dtype()
        ));
    }
    let dt = x.dtype();
    let lead = x.rank() - n;
    let out: Vec<usize> = gy.shape()[lead..].to_vec();
    if x.shape().contains(&0) || gy.shape().contains(&0) {
        return Ok(vec![Out::Tensor(splat(cx, 0.0, dt, x.shape())?)]);
    }
    let ins: Vec<usize> = x.shape()[lead..].to_vec();
    let wins: Vec<Vec<(usize, usize)>> = (0..n).map(|i| adaptive_windows(ins[i], out[i])).collect();
    // PyTorch: delta = grad / kh / kw, added into each input of the window, in the dtype,
    // windows in row-major order.
    let rd = Rounding::new(dt);
    let mut gd = up(cx, &gy)?;
    for i in 0..n {
        let ext: Vec<f64> = wins[i].iter().map(|(s, e)| (e - s) as f64).collect();
        let ev = host_const(cx, rd.ct, &[out[i]], &ext)?;
        let ev = bcast_vec(cx, &ev, gd.shape(), lead + i)?;
        gd = rd.div(cx, &gd, &ev)?;
    }
    // The windows covering each input position, per dim (ascending).
    let covers: Vec<Vec<Vec<usize>>> = (0..n)
        .map(|i| {
            (0..ins[i])
                .map(|h| (0..out[i]).filter(|&o| wins[i][o].0 <= h && h < wins[i][o].1).collect())
                .collect()
        })
        .collect();
    let ks: Vec<usize> = covers
        .iter()
        .map(|c| c.iter().map(|v| v.len()).max().unwrap_or(1).max(1))
        .collect();
    let taps: usize = ks.iter().product();
    if taps > 256 {
        return adaptive_backward_dot(cx, &gd, &x, &wins, &out, lead, dt);
    }
    // Contributions: lead + [I1, K1, I2, K2].
    let mut cur = gd.clone();
    for i in 0..n {
        let axis = lead + 2 * i;
        let mut idx = Vec::new();
        for c in &covers[i] {
            for j in 0..ks[i] {
                idx.push(*c.get(j).or(c.last()).unwrap_or(&0) as i64);
            }
        }
        let g = take(cx, &cur, axis, &idx)?;
        let mut sh = cur.shape().to_vec();
        sh[axis] = ins[i];
        sh.insert(axis + 1, ks[i]);
        cur = cx.reshape(&g, &sh)?;
    }
    let oshape = x.shape().to_vec();
    let zero = splat(cx, 0.0, rd.ct, &oshape)?;
    let mut acc = zero.clone();
    let tile = Tile { cur: &cur, lead, oshape: &oshape, zero: &zero };
    for flat in 0..taps {
        let tap = [flat / ks[1], flat % ks[1]];
        let cols: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                covers[i]
                    .iter()
                    .map(|c| if tap[i] < c.len() { 1.0 } else { 0.0 })
                    .collect()
            })
            .collect();
        acc = tile.add_tap(cx, &rd, &acc, &tap, &cols)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &acc, dt)?)])
}

/// The adaptive-pool gradient as matrix products (for windows too many to unroll).
fn adaptive_backward_dot(
    cx: &mut Lower,
    gd: &Value,
    x: &Value,
    wins: &[Vec<(usize, usize)>],
    out: &[usize],
    lead: usize,
    dt: DType,
) -> LowerResult<Vec<Out>> {
    let ct = gd.dtype();
    let mut cur = gd.clone();
    for i in 0..out.len() {
        let len = x.shape()[lead + i];
        let mut m = vec![0.0; out[i] * len];
        for (o, &(s, e)) in wins[i].iter().enumerate() {
            for j in s..e {
                m[o * len + j] = 1.0;
            }
        }
        let mv = host_const(cx, ct, &[out[i], len], &m)?;
        let dd = DotDims {
            lhs_batch: vec![],
            rhs_batch: vec![],
            lhs_contract: vec![lead],
            rhs_contract: vec![0],
        };
        cur = cx.dot_general(&cur, &mv, &dd, Precision::Highest)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &cur, dt)?)])
}
