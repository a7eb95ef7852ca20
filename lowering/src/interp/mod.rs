//! The reference interpreter (Pallas' `interpret=True`): runs a [`KernelProgram`] on host
//! arrays. The grid runs in lexicographic order (last axis fastest, like the TPU); each
//! step copies the input and output blocks its index maps select into block buffers, runs
//! the body, and copies the output blocks back; scratch buffers persist across steps.
//! Values are f64 rounded to their dtype after every op (so bf16 behaves like bf16), `dot`
//! accumulates in f32, and every block and slice is bounds-checked. Integers are exact up
//! to 2^53. Outputs start as NaN (floats) or 0, so blocks a kernel never writes show up.
//! Scalar-prefetch arrays are the first inputs; the body and every index map see them whole.
//! HBM operands are one whole-array block; manual DMAs are checked for races (`dma.rs`).

// Errors are cold and carry the shapes a user needs to see; their size does not matter.
#![allow(clippy::result_large_err)]

mod array;
mod dma;
mod error;
mod eval;
mod math;
mod ops;
mod padding;
mod reshaping;

pub use error::InterpError;

use crate::host::HostTensor;
use crate::ir::{BlockOperand, KernelProgram, MemorySpace};
use crate::DType;
use array::Array;
use dma::DmaState;
use eval::{Machine, Rt};
use ops::{copy_window, paste_window};
use std::rc::Rc;

/// The scalar-prefetch inputs and the blocked ones, once their count is the kernel's.
fn split_inputs<'a>(
    program: &KernelProgram,
    inputs: &'a [HostTensor],
) -> Result<(&'a [HostTensor], &'a [HostTensor]), InterpError> {
    let np = program.prefetch.len();
    if inputs.len() != np + program.inputs.len() {
        return Err(InterpError::InputCount {
            kernel: program.name.clone(),
            expected: np + program.inputs.len(),
            got: inputs.len(),
        });
    }
    Ok(inputs.split_at(np))
}

/// Input `name` given as `t` where the kernel takes `dtype` `shape`.
fn check_input(
    program: &KernelProgram,
    name: &str,
    dtype: DType,
    shape: &[usize],
    t: &HostTensor,
) -> Result<(), InterpError> {
    if t.dtype() != dtype || t.shape() != shape {
        return Err(InterpError::InputMismatch {
            kernel: program.name.clone(),
            name: name.to_string(),
            expected_dtype: dtype,
            expected_shape: shape.to_vec(),
            got_dtype: t.dtype(),
            got_shape: t.shape().to_vec(),
        });
    }
    Ok(())
}

