//! Numbers that change every step (a learning rate, `alpha`, a scale) become rank-0 device
//! inputs instead of constants in the program, so they do not change the cache key and never
//! force a recompile. Only where the result is the same as PyTorch's with a Python number:
//! float numbers combined with f32 or f64 tensors of one dtype (PyTorch rounds the number to
//! that dtype and computes in it, exactly what a rank-0 tensor of that dtype gives).

use crate::error::Result;
use crate::runtime::Runtime;
use crate::tensor::Tensor;
use tessera_lowering::DType;
use tessera_ops::bind::Bound;
use tessera_ops::schema::{ArgType, Tag};
use tessera_ops::ArgValue;

/// The arithmetic family whose `.Scalar` overloads have a `.Tensor` twin with the same
/// arguments, and whose `alpha` scales `other`.
const ARITH: [&str; 8] = ["add", "sub", "mul", "div", "add_", "sub_", "mul_", "div_"];

/// The one float dtype (f32/f64) of every tensor argument, if they share one.
fn float_dtype(b: &Bound<Tensor>) -> Option<DType> {
    let mut d = None;
    for v in &b.values {
        for t in v.tensors() {
            let td = t.dtype();
            if !matches!(td, DType::F32 | DType::F64) || d.is_some_and(|d| d != td) {
                return None;
            }
            d = Some(td);
        }
    }
    d
}

pub(crate) fn lift(rt: &mut Runtime, mut b: Bound<Tensor>) -> Result<Bound<Tensor>> {
    let schema = b.schema;
    let arith = ARITH.contains(&schema.name);
    if !(arith || schema.has_tag(Tag::Pointwise)) {
        return Ok(b);
    }
    let Some(d) = float_dtype(&b) else {
        return Ok(b);
    };
    // `add.Scalar(x, 0.1)` -> `add.Tensor(x, tensor(0.1))`.
    if arith && schema.overload == "Scalar" {
        if let Some(twin) = tessera_ops::find(&format!("{}.Tensor", schema.name)) {
            if let Some(ArgValue::Float(x)) = b.values.get(1) {
                let x = *x;
                b.values[1] = ArgValue::Tensor(rt.scalar_tensor(d, x)?);
                b.schema = twin;
            }
        }
    }
    // Wrapped numbers in Tensor positions.
    for (a, v) in b.schema.args.iter().zip(b.values.iter_mut()) {
        if a.ty == ArgType::Tensor && !a.mutable {
            if let ArgValue::Float(x) = *v {
                *v = ArgValue::Tensor(rt.scalar_tensor(d, x)?);
            }
        }
    }
    // `add(x, y, alpha=a)` -> `add(x, y * tensor(a))`: PyTorch computes `alpha * other` in
    // the op's dtype and adds; so does this.
    if arith
        && b.schema.overload == "Tensor"
        && matches!(b.schema.name, "add" | "sub" | "add_" | "sub_")
    {
        let at = b.schema.args.iter().position(|a| a.name == "alpha");
        if let Some(at) = at {
            if let ArgValue::Float(alpha) = b.values[at] {
                if alpha != 1.0 {
                    if let ArgValue::Tensor(other) = &b.values[1] {
                        let k = rt.scalar_tensor(d, alpha)?;
                        let scaled = rt.call_op(
                            "mul.Tensor",
                            vec![ArgValue::Tensor(other.clone()), ArgValue::Tensor(k)],
                            false,
                        )?;
                        b.values[1] = ArgValue::Tensor(scaled);
                        b.values[at] = ArgValue::Int(1);
                    }
                }
            }
        }
    }
    if matches!(
        b.schema.name,
        "addcdiv" | "addcdiv_" | "addcmul" | "addcmul_"
    ) && b.schema.overload.is_empty()
    {
        return addc(rt, b, d);
    }
    Ok(b)
}

/// `addcdiv(self, t1, t2, value=v)` -> `add(self, (t1 * tensor(v)) / t2)` (`addcmul`: `*`),
/// the order PyTorch's CPU kernel computes in: Adam's step size reaches `addcdiv_` as its
/// `value` and changes every step.
fn addc(rt: &mut Runtime, b: Bound<Tensor>, d: DType) -> Result<Bound<Tensor>> {
    let value = b.schema.args.iter().position(|a| a.name == "value");
    let Some(ArgValue::Float(v)) = value.map(|i| &b.values[i]) else {
        return Ok(b);
    };
    let (ArgValue::Tensor(s), ArgValue::Tensor(t1), ArgValue::Tensor(t2)) =
        (&b.values[0], &b.values[1], &b.values[2])
    else {
        return Ok(b);
    };
    if *v == 1.0 {
        return Ok(b);
    }
    let k = rt.scalar_tensor(d, *v)?;
    let scaled = rt.call_op(
        "mul.Tensor",
        vec![ArgValue::Tensor(t1.clone()), ArgValue::Tensor(k)],
        false,
    )?;
    let combine = if b.schema.name.starts_with("addcdiv") {
        "div.Tensor"
    } else {
        "mul.Tensor"
    };
    let r = rt.call_op(
        combine,
        vec![ArgValue::Tensor(scaled), ArgValue::Tensor(t2.clone())],
        false,
    )?;
    let add = if b.schema.name.ends_with('_') {
        "add_.Tensor"
    } else {
        "add.Tensor"
    };
    let schema = tessera_ops::find(add).expect("add is in the op table");
    tessera_ops::bind(
        schema,
        vec![ArgValue::Tensor(s.clone()), ArgValue::Tensor(r)],
        Vec::new(),
    )
    .map_err(|e| crate::error::EagerError::op(String::new(), e))
}
