//! Pooling: average and max pools (ceil_mode, padding, dilation, count_include_pad,
//! divisor_override) and their backward ops.
//!
//! Max pools return, like PyTorch, the flat offset of the maximum within its input plane;
//! ties go to the first element of the window, NaN wins (the last NaN of the window).

use super::common::*;
use super::fold::fold_add;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, ScatterDims, TensorType, UnaryOp, Value, Window};
use tessera_lowering::DType;

/// Window geometry per spatial dim, checked, with the output sizes.
struct Geom {
    k: Vec<usize>,
    s: Vec<usize>,
    p: Vec<usize>,
    d: Vec<usize>,
    ins: Vec<usize>,
    out: Vec<usize>,
    /// Leading (batch, channel) dims.
    lead: usize,
}

/// PyTorch's `pooling_output_shape`.
fn pool_out(n: i64, k: i64, p: i64, s: i64, d: i64, ceil: bool) -> i64 {
    let num = n + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut o = div_floor(num, s) + 1;
    if ceil && (o - 1) * s >= n + p {
        o -= 1;
    }
    o
}

fn list(a: &Args, name: &str, n: usize, op: &str, what: &str) -> LowerResult<Vec<i64>> {
    let v = a.int_list(name)?;
    match v.len() {
        l if l == n => Ok(v),
        1 => Ok(vec![v[0]; n]),
        _ => invalid(format!("{op}: {name} must {what}")),
    }
}

fn ints_word(n: usize) -> &'static str {
    match n {
        1 => "one int",
        2 => "two ints",
        _ => "three ints",
    }
}

/// Reads and checks kernel_size/stride/padding/(dilation) for an `n`-d pool of `x`.
fn geometry(a: &Args, x: &Value, n: usize, op: &str, has_dilation: bool, ceil: bool) -> LowerResult<Geom> {
    let w = ints_word(n);
    let k = list(
        a,
        "kernel_size",
        n,
        op,
        &format!("either be a single int, or a tuple of {w}"),
    )?;
    let s = match a.int_list("stride")? {
        v if v.is_empty() => k.clone(),
        _ => list(
            a,
            "stride",
            n,
            op,
            &format!("either be omitted, a single int, or a tuple of {w}"),
        )?,
    };
    let p = list(
        a,
        "padding",
        n,
        op,
        &format!("either be a single int, or a tuple of {w}"),
    )?;
    let d = if has_dilation {
        list(
            a,
            "dilation",
            n,
            op,
            &format!("either be a single int, or a tuple of {w}"),
        )?
    } else {
        vec![1; n]
    };
    check_input(x, n, op)?;
    for &v in k.iter().chain(&s).chain(&p).chain(&d) {
        limit(v, "a pooling window parameter")?;
    }
    if k.iter().any(|&v| v <= 0) {
        return invalid(format!(
            "kernel size should be greater than zero, but got kernel_size={k:?}"
        ));
    }
    if s.iter().any(|&v| v <= 0) {
        return invalid(format!("stride should be greater than zero, but got stride={s:?}"));
    }
    if d.iter().any(|&v| v <= 0) {
        return invalid(format!("dilation should be greater than zero, but got dilation={d:?}"));
    }
    if p.iter().any(|&v| v < 0) {
        return invalid(format!("pad must be non-negative, but got pad={p:?}"));
    }
    for i in 0..n {
        if p[i] > ((k[i] - 1) * d[i] + 1) / 2 {
            return invalid(format!(
                "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                p[i], k[i], d[i]
            ));
        }
    }
    let lead = x.rank() - n;
    let ins: Vec<usize> = x.shape()[lead..].to_vec();
    let out: Vec<i64> = (0..n)
        .map(|i| pool_out(ins[i] as i64, k[i], p[i], s[i], d[i], ceil))
        .collect();
    if out.iter().any(|&o| o < 1) {
        return invalid(format!(
            "Given input size: ({}). Calculated output size: ({}). Output size is too small",
            x.shape()[lead.saturating_sub(1)..]
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            x.shape()[lead.saturating_sub(1)..lead]
                .iter()
                .map(|v| *v as i64)
                .chain(out.iter().copied())
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("x")
        ));
    }
    let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    Ok(Geom {
        k: u(&k),
        s: u(&s),
        p: u(&p),
        d: u(&d),
        ins,
        out: u(&out),
        lead,
    })
}

/// `x` must be `[C, *spatial]` or `[N, C, *spatial]` with non-empty non-batch dims.
fn check_input(x: &Value, n: usize, op: &str) -> LowerResult<()> {
    let r = x.rank();
    let ok = (r == n + 1 || r == n + 2) && x.shape()[r - n - 1..].iter().all(|&v| v > 0);
    if !ok {
        return invalid(format!(
            "{op}: Expected {}D or {}D (batch mode) tensor with optional 0 dim batch size for input, but got: {}",
            n + 1,
            n + 2,
            shape_str(x.shape())
        ));
    }
    Ok(())
}

