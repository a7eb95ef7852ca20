//! `grid_sampler_2d`: bilinear, nearest and bicubic sampling with zeros, border and
//! reflection padding. f32/f64 follow PyTorch's vectorized kernel; f16/bf16 its scalar
//! kernel, which rounds every intermediate to the dtype (emulated with [`Rounding`]).

use super::common::*;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, GatherDims, TensorType, UnaryOp, Value};
use tessera_lowering::DType;

/// Grid-sampling context: the input as `[N, C, H*W]`, and the output positions `P`.
struct Sampler {
    inp: Value,
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    p: usize,
    ct: DType,
}

impl Sampler {
    /// The input at integer coordinates `(yi, xi)` (`[N, P]`, float-valued) as `[N, P, C]`,
    /// zero where out of bounds.
    fn value(&self, cx: &mut Lower, yi: &Value, xi: &Value) -> LowerResult<Value> {
        let sh = [self.n, self.p];
        let zero = splat(cx, 0.0, self.ct, &sh)?;
        let wm1 = splat(cx, self.w as f64 - 1.0, self.ct, &sh)?;
        let hm1 = splat(cx, self.h as f64 - 1.0, self.ct, &sh)?;
        let in_x0 = cx.compare(Comparison::Ge, xi, &zero)?;
        let in_x1 = cx.compare(Comparison::Le, xi, &wm1)?;
        let in_y0 = cx.compare(Comparison::Ge, yi, &zero)?;
        let in_y1 = cx.compare(Comparison::Le, yi, &hm1)?;
        let m = cx.binary(BinaryOp::And, &in_x0, &in_x1)?;
        let m = cx.binary(BinaryOp::And, &m, &in_y0)?;
        let m = cx.binary(BinaryOp::And, &m, &in_y1)?;
        let xc = cx.clamp(&zero, xi, &wm1)?;
        let yc = cx.clamp(&zero, yi, &hm1)?;
        let xi64 = cx.convert(&xc, DType::I64)?;
        let yi64 = cx.convert(&yc, DType::I64)?;
        let wv = cx.full_int(TensorType::new(sh, DType::I64), self.w as i128)?;
        let flat = cx.mul(&yi64, &wv)?;
        let flat = cx.add(&flat, &xi64)?;
        let nio = cx.iota(TensorType::new(sh, DType::I64), 0)?;
        let nio = cx.reshape(&nio, &[self.n, self.p, 1])?;
        let flat = cx.reshape(&flat, &[self.n, self.p, 1])?;
        let ind = cx.concatenate(&[&nio, &flat], 2)?;
        let dims = GatherDims {
            offset_dims: vec![2],
            collapsed_slice_dims: vec![0, 2],
            start_index_map: vec![0, 2],
            index_vector_dim: 2,
        };
        let g = cx.gather(&self.inp, &ind, &dims, &[1, self.c, 1])?;
        let full = [self.n, self.p, self.c];
        let mb = bcast(cx, &m, &full, &[0, 1])?;
        let z = splat(cx, 0.0, self.ct, &full)?;
        Ok(cx.select(&mb, &g, &z)?)
    }
}

/// `[N, P]` weights times `[N, P, C]` values.
fn wmul(cx: &mut Lower, rd: &Rounding, v: &Value, w: &Value) -> LowerResult<Value> {
    let wb = bcast(cx, w, v.shape(), &[0, 1])?;
    rd.mul(cx, v, &wb)
}

/// `grid_sampler_unnormalize`.
fn unnormalize(cx: &mut Lower, rd: &Rounding, c: &Value, size: usize, align: bool) -> LowerResult<Value> {
    let one = rd.bin_s(cx, BinaryOp::Add, c, 1.0)?;
    if align {
        let h = rd.bin_s(cx, BinaryOp::Divide, &one, 2.0)?;
        rd.bin_s(cx, BinaryOp::Multiply, &h, size as f64 - 1.0)
    } else {
        let t = rd.bin_s(cx, BinaryOp::Multiply, &one, size as f64)?;
        let t = rd.bin_s(cx, BinaryOp::Subtract, &t, 1.0)?;
        rd.bin_s(cx, BinaryOp::Divide, &t, 2.0)
    }
}

fn clip(cx: &mut Lower, c: &Value, size: usize) -> LowerResult<Value> {
    let lo = splat(cx, 0.0, c.dtype(), c.shape())?;
    let hi = splat(cx, size as f64 - 1.0, c.dtype(), c.shape())?;
    let m = cx.max(c, &lo)?;
    Ok(cx.min(&m, &hi)?)
}

