//! The arithmetic behind each op, on f64 elements: elementwise functions, reductions,
//! matmul and window copies.

use super::array::{round, strides, unravel, Array};
use super::math::erf;
use crate::dtype::DType;
use crate::ir::{BinaryOp, ReduceOp, UnaryOp};

pub(crate) fn unary_fn(op: UnaryOp, dtype: DType) -> fn(f64) -> f64 {
    match op {
        UnaryOp::Neg => |x| -x,
        UnaryOp::Abs => f64::abs,
        UnaryOp::Exp => f64::exp,
        UnaryOp::Log => f64::ln,
        UnaryOp::Tanh => f64::tanh,
        UnaryOp::Sqrt => f64::sqrt,
        UnaryOp::Rsqrt => |x| 1.0 / x.sqrt(),
        UnaryOp::Erf => erf,
        UnaryOp::Sin => f64::sin,
        UnaryOp::Cos => f64::cos,
        UnaryOp::Logistic => |x| 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Floor => f64::floor,
        UnaryOp::Ceil => f64::ceil,
        UnaryOp::Not if dtype == DType::Bool => |x| f64::from(u8::from(x == 0.0)),
        UnaryOp::Not => |x| !(x as i64) as f64,
    }
}

/// One element of a binary op in f64 (the caller rounds to the dtype).
pub(crate) fn binary(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    let int = dtype.is_int();
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        // XLA's integer division by zero gives -1 (all bits set), remainder gives the dividend.
        BinaryOp::Div if int && b == 0.0 => -1.0,
        BinaryOp::Div if int => (a / b).trunc(),
        BinaryOp::Div => a / b,
        BinaryOp::Rem if int && b == 0.0 => a,
        BinaryOp::Rem => a % b,
        BinaryOp::Max if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => a.powf(b),
        BinaryOp::And if dtype == DType::Bool => f64::from(u8::from(a != 0.0 && b != 0.0)),
        BinaryOp::And => ((a as i64) & (b as i64)) as f64,
        BinaryOp::Or if dtype == DType::Bool => f64::from(u8::from(a != 0.0 || b != 0.0)),
        BinaryOp::Or => ((a as i64) | (b as i64)) as f64,
        BinaryOp::Xor if dtype == DType::Bool => f64::from(u8::from((a != 0.0) != (b != 0.0))),
        BinaryOp::Xor => ((a as i64) ^ (b as i64)) as f64,
        BinaryOp::Shl | BinaryOp::ShrArithmetic | BinaryOp::ShrLogical => shift(op, dtype, a, b),
    }
}

/// StableHLO's shifts on the `bits`-wide pattern of `a`: an amount outside `0..bits` (as
/// unsigned) shifts everything out (0), or fills with the sign for the arithmetic right
/// shift. The result is wrapped to the dtype.
fn shift(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    let bits = dtype.bits() as u32;
    let m = 1i128 << bits;
    let pattern = (a as i128).rem_euclid(m);
    let signed = if pattern >= m / 2 {
        pattern - m
    } else {
        pattern
    };
    let amount = (b as i128).rem_euclid(m);
    let inside = amount < i128::from(bits);
    let r = match op {
        BinaryOp::Shl if inside => (pattern << amount).rem_euclid(m),
        BinaryOp::ShrLogical if inside => pattern >> amount,
        BinaryOp::ShrArithmetic => (signed >> amount.min(i128::from(bits) - 1)).rem_euclid(m),
        _ => 0,
    };
    // Wrapped here, where it is exact (a shifted 32-bit pattern can pass 2^53).
    (if dtype.is_signed_int() && r >= m / 2 {
        r - m
    } else {
        r
    }) as f64
}