/// High padding so that `out` windows fit (ceil mode may run past the padded input).
fn high_pad(g: &Geom, i: usize) -> i64 {
    let need = ((g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] + 1) as i64 - g.ins[i] as i64 - g.p[i] as i64;
    need.max(0)
}

fn window(g: &Geom) -> Window {
    let n = g.k.len();
    let mut w = Window {
        dimensions: vec![1; g.lead],
        strides: vec![1; g.lead],
        base_dilations: vec![],
        window_dilations: vec![1; g.lead],
        padding: vec![(0, 0); g.lead],
    };
    for i in 0..n {
        w.dimensions.push(g.k[i]);
        w.strides.push(g.s[i]);
        w.window_dilations.push(g.d[i]);
        w.padding.push((g.p[i] as i64, high_pad(g, i)));
    }
    w
}

/// The first `g.out` windows of a reduce_window result (it may hold one more in ceil mode).
fn crop(cx: &mut Lower, v: &Value, g: &Geom) -> LowerResult<Value> {
    let mut lim = v.shape().to_vec();
    for i in 0..g.out.len() {
        lim[g.lead + i] = g.out[i];
    }
    if lim.as_slice() == v.shape() {
        return Ok(v.clone());
    }
    Ok(cx.slice(v, &vec![0; v.rank()], &lim, &vec![1; v.rank()])?)
}

/// The divisor of each output window of an average pool (shape `g.out`).
fn divisors(g: &Geom, include_pad: bool, over: Option<i64>) -> Vec<f64> {
    let n = g.k.len();
    let per: Vec<Vec<(i64, i64)>> = (0..n)
        .map(|i| {
            (0..g.out[i])
                .map(|o| {
                    let (s, k, p, len) = (g.s[i] as i64, g.k[i] as i64, g.p[i] as i64, g.ins[i] as i64);
                    let start = o as i64 * s - p;
                    let end = (start + k).min(len + p);
                    let pool = end - start;
                    let valid = end.min(len) - start.max(0);
                    (pool, valid)
                })
                .collect()
        })
        .collect();
    let total: usize = g.out.iter().product();
    let mut out = Vec::with_capacity(total);
    for flat in 0..total {
        let mut r = flat;
        let mut idx = vec![0; n];
        for i in (0..n).rev() {
            idx[i] = r % g.out[i];
            r /= g.out[i];
        }
        let v = match over {
            Some(d) => d,
            None => (0..n)
                .map(|i| {
                    if include_pad {
                        per[i][idx[i]].0
                    } else {
                        per[i][idx[i]].1
                    }
                })
                .product(),
        };
        out.push(v as f64);
    }
    out
}

fn avg_dtype_check(x: &Value, op: &str) -> LowerResult<()> {
    let d = x.dtype();
    // PyTorch's 3-d kernel has no f16/bf16 version.
    let half3d = op == "avg_pool3d" && matches!(d, DType::F16 | DType::BF16);
    let name = if op == "avg_pool3d" { "avg_pool3d_out_frame" } else { op };
    dtype_check((d.is_float() || d == DType::I64) && !half3d, d, name)
}

fn avg_pool(cx: &mut Lower, a: &Args, n: usize, op: &str) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let ceil = a.bool("ceil_mode")?;
    let include_pad = a.bool("count_include_pad")?;
    let over = if a.schema.args.iter().any(|s| s.name == "divisor_override") {
        a.opt_int("divisor_override")?
    } else {
        None
    };
    if over == Some(0) {
        return invalid("divisor must be not zero");
    }
    let g = geometry(a, &x, n, op, false, ceil)?;
    avg_dtype_check(&x, op)?;
    let dt = x.dtype();
    let xc = up(cx, &x)?;
    let zero = splat(cx, 0.0, xc.dtype(), &[])?;
    let s = cx.reduce_window(&[&xc], &[&zero], &window(&g), |f, v| {
        Ok::<_, crate::error::LowerError>(vec![f.add(&v[0], &v[1])?])
    })?;
    let s = crop(cx, &s[0], &g)?;
    let div = divisors(&g, include_pad, over);
    let dv = host_const(cx, xc.dtype(), &g.out, &div)?;
    let dims: Vec<usize> = (g.lead..g.lead + n).collect();
    let dv = bcast(cx, &dv, s.shape(), &dims)?;
    let y = cx.div(&s, &dv)?;
    Ok(vec![Out::Tensor(cast(cx, &y, dt)?)])
}