/// PyTorch's `reflect_coordinates(in, twice_low, twice_high)`.
fn reflect(cx: &mut Lower, rd: &Rounding, c: &Value, twice_low: i64, twice_high: i64) -> LowerResult<Value> {
    if twice_low == twice_high {
        return splat(cx, 0.0, c.dtype(), c.shape());
    }
    let min = twice_low as f64 / 2.0;
    let span = (twice_high - twice_low) as f64 / 2.0;
    let d = rd.bin_s(cx, BinaryOp::Subtract, c, min)?;
    let d = cx.unary(UnaryOp::Abs, &d)?;
    let sp = splat(cx, span, c.dtype(), c.shape())?;
    let extra = cx.binary(BinaryOp::Remainder, &d, &sp)?;
    let q = rd.div(cx, &d, &sp)?;
    let flips = cx.unary(UnaryOp::Floor, &q)?;
    let half = mul_s(cx, &flips, 0.5)?;
    let hf = cx.unary(UnaryOp::Floor, &half)?;
    let even = cx.compare(Comparison::Eq, &half, &hf)?;
    let a = rd.bin_s(cx, BinaryOp::Add, &extra, min)?;
    let b = rd.sub(cx, &sp, &extra)?;
    let b = rd.bin_s(cx, BinaryOp::Add, &b, min)?;
    Ok(cx.select(&even, &a, &b)?)
}

/// `compute_coordinates`: the padding mode applied to an unnormalized coordinate.
fn coordinates(cx: &mut Lower, rd: &Rounding, c: &Value, size: usize, padding: i64, align: bool) -> LowerResult<Value> {
    match padding {
        1 => clip(cx, c, size),
        2 => {
            let r = if align {
                reflect(cx, rd, c, 0, 2 * (size as i64 - 1))?
            } else {
                reflect(cx, rd, c, -1, 2 * size as i64 - 1)?
            };
            clip(cx, &r, size)
        }
        _ => Ok(c.clone()),
    }
}

fn cubic1(cx: &mut Lower, rd: &Rounding, x: &Value, a: f64) -> LowerResult<Value> {
    // ((A + 2) * x - (A + 3)) * x * x + 1
    let t = rd.s_bin(cx, BinaryOp::Multiply, a + 2.0, x)?;
    let t = rd.bin_s(cx, BinaryOp::Subtract, &t, a + 3.0)?;
    let t = rd.mul(cx, &t, x)?;
    let t = rd.mul(cx, &t, x)?;
    rd.bin_s(cx, BinaryOp::Add, &t, 1.0)
}

fn cubic2(cx: &mut Lower, rd: &Rounding, x: &Value, a: f64) -> LowerResult<Value> {
    // ((A * x - 5A) * x + 8A) * x - 4A
    let t = rd.s_bin(cx, BinaryOp::Multiply, a, x)?;
    let t = rd.bin_s(cx, BinaryOp::Subtract, &t, 5.0 * a)?;
    let t = rd.mul(cx, &t, x)?;
    let t = rd.bin_s(cx, BinaryOp::Add, &t, 8.0 * a)?;
    let t = rd.mul(cx, &t, x)?;
    rd.bin_s(cx, BinaryOp::Subtract, &t, 4.0 * a)
}

/// The four cubic convolution coefficients of fraction `t` (A = -0.75); the scalar kernel
/// (f16/bf16) forms the last tap's distance as `(1 - t) + 1`, the vector kernel as `2 - t`.
fn cubic_coeffs(cx: &mut Lower, rd: &Rounding, t: &Value) -> LowerResult<[Value; 4]> {
    let a = -0.75;
    let t1 = rd.bin_s(cx, BinaryOp::Add, t, 1.0)?;
    let c0 = cubic2(cx, rd, &t1, a)?;
    let c1 = cubic1(cx, rd, t, a)?;
    let omt = rd.s_bin(cx, BinaryOp::Subtract, 1.0, t)?;
    let c2 = cubic1(cx, rd, &omt, a)?;
    let far = if rd.dt == rd.ct {
        rd.s_bin(cx, BinaryOp::Subtract, 2.0, t)?
    } else {
        rd.bin_s(cx, BinaryOp::Add, &omt, 1.0)?
    };
    let c3 = cubic2(cx, rd, &far, a)?;
    Ok([c0, c1, c2, c3])
}

