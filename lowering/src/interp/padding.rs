//! Launches with padded edge blocks (`BlockSpec::padded`): the kernel runs on the arrays
//! rounded up to whole blocks (`KernelProgram::padded_form`), the inputs padded with NaN
//! (floats) or 0 (other types) so that a kernel using what lies past an array's end shows
//! it, and the outputs cropped back, which drops whatever was written past the end.

use super::error::InterpError;
use crate::host::HostTensor;
use crate::ir::KernelProgram;

pub(super) fn run_padded(
    program: &KernelProgram,
    inner: &KernelProgram,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, InterpError> {
    let (prefetch, blocked) = super::split_inputs(program, inputs)?;
    let mut padded: Vec<HostTensor> = prefetch.to_vec();
    for ((o, inner_o), t) in program.inputs.iter().zip(&inner.inputs).zip(blocked) {
        super::check_input(program, &o.name, o.dtype, &o.array_shape, t)?;
        let fill = if o.dtype.is_float() { f64::NAN } else { 0.0 };
        padded.push(resize(t, &inner_o.array_shape, fill));
    }
    let outs = super::run(inner, &padded)?;
    Ok(outs
        .iter()
        .zip(&program.outputs)
        .map(|(t, o)| resize(t, &o.array_shape, 0.0))
        .collect())
}

/// `t` cut or extended (with `fill`) to `shape`, elements keeping their indices.
fn resize(t: &HostTensor, shape: &[usize], fill: f64) -> HostTensor {
    let (from, data) = (t.shape(), t.to_f64_vec());
    let n: usize = shape.iter().product();
    let mut out = vec![fill; n];
    let mut index = vec![0usize; shape.len()];
    for slot in out.iter_mut() {
        if index.iter().zip(from).all(|(i, d)| i < d) {
            let src = index.iter().zip(from).fold(0, |acc, (i, d)| acc * d + i);
            *slot = data[src];
        }
        // Row-major increment of `index` within `shape`.
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    HostTensor::from_f64(t.dtype(), shape.to_vec(), &out)
}