pub(crate) fn avg_pool1d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    avg_pool(cx, a, 1, "avg_pool1d")
}

pub(crate) fn avg_pool2d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    avg_pool(cx, a, 2, "avg_pool2d")
}

pub(crate) fn avg_pool3d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    avg_pool(cx, a, 3, "avg_pool3d")
}

fn check_grad(gy: &Value, x: &Value, g: &Geom, op: &str) -> LowerResult<()> {
    let mut want = x.shape()[..g.lead].to_vec();
    want.extend_from_slice(&g.out);
    if gy.shape() != want.as_slice() || gy.dtype() != x.dtype() {
        return invalid(format!(
            "{op}: expected grad_output of shape {} and dtype {}, got {} of {}",
            shape_str(&want),
            x.dtype(),
            shape_str(gy.shape()),
            gy.dtype()
        ));
    }
    Ok(())
}

pub(crate) fn avg_pool2d_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    avg_pool_backward(cx, a, 2, "avg_pool2d_backward")
}

pub(crate) fn avg_pool3d_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    avg_pool_backward(cx, a, 3, "avg_pool3d_backward")
}

fn avg_pool_backward(cx: &mut Lower, a: &Args, n: usize, op: &str) -> LowerResult<Vec<Out>> {
    let gy = a.tensor("grad_output")?;
    let x = a.tensor("self")?;
    let ceil = a.bool("ceil_mode")?;
    let include_pad = a.bool("count_include_pad")?;
    let over = a.opt_int("divisor_override")?;
    if over == Some(0) {
        return invalid("divisor must be not zero");
    }
    let g = geometry(a, &x, n, op, false, ceil)?;
    avg_dtype_check(&x, op)?;
    check_grad(&gy, &x, &g, op)?;
    let dt = x.dtype();
    // PyTorch: grad / divisor and the adds into grad_input in the dtype, windows in order.
    let rd = Rounding::new(dt);
    let gc = up(cx, &gy)?;
    let div = divisors(&g, include_pad, over);
    let dv = host_const(cx, dt, &g.out, &div)?;
    let dv = cast(cx, &dv, gc.dtype())?;
    let dims: Vec<usize> = (g.lead..g.lead + n).collect();
    let dv = bcast(cx, &dv, gc.shape(), &dims)?;
    let gd = rd.div(cx, &gc, &dv)?;
    let padded: Vec<usize> = (0..n)
        .map(|i| (g.ins[i] + 2 * g.p[i]).max((g.out[i] - 1) * g.s[i] + g.k[i]))
        .collect();
    let lead = x.shape()[..g.lead].to_vec();
    let mut part = |_: &mut Lower, _: &[usize]| Ok(gd.clone());
    let full = fold_add(
        cx,
        &lead,
        &g.out,
        &g.k,
        &g.s,
        &vec![1; n],
        &padded,
        gc.dtype(),
        Some(&rd),
        true,
        &mut part,
    )?;
    let mut lo = vec![0; g.lead];
    let mut hi = lead.clone();
    for i in 0..n {
        lo.push(g.p[i]);
        hi.push(g.p[i] + g.ins[i]);
    }
    let y = cx.slice(&full, &lo, &hi, &vec![1; x.rank()])?;
    Ok(vec![Out::Tensor(cast(cx, &y, dt)?)])
}

/// The flat offset of each element within its plane (the last `n` dims), as i64 of x's shape.
fn plane_index(cx: &mut Lower, shape: &[usize], n: usize) -> LowerResult<Value> {
    let r = shape.len();
    let ty = TensorType::new(shape.to_vec(), DType::I64);
    let mut acc: Option<Value> = None;
    let mut stride = 1usize;
    for i in (r - n..r).rev() {
        let io = cx.iota(ty.clone(), i)?;
        let term = if stride == 1 {
            io
        } else {
            mul_s(cx, &io, stride as f64)?
        };
        acc = Some(match acc {
            None => term,
            Some(a) => cx.add(&a, &term)?,
        });
        stride *= shape[i];
    }
    Ok(acc.expect("n >= 1"))
}