/// Reduces `axes` of `x` (result in row-major order of the kept dims); sums in f64 and
/// rounds once, max/min propagate NaN.
pub(crate) fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Vec<f64> {
    let kept: Vec<usize> = (0..x.shape.len()).filter(|d| !axes.contains(d)).collect();
    let out_shape: Vec<usize> = kept.iter().map(|&d| x.shape[d]).collect();
    let out_strides = strides(&out_shape);
    let init = match op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut out = vec![init; out_shape.iter().product()];
    let mut idx = vec![0; x.shape.len()];
    for (f, &v) in x.data.iter().enumerate() {
        unravel(f, &x.shape, &mut idx);
        let o: usize = kept
            .iter()
            .zip(&out_strides)
            .map(|(&d, s)| idx[d] * s)
            .sum();
        out[o] = match op {
            ReduceOp::Sum => out[o] + v,
            _ if v.is_nan() || out[o].is_nan() => f64::NAN,
            ReduceOp::Max => out[o].max(v),
            ReduceOp::Min => out[o].min(v),
        };
    }
    out.into_iter().map(|v| round(x.dtype, v)).collect()
}

/// Inclusive scan of `x` along `axis`: sums run in f64 and each result is rounded once
/// (exact for integers below 2^53), max/min propagate NaN.
pub(crate) fn scan(op: ReduceOp, x: &Array, axis: usize) -> Vec<f64> {
    let st = strides(&x.shape);
    let (n, step) = (x.shape[axis], st[axis]);
    let mut out = x.data.clone();
    let mut idx = vec![0; x.shape.len()];
    for f in 0..x.data.len() {
        unravel(f, &x.shape, &mut idx);
        if idx[axis] != 0 {
            continue;
        }
        // `f` starts a line along the axis: run it in f64, round each output.
        let mut acc = x.data[f];
        out[f] = round(x.dtype, acc);
        for i in 1..n {
            let v = x.data[f + i * step];
            acc = match op {
                ReduceOp::Sum => acc + v,
                _ if v.is_nan() || acc.is_nan() => f64::NAN,
                ReduceOp::Max => acc.max(v),
                ReduceOp::Min => acc.min(v),
            };
            out[f + i * step] = round(x.dtype, acc);
        }
    }
    out
}

/// 2-D matmul; each product and partial sum is rounded to the accumulator dtype.
pub(crate) fn dot(
    l: &Array,
    r: &Array,
    tl: bool,
    tr: bool,
    shape: &[usize],
    acc: DType,
) -> Vec<f64> {
    let (m, n) = (shape[0], shape[1]);
    let k = if tl { l.shape[0] } else { l.shape[1] };
    let at = |a: &Array, i: usize, j: usize, t: bool| {
        if t {
            a.data[j * a.shape[1] + i]
        } else {
            a.data[i * a.shape[1] + j]
        }
    };
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let terms = (0..k).map(|p| at(l, i, p, tl) * at(r, p, j, tr));
            out.push(match acc {
                // The common case, in native f32 (the generic path is several times slower).
                DType::F32 => f64::from(terms.fold(0f32, |s, t| s + t as f32)),
                _ => terms.fold(0.0, |s, t| round(acc, s + round(acc, t))),
            });
        }
    }
    out
}

pub(crate) fn copy_window(
    data: &[f64],
    shape: &[usize],
    starts: &[usize],
    sizes: &[usize],
) -> Vec<f64> {
    let st = strides(shape);
    let n: usize = sizes.iter().product();
    let mut idx = vec![0; sizes.len()];
    (0..n)
        .map(|f| {
            unravel(f, sizes, &mut idx);
            data[idx
                .iter()
                .zip(starts)
                .zip(&st)
                .map(|((i, s), t)| (i + s) * t)
                .sum::<usize>()]
        })
        .collect()
}

pub(crate) fn paste_window(
    data: &mut [f64],
    shape: &[usize],
    starts: &[usize],
    sizes: &[usize],
    src: &[f64],
) {
    let st = strides(shape);
    let mut idx = vec![0; sizes.len()];
    for (f, &v) in src.iter().enumerate() {
        unravel(f, sizes, &mut idx);
        data[idx
            .iter()
            .zip(starts)
            .zip(&st)
            .map(|((i, s), t)| (i + s) * t)
            .sum::<usize>()] = v;
    }
}
