//! TPU rules a program must follow to compile with Mosaic, checked early with the user's
//! location (Mosaic's own errors are late and opaque). The interpreter and StableHLO do
//! not need them, so they are a separate check the TPU path runs.

use super::error::TraceError;
use super::program::{BlockOperand, DimensionSemantics, KernelProgram};
use crate::ir::{Func, MemorySpace, Region, Type, ValueId};
use std::collections::HashSet;

/// Hardware limits the rules use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TpuLimits {
    /// Scoped VMEM a kernel may use (Mosaic's default limit is 16 MiB on v5e and later).
    pub vmem_bytes: usize,
}

impl Default for TpuLimits {
    fn default() -> Self {
        TpuLimits {
            vmem_bytes: 16 << 20,
        }
    }
}

/// Checks, in order: block tiling (last two dims multiples of (8, 128) or the whole array
/// dim), no 64-bit types, reduction grid axes arbitrary and last, and the VMEM budget.
pub fn check_tpu(program: &KernelProgram, limits: &TpuLimits) -> Result<(), TraceError> {
    for (role, list) in [("input", &program.inputs), ("output", &program.outputs)] {
        for o in list {
            check_tiling(role, o)?;
        }
    }
    check_no_64_bit(program)?;
    check_reduction_axes(program)?;
    check_vmem(program, limits)
}

fn check_tiling(role: &str, o: &BlockOperand) -> Result<(), TraceError> {
    let rank = o.block_shape.len();
    for (from_end, multiple) in [(1, 128), (2, 8)] {
        if rank < from_end {
            continue;
        }
        let d = rank - from_end;
        let (b, a) = (o.block_shape[d], o.array_shape[d]);
        if b % multiple != 0 && b != a {
            return Err(TraceError::Launch {
                message: format!(
                    "{role} `{}`: block dim {d} is {b}; on TPU the last two block dims must be multiples of (8, 128) \
                     or equal the array's dims (block {:?}, array {:?})",
                    o.name, o.block_shape, o.array_shape
                ),
                loc: o.index_map.loc,
            });
        }
    }
    Ok(())
}

fn check_no_64_bit(program: &KernelProgram) -> Result<(), TraceError> {
    let wide = |t: &Type| t.dtype().bits() == 64;
    for o in program.inputs.iter().chain(&program.outputs) {
        if o.dtype.bits() == 64 {
            let message = format!(
                "operand `{}` is {}: TPUs have no 64-bit types",
                o.name, o.dtype
            );
            return Err(TraceError::Launch {
                message,
                loc: program.launch_loc,
            });
        }
    }
    for s in &program.scratch {
        if s.dtype.bits() == 64 {
            let message = format!(
                "scratch `{}` is {}: TPUs have no 64-bit types",
                s.name, s.dtype
            );
            return Err(TraceError::Launch {
                message,
                loc: program.launch_loc,
            });
        }
    }
    match first_op_with(&program.body.body, &|results: &[ValueId]| {
        results.iter().any(|r| wide(program.body.ty(*r)))
    }) {
        Some((name, loc)) => Err(TraceError::Op {
            op: name,
            message: "computes a 64-bit value: TPUs have no 64-bit types".into(),
            loc,
        }),
        None => Ok(()),
    }
}

fn first_op_with(
    r: &Region,
    pred: &dyn Fn(&[ValueId]) -> bool,
) -> Option<(&'static str, crate::ir::Loc)> {
    r.ops.iter().find_map(|op| {
        if pred(&op.results) {
            return Some((op.kind.name(), op.loc));
        }
        op.kind
            .regions()
            .into_iter()
            .find_map(|inner| first_op_with(inner, pred))
    })
}

/// Grid params an index map's results depend on.
fn used_axes(f: &Func) -> HashSet<usize> {
    // Values flow forward, so walking ops backwards from the yields finds every dependency.
    let mut live: HashSet<ValueId> = f.results().iter().copied().collect();
    for op in f.body.ops.iter().rev() {
        if op.results.iter().any(|r| live.contains(r)) {
            live.extend(op.kind.operands());
            op.kind
                .regions()
                .into_iter()
                .for_each(|r| every_use(r, &mut live));
        }
    }
    f.params()
        .iter()
        .enumerate()
        .filter(|(_, p)| live.contains(p))
        .map(|(i, _)| i)
        .collect()
}

/// Conservatively, everything a region uses is live.
fn every_use(r: &Region, live: &mut HashSet<ValueId>) {
    live.extend(r.yields.iter().copied());
    for op in &r.ops {
        live.extend(op.kind.operands());
        op.kind
            .regions()
            .into_iter()
            .for_each(|inner| every_use(inner, live));
    }
}

/// An output whose index map ignores a grid axis is revisited along it: a reduction axis,
/// which must be `Arbitrary` and come after every parallel axis.
fn check_reduction_axes(program: &KernelProgram) -> Result<(), TraceError> {
    for o in &program.outputs {
        let used = used_axes(&o.index_map);
        for (axis, &extent) in program.grid.iter().enumerate() {
            if extent == 1 || used.contains(&axis) {
                continue;
            }
            let message = if program.semantics[axis] != DimensionSemantics::Arbitrary {
                format!("output `{}` is revisited along grid axis {axis} (its index map ignores it), so that axis must be `Arbitrary`", o.name)
            } else if let Some(later) = (axis + 1..program.grid.len())
                .find(|&a| program.semantics[a] == DimensionSemantics::Parallel)
            {
                format!("reduction grid axis {axis} of output `{}` must come after the parallel axis {later}: put reduction axes last", o.name)
            } else {
                continue;
            };
            return Err(TraceError::Launch {
                message,
                loc: program.launch_loc,
            });
        }
    }
    Ok(())
}

/// Blocks are double-buffered (the pipeline prefetches the next while computing this one).
fn check_vmem(program: &KernelProgram, limits: &TpuLimits) -> Result<(), TraceError> {
    let bytes =
        |dtype: crate::DType, shape: &[usize]| dtype.size_bytes() * shape.iter().product::<usize>();
    let blocks: usize = program
        .inputs
        .iter()
        .chain(&program.outputs)
        .map(|o| 2 * bytes(o.dtype, &o.block_shape))
        .sum();
    let scratch: usize = program
        .scratch
        .iter()
        .filter(|s| s.space == MemorySpace::Vmem)
        .map(|s| bytes(s.dtype, &s.shape))
        .sum();
    let total = blocks + scratch;
    if total > limits.vmem_bytes {
        return Err(TraceError::Launch {
            message: format!(
                "needs {:.1} MiB of VMEM ({:.1} MiB of double-buffered blocks, {:.1} MiB of scratch), the limit is {:.1} MiB: use smaller blocks",
                mib(total),
                mib(blocks),
                mib(scratch),
                mib(limits.vmem_bytes)
            ),
            loc: program.launch_loc,
        });
    }
    Ok(())
}

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}