fn max_pool(cx: &mut Lower, a: &Args, n: usize, op: &str) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let ceil = a.bool("ceil_mode")?;
    let g = geometry(a, &x, n, op, true, ceil)?;
    dtype_check(x.dtype() != DType::Bool, x.dtype(), op)?;
    let is_float = x.dtype().is_float();
    let idx = plane_index(cx, x.shape(), n)?;
    let init_v = cx.min_value(TensorType::scalar(x.dtype()))?;
    let init_i = cx.full_int(TensorType::scalar(DType::I64), i64::MAX as i128)?;
    let r = cx.reduce_window(&[&x, &idx], &[&init_v, &init_i], &window(&g), |f, v| {
        let (av, ai, bv, bi) = (&v[0], &v[1], &v[2], &v[3]);
        let gt = f.compare(Comparison::Gt, av, bv)?;
        let eq = f.compare(Comparison::Eq, av, bv)?;
        let ilt = f.compare(Comparison::Lt, ai, bi)?;
        let tie = f.binary(BinaryOp::And, &eq, &ilt)?;
        let mut pick = f.binary(BinaryOp::Or, &gt, &tie)?;
        if is_float {
            let an = f.compare(Comparison::Ne, av, av)?;
            let bn = f.compare(Comparison::Ne, bv, bv)?;
            let igt = f.compare(Comparison::Gt, ai, bi)?;
            let not_bn = f.unary(UnaryOp::Not, &bn)?;
            let not_an = f.unary(UnaryOp::Not, &an)?;
            // a NaN beats numbers; of two NaNs the later one wins.
            let nan_side = f.binary(BinaryOp::Or, &not_bn, &igt)?;
            let nan_pick = f.binary(BinaryOp::And, &an, &nan_side)?;
            let both_num = f.binary(BinaryOp::And, &not_an, &not_bn)?;
            let num_pick = f.binary(BinaryOp::And, &both_num, &pick)?;
            pick = f.binary(BinaryOp::Or, &nan_pick, &num_pick)?;
        }
        Ok::<_, crate::error::LowerError>(vec![f.select(&pick, av, bv)?, f.select(&pick, ai, bi)?])
    })?;
    let v = crop(cx, &r[0], &g)?;
    let i = crop(cx, &r[1], &g)?;
    Ok(vec![Out::Tensor(v), Out::Tensor(i)])
}

pub(crate) fn max_pool2d_with_indices(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    max_pool(cx, a, 2, "max_pool2d")
}

pub(crate) fn max_pool3d_with_indices(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    max_pool(cx, a, 3, "max_pool3d")
}

/// Adds each `vals[m, l]` into row `m` of a zero `[rows, width]` at column `cols[m, l]`
/// (i64), flat; returns `[rows * width]`.
pub(crate) fn scatter_add_rows(
    cx: &mut Lower,
    vals: &Value,
    cols: &Value,
    rows: usize,
    width: usize,
) -> LowerResult<Value> {
    let l = vals.shape()[1];
    let ty = TensorType::new([rows, l], DType::I64);
    let row = cx.iota(ty, 0)?;
    let base = mul_s(cx, &row, width as f64)?;
    let flat = cx.add(&base, cols)?;
    let flat = cx.reshape(&flat, &[rows * l, 1])?;
    let v = cx.reshape(vals, &[rows * l])?;
    let zeros = splat(cx, 0.0, vals.dtype(), &[rows * width])?;
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
    };
    let r = cx.scatter(&[&zeros], &flat, &[&v], &dims, |f, a| {
        Ok::<_, crate::error::LowerError>(vec![f.add(&a[0], &a[1])?])
    })?;
    Ok(r[0].clone())
}

pub(crate) fn max_pool2d_with_indices_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    max_pool_backward(cx, a, 2, "max_pool2d_with_indices_backward")
}

pub(crate) fn max_pool3d_with_indices_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    max_pool_backward(cx, a, 3, "max_pool3d_with_indices_backward")
}

fn max_pool_backward(cx: &mut Lower, a: &Args, n: usize, op: &str) -> LowerResult<Vec<Out>> {
    let gy = a.tensor("grad_output")?;
    let x = a.tensor("self")?;
    let ind = a.tensor("indices")?;
    let ceil = a.bool("ceil_mode")?;
    let g = geometry(a, &x, n, op, true, ceil)?;
    dtype_check(x.dtype() != DType::Bool, x.dtype(), op)?;
    check_grad(&gy, &x, &g, op)?;
    if ind.shape() != gy.shape() || !ind.dtype().is_int() {
        return invalid(format!(
            "{op}: expected indices of shape {} (int64), got {}",
            shape_str(gy.shape()),
            shape_str(ind.shape())
        ));
    }
    let dt = x.dtype();
    if x.shape().contains(&0) {
        return Ok(vec![Out::Tensor(splat(cx, 0.0, dt, x.shape())?)]);
    }
    let rows: usize = x.shape()[..g.lead].iter().product();
    let plane: usize = g.ins.iter().product();
    let l: usize = g.out.iter().product();
    let gc = up(cx, &gy)?;
    let gc = cx.reshape(&gc, &[rows, l])?;
    let ic = cast(cx, &ind, DType::I64)?;
    let ic = cx.reshape(&ic, &[rows, l])?;
    let r = scatter_add_rows(cx, &gc, &ic, rows, plane)?;
    let r = cx.reshape(&r, x.shape())?;
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}