/// Runs `program` on `inputs` (one per program input, matching its dtype and array shape)
/// and returns the outputs.
pub fn run(program: &KernelProgram, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, InterpError> {
    if let Some(inner) = program.padded_form() {
        return padding::run_padded(program, &inner, inputs);
    }
    let np = program.prefetch.len();
    let (prefetch, inputs) = split_inputs(program, inputs)?;
    for (p, t) in program.prefetch.iter().zip(prefetch) {
        check_input(program, &p.name, p.dtype, &p.shape, t)?;
    }
    let operands = program.inputs.iter().chain(&program.outputs);
    if let Some(o) = operands.into_iter().find(|o| o.dtype.is_complex()) {
        return Err(InterpError::Complex {
            kernel: program.name.clone(),
            name: o.name.clone(),
            dtype: o.dtype,
        });
    }
    for (o, t) in program.inputs.iter().zip(inputs) {
        check_input(program, &o.name, o.dtype, &o.array_shape, t)?;
    }
    let arrays: Vec<Array> = inputs
        .iter()
        .map(|t| Array::new(t.dtype(), t.shape().to_vec(), t.to_f64_vec()))
        .collect();
    // An aliased output starts as its input (they are one buffer).
    let mut outputs: Vec<Array> = program
        .outputs
        .iter()
        .enumerate()
        .map(|(j, o)| match program.aliases.iter().find(|a| a.1 == j) {
            Some(&(i, _)) => arrays[i].clone(),
            None => Array::filled(
                o.dtype,
                o.array_shape.clone(),
                if o.dtype.is_float() { f64::NAN } else { 0.0 },
            ),
        })
        .collect();
    // Buffers: the prefetch arrays (whole, as SMEM holds them), the blocks, the scratch.
    let blocks = program.inputs.iter().chain(&program.outputs);
    let mut buffers: Vec<Array> = prefetch
        .iter()
        .map(|t| Array::new(t.dtype(), t.shape().to_vec(), t.to_f64_vec()))
        .chain(blocks.map(|o| Array::filled(o.dtype, o.ref_shape(), 0.0)))
        .chain(
            program
                .scratch
                .iter()
                .map(|s| Array::filled(s.dtype, s.shape.clone(), 0.0)),
        )
        .collect();
    let ni = program.inputs.len();

    // DMAs may stay in flight from one grid step to the next (see `dma.rs`).
    let mut dma = DmaState::default();
    let operands: Vec<&BlockOperand> = program.inputs.iter().chain(&program.outputs).collect();
    let mut step = vec![0usize; program.grid.len()];
    for _ in 0..program.num_steps() {
        let mut starts = Vec::new();
        for (k, o) in program.inputs.iter().chain(&program.outputs).enumerate() {
            let s = block_starts(&program.grid, o, &step, &mut buffers[..np])?;
            let src = if k < ni { &arrays[k] } else { &outputs[k - ni] };
            buffers[np + k].data = copy_window(&src.data, &src.shape, &s, &o.block_shape);
            starts.push(s);
        }
        let args = (0..buffers.len()).map(Rt::Ref).collect();
        let mut machine = Machine::new(&program.body, &mut buffers, &program.grid, &step);
        machine.dma = std::mem::take(&mut dma);
        machine.call(args)?;
        dma = std::mem::take(&mut machine.dma);
        dma.end_step(|b| {
            let operand = b.checked_sub(np).and_then(|k| operands.get(k));
            operand.is_some_and(|o| o.space != MemorySpace::Any)
        })?;
        for (k, o) in program.outputs.iter().enumerate() {
            let out = &mut outputs[k];
            paste_window(
                &mut out.data,
                &out.shape,
                &starts[ni + k],
                &o.block_shape,
                &buffers[np + ni + k].data,
            );
        }
        advance(&mut step, &program.grid);
    }
    dma.finish()?;
    Ok(outputs
        .into_iter()
        .map(|a| HostTensor::from_f64(a.dtype, a.shape, &a.data))
        .collect())
}

/// Evaluates `o`'s index map at every index of `grid` and reports the first block out of
/// bounds. For maps that read no scalar-prefetch array (their blocks are known before any
/// data is): the tracer runs it so that no backend ever sees such a block.
pub(crate) fn check_block_indices(o: &BlockOperand, grid: &[usize]) -> Result<(), InterpError> {
    let mut step = vec![0usize; grid.len()];
    for _ in 0..grid.iter().product::<usize>() {
        block_starts(grid, o, &step, &mut [])?;
        advance(&mut step, grid);
    }
    Ok(())
}

/// Next grid index in lexicographic order.
fn advance(step: &mut [usize], grid: &[usize]) {
    for d in (0..grid.len()).rev() {
        step[d] += 1;
        if step[d] < grid[d] {
            return;
        }
        step[d] = 0;
    }
}

/// Element offsets of the block the operand's index map selects at grid step `step`.
fn block_starts(
    grid: &[usize],
    o: &BlockOperand,
    step: &[usize],
    prefetch: &mut [Array],
) -> Result<Vec<usize>, InterpError> {
    let grid_args = step
        .iter()
        .map(|&i| {
            Rt::Val(Rc::new(Array::new(
                crate::DType::I32,
                vec![],
                vec![i as f64],
            )))
        })
        .chain((0..prefetch.len()).map(Rt::Ref))
        .collect();
    let results = Machine::new(&o.index_map, prefetch, grid, step).call(grid_args)?;
    let index: Vec<i64> = results
        .iter()
        .map(|r| match r {
            Rt::Val(a) => a.scalar() as i64,
            Rt::Ref(_) => -1,
        })
        .collect();
    // Block indices, or element offsets along `o.element`'s dims.
    let in_bounds = index.len() == o.block_shape.len()
        && index
            .iter()
            .enumerate()
            .all(|(d, &b)| b >= 0 && o.max_index(d).is_some_and(|m| b as usize <= m));
    if !in_bounds {
        return Err(InterpError::BlockOutOfBounds {
            operand: o.name.clone(),
            grid_index: step.to_vec(),
            block_index: index,
            units: match o.element.is_empty() {
                true => String::new(),
                false => format!(" (element offsets in dims {:?})", o.element),
            },
            block_shape: o.block_shape.clone(),
            array_shape: o.array_shape.clone(),
            loc: o.index_map.loc,
        });
    }
    Ok(index
        .iter()
        .enumerate()
        .map(|(d, &b)| o.start(d, b as usize))
        .collect())
}