pub(crate) fn grid_sampler_2d(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let grid = a.tensor("grid")?;
    let mode = a.int("interpolation_mode")?;
    let padding = a.int("padding_mode")?;
    let align = a.bool("align_corners")?;
    float_only(&x, "grid_sampler_2d_cpu")?;
    if grid.dtype() != x.dtype() {
        return invalid(format!(
            "grid_sampler(): expected input and grid to have same dtype, but input has {} and grid has {}",
            x.dtype(),
            grid.dtype()
        ));
    }
    if x.rank() != 4 || grid.rank() != 4 || grid.shape()[3] != 2 || grid.shape()[0] != x.shape()[0] {
        return invalid(format!(
            "grid_sampler(): expected 4D input and grid [N, H, W, 2] with the same batch size, but got input with sizes {} and grid with sizes {}",
            shape_str(x.shape()),
            shape_str(grid.shape())
        ));
    }
    if x.shape()[2] == 0 || x.shape()[3] == 0 {
        return invalid(format!(
            "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes {} with dimension 2 being empty",
            shape_str(x.shape())
        ));
    }
    if !(0..=2).contains(&mode) || !(0..=2).contains(&padding) {
        return invalid(format!(
            "grid_sampler(): unknown interpolation mode {mode} or padding mode {padding}"
        ));
    }
    let (n, c, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (ho, wo) = (grid.shape()[1], grid.shape()[2]);
    let dt = x.dtype();
    if n * c * ho * wo == 0 {
        return Ok(vec![Out::Tensor(splat(cx, 0.0, dt, &[n, c, ho, wo])?)]);
    }
    let xc = up(cx, &x)?;
    let ct = xc.dtype();
    let p = ho * wo;
    let inp = cx.reshape(&xc, &[n, c, h * w])?;
    let s = Sampler { inp, n, c, h, w, p, ct };
    let gc = up(cx, &grid)?;
    let gc = cx.reshape(&gc, &[n, p, 2])?;
    let gx = cx.slice(&gc, &[0, 0, 0], &[n, p, 1], &[1, 1, 1])?;
    let gx = cx.reshape(&gx, &[n, p])?;
    let gy = cx.slice(&gc, &[0, 0, 1], &[n, p, 2], &[1, 1, 1])?;
    let gy = cx.reshape(&gy, &[n, p])?;
    let rd = Rounding::new(dt);
    let ux = unnormalize(cx, &rd, &gx, w, align)?;
    let uy = unnormalize(cx, &rd, &gy, h, align)?;
    let out = match mode {
        0 => {
            let ix = coordinates(cx, &rd, &ux, w, padding, align)?;
            let iy = coordinates(cx, &rd, &uy, h, padding, align)?;
            let x0 = cx.unary(UnaryOp::Floor, &ix)?;
            let y0 = cx.unary(UnaryOp::Floor, &iy)?;
            let x1 = add_s(cx, &x0, 1.0)?;
            let y1 = add_s(cx, &y0, 1.0)?;
            let (e, wst) = (rd.sub(cx, &x1, &ix)?, rd.sub(cx, &ix, &x0)?);
            let (so, no) = (rd.sub(cx, &y1, &iy)?, rd.sub(cx, &iy, &y0)?);
            let w_nw = rd.mul(cx, &e, &so)?;
            let w_ne = rd.mul(cx, &wst, &so)?;
            let w_sw = rd.mul(cx, &e, &no)?;
            let w_se = rd.mul(cx, &wst, &no)?;
            let v_nw = s.value(cx, &y0, &x0)?;
            let v_ne = s.value(cx, &y0, &x1)?;
            let v_sw = s.value(cx, &y1, &x0)?;
            let v_se = s.value(cx, &y1, &x1)?;
            let t = wmul(cx, &rd, &v_nw, &w_nw)?;
            let u = wmul(cx, &rd, &v_ne, &w_ne)?;
            let t = rd.add(cx, &t, &u)?;
            let u = wmul(cx, &rd, &v_sw, &w_sw)?;
            let t = rd.add(cx, &t, &u)?;
            let u = wmul(cx, &rd, &v_se, &w_se)?;
            rd.add(cx, &t, &u)?
        }
        1 => {
            let ix = coordinates(cx, &rd, &ux, w, padding, align)?;
            let iy = coordinates(cx, &rd, &uy, h, padding, align)?;
            let rx = cx.unary(UnaryOp::RoundNearestEven, &ix)?;
            let ry = cx.unary(UnaryOp::RoundNearestEven, &iy)?;
            s.value(cx, &ry, &rx)?
        }
        _ => {
            let fx = cx.unary(UnaryOp::Floor, &ux)?;
            let fy = cx.unary(UnaryOp::Floor, &uy)?;
            let tx = rd.sub(cx, &ux, &fx)?;
            let ty = rd.sub(cx, &uy, &fy)?;
            let cxs = cubic_coeffs(cx, &rd, &tx)?;
            let cys = cubic_coeffs(cx, &rd, &ty)?;
            let mut rows = Vec::new();
            for j in 0..4 {
                let yy = add_s(cx, &fy, j as f64 - 1.0)?;
                let yy = coordinates(cx, &rd, &yy, h, padding, align)?;
                let mut acc: Option<Value> = None;
                for i in 0..4 {
                    let xx = add_s(cx, &fx, i as f64 - 1.0)?;
                    let xx = coordinates(cx, &rd, &xx, w, padding, align)?;
                    let v = s.value(cx, &yy, &xx)?;
                    let t = wmul(cx, &rd, &v, &cxs[i])?;
                    acc = Some(match acc {
                        None => t,
                        Some(a) => rd.add(cx, &a, &t)?,
                    });
                }
                rows.push(acc.expect("four taps"));
            }
            let mut acc = wmul(cx, &rd, &rows[0], &cys[0])?;
            for j in 1..4 {
                let t = wmul(cx, &rd, &rows[j], &cys[j])?;
                acc = rd.add(cx, &acc, &t)?;
            }
            acc
        }
    };
    // [N, P, C] -> [N, C, Ho, Wo]
    let o = cx.transpose(&out, &[0, 2, 1])?;
    let o = cx.reshape(&o, &[n, c, ho, wo])?;
    Ok(vec![Out::Tensor(cast(cx, &o, dt)?)])
}
