//! Launches with padded edge blocks (`BlockSpec::padded`): `@main` takes the arrays as they
//! are, pads the blocked inputs with zeros up to whole blocks, calls the kernel emitted for
//! the padded arrays (`KernelProgram::padded_form`, in any form) and crops its outputs, so
//! whatever the kernel writes past an array's end is never stored. A checked kernel's
//! bounds-check state (`checks.rs`) is passed on after the outputs.

use super::error::EmitError;
use crate::dtype::DType;
use crate::ir::KernelProgram;
use crate::stablehlo::{FuncBuilder, TensorType, Value};

pub(super) fn emit(
    program: &KernelProgram,
    inner_text: &str,
    inner: &KernelProgram,
    check_state_len: usize,
) -> Result<String, EmitError> {
    let mut f = FuncBuilder::new("main");
    let mut args: Vec<Value> = program
        .prefetch
        .iter()
        .map(|p| f.arg(TensorType::new(p.shape.clone(), p.dtype)))
        .collect();
    for (o, padded) in program.inputs.iter().zip(&inner.inputs) {
        let x = f.arg(TensorType::new(o.array_shape.clone(), o.dtype));
        args.push(if o.array_shape == padded.array_shape {
            x
        } else {
            let zero = f.scalar(o.dtype, 0.0)?;
            let low = vec![0; o.array_shape.len()];
            let high: Vec<i64> = padded
                .array_shape
                .iter()
                .zip(&o.array_shape)
                .map(|(p, a)| (p - a) as i64)
                .collect();
            let interior = vec![0; o.array_shape.len()];
            f.pad(&x, &zero, &low, &high, &interior)?
        });
    }
    let mut results: Vec<TensorType> = inner
        .outputs
        .iter()
        .map(|o| TensorType::new(o.array_shape.clone(), o.dtype))
        .collect();
    results.extend((0..check_state_len).map(|_| TensorType::scalar(DType::I32)));
    let refs: Vec<&Value> = args.iter().collect();
    let mut outs = f.call_module(inner_text, &refs, results)?;
    let state = outs.split_off(program.outputs.len());
    let mut cropped = Vec::with_capacity(outs.len() + state.len());
    for (o, y) in program.outputs.iter().zip(outs) {
        cropped.push(if y.shape() == o.array_shape.as_slice() {
            y
        } else {
            let start = vec![0; o.array_shape.len()];
            let strides = vec![1; o.array_shape.len()];
            f.slice(&y, &start, &o.array_shape, &strides)?
        });
    }
    cropped.extend(state);
    let refs: Vec<&Value> = cropped.iter().collect();
    Ok(f.finish(&refs)?.into_text())
}
