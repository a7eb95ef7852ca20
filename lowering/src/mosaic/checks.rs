//! TPU rules checked before emitting, each reported at the user's source location. Mosaic
//! and libtpu report these late and opaquely ("Used X of Y vmem", layout failures), so we
//! catch them here with the BlockSpec, op or launch that caused them.

use super::error::MosaicError;
use super::generation::TpuGeneration;
use crate::dtype::DType;
use crate::ir::{BlockOperand, DimensionSemantics, KernelProgram};
use crate::ir::{Func, MemorySpace, Region, ValueId};
use std::collections::HashSet;

/// What a kernel needs in VMEM, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmemUsage {
    /// Every input and output window, once per pipeline buffer: twice by default (the
    /// pipeline fetches the next block while the kernel works on this one), once for
    /// `BlockSpec::buffered(1)`.
    pub windows: usize,
    /// VMEM scratch buffers (allocated once).
    pub scratch: usize,
}

impl VmemUsage {
    pub fn total(&self) -> usize {
        self.windows + self.scratch
    }
}

/// All checks, in order: 64-bit types, tiling, reduction axes, core-parallel extents, VMEM
/// budget. (`lower_to_mosaic` also checks traced indices' alignment, `alignment.rs`.)
pub fn check_program(
    program: &KernelProgram,
    generation: TpuGeneration,
) -> Result<VmemUsage, MosaicError> {
    check_no_64_bit(program)?;
    for (role, list) in [("input", &program.inputs), ("output", &program.outputs)] {
        // HBM operands have no window: nothing to tile.
        for o in list.iter().filter(|o| o.space != MemorySpace::Any) {
            check_tiling(role, o)?;
        }
    }
    check_reduction_axes(program)?;
    check_core_parallel(program, generation)?;
    check_vmem(program, generation)
}

/// A `CoreParallel` axis has exactly one step per TensorCore of the generation (libtpu's
/// rule; see [`TpuGeneration::active_tensor_cores`]), reported at the `.semantics(..)` call.
pub fn check_core_parallel(
    program: &KernelProgram,
    generation: TpuGeneration,
) -> Result<(), MosaicError> {
    let cores = generation.active_tensor_cores();
    let core_axes = program
        .semantics
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == DimensionSemantics::CoreParallel);
    for (axis, _) in core_axes {
        let extent = program.grid[axis];
        if extent != cores {
            return Err(MosaicError::CoreParallel {
                axis,
                extent,
                cores,
                generation: generation.name(),
                loc: program.semantics_loc,
            });
        }
    }
    Ok(())
}

/// Rows per native tile: a 32-bit vreg holds 8 x 128; narrower types pack more rows.
pub fn sublane_tile(dtype: DType) -> usize {
    match dtype.bits() {
        32.. => 8,
        16 => 16,
        _ => 32,
    }
}

/// The last two block dims are multiples of (sublanes, 128) or equal the array's dims.
pub fn check_tiling(role: &str, o: &BlockOperand) -> Result<(), MosaicError> {
    let rank = o.block_shape.len();
    let sublanes = sublane_tile(o.dtype);
    for (from_end, multiple) in [(1, 128), (2, sublanes)] {
        if rank < from_end {
            continue;
        }
        let d = rank - from_end;
        let (b, a) = (o.block_shape[d], o.array_shape[d]);
        if b % multiple != 0 && b != a {
            return Err(MosaicError::Tiling {
                what: format!("{role} `{}`", o.name),
                dtype: o.dtype,
                block: o.block_shape.clone(),
                array: o.array_shape.clone(),
                sublanes,
                loc: o.index_map.loc,
            });
        }
    }
    Ok(())
}

/// TPUs have no 64-bit vector or scalar units (and kernels no complex types).
pub fn check_no_64_bit(program: &KernelProgram) -> Result<(), MosaicError> {
    let wide = |d: DType| d.bits() >= 64;
    let err = |what: String, dtype: DType, loc| {
        Err(if dtype.is_complex() {
            MosaicError::Complex { what, dtype, loc }
        } else {
            MosaicError::SixtyFourBit { what, dtype, loc }
        })
    };
    for o in program.inputs.iter().chain(&program.outputs) {
        if wide(o.dtype) {
            return err(format!("operand `{}`", o.name), o.dtype, program.launch_loc);
        }
    }
    if let Some(p) = program.prefetch.iter().find(|p| wide(p.dtype)) {
        return err(
            format!("scalar prefetch `{}`", p.name),
            p.dtype,
            program.launch_loc,
        );
    }
    if let Some(s) = program.scratch.iter().find(|s| wide(s.dtype)) {
        return err(format!("scratch `{}`", s.name), s.dtype, program.launch_loc);
    }
    let funcs = std::iter::once(&program.body).chain(
        program
            .inputs
            .iter()
            .chain(&program.outputs)
            .map(|o| &o.index_map),
    );
    for f in funcs {
        if let Some((op, dtype, loc)) = first_wide_op(f, &f.body) {
            return err(format!("the result of `{op}`"), dtype, loc);
        }
    }
    Ok(())
}

fn first_wide_op(f: &Func, r: &Region) -> Option<(&'static str, DType, crate::ir::Loc)> {
    r.ops.iter().find_map(|op| {
        let wide = op
            .results
            .iter()
            .map(|v| f.ty(*v).dtype())
            .find(|d| d.bits() >= 64);
        match wide {
            Some(d) => Some((op.kind.name(), d, op.loc)),
            None => op
                .kind
                .regions()
                .into_iter()
                .find_map(|inner| first_wide_op(f, inner)),
        }
    })
}

/// Grid axes an index map's results depend on.
pub fn used_axes(f: &Func) -> HashSet<usize> {
    // Values flow forward, so walking the ops backwards from the yields finds every
    // dependency; a region op that is live makes everything it uses live.
    let mut live: HashSet<ValueId> = f.results().iter().copied().collect();
    for op in f.body.ops.iter().rev() {
        if op.results.iter().any(|r| live.contains(r)) {
            live.extend(op.kind.operands());
            op.kind
                .regions()
                .into_iter()
                .for_each(|r| all_uses(r, &mut live));
        }
    }
    f.params()
        .iter()
        .enumerate()
        .filter(|(_, p)| live.contains(p))
        .map(|(i, _)| i)
        .collect()
}

fn all_uses(r: &Region, live: &mut HashSet<ValueId>) {
    live.extend(r.yields.iter().copied());
    for op in &r.ops {
        live.extend(op.kind.operands());
        op.kind
            .regions()
            .into_iter()
            .for_each(|inner| all_uses(inner, live));
    }
}

/// A grid axis that an output's index map ignores while some input's varies on it is a
/// reduction axis: the output block stays resident and accumulates across it, so its
/// steps must run in order (`Arbitrary`) and after every parallel axis.
pub fn check_reduction_axes(program: &KernelProgram) -> Result<(), MosaicError> {
    let input_axes: HashSet<usize> = program
        .inputs
        .iter()
        .flat_map(|o| used_axes(&o.index_map))
        .collect();
    // An HBM output is written by DMA wherever the body says: no resident block.
    for o in program
        .outputs
        .iter()
        .filter(|o| o.space != MemorySpace::Any)
    {
        let used = used_axes(&o.index_map);
        for (axis, &extent) in program.grid.iter().enumerate() {
            if extent == 1 || used.contains(&axis) || !input_axes.contains(&axis) {
                continue;
            }
            let later_parallel =
                (axis + 1..program.grid.len()).find(|&a| program.semantics[a].is_parallel());
            let marked = program.semantics[axis];
            let reason = if marked.is_parallel() {
                let name = match marked {
                    DimensionSemantics::CoreParallel => "CoreParallel",
                    _ => "Parallel",
                };
                format!("it must be `Arbitrary`, not `{name}` (parallel steps may run on different cores and race on the output)")
            } else if let Some(later) = later_parallel {
                format!("it must come after the parallel axis {later}: put reduction axes last")
            } else {
                continue;
            };
            return Err(MosaicError::ReductionAxis {
                output: o.name.clone(),
                axis,
                reason,
                loc: program.semantics_loc,
            });
        }
    }
    Ok(())
}

/// The kernel's VMEM footprint, which must fit the generation's physical VMEM (the
/// `tpu_custom_call` raises the scoped limit when it exceeds the default).
pub fn check_vmem(
    program: &KernelProgram,
    generation: TpuGeneration,
) -> Result<VmemUsage, MosaicError> {
    let usage = vmem_usage(program);
    let limit = generation.vmem_capacity_bytes();
    if usage.total() > limit {
        return Err(MosaicError::VmemBudget {
            needed: usage.total(),
            windows: usage.windows,
            scratch: usage.scratch,
            limit,
            generation: generation.name(),
            loc: program.launch_loc,
        });
    }
    Ok(usage)
}

pub fn vmem_usage(program: &KernelProgram) -> VmemUsage {
    let bytes =
        |dtype: DType, shape: &[usize]| dtype.size_bytes() * shape.iter().product::<usize>();
    let windows = program
        .inputs
        .iter()
        .chain(&program.outputs)
        .map(|o| o.window_buffers() * bytes(o.dtype, &o.block_shape))
        .sum();
    let scratch = program
        .scratch
        .iter()
        .filter(|s| s.space == MemorySpace::Vmem)
        .map(|s| bytes(s.dtype, &s.shape))
        .sum::<usize>()
        + scoped_vmem(&program.body, &program.body.body);
    VmemUsage { windows, scratch }
}

/// VMEM of every `run_scoped` buffer in `r` (an upper bound: sibling scopes could share).
fn scoped_vmem(f: &Func, r: &Region) -> usize {
    r.ops
        .iter()
        .map(|op| {
            let own: usize = match &op.kind {
                crate::ir::OpKind::RunScoped { body } => body
                    .args
                    .iter()
                    .map(|a| match f.ty(*a) {
                        crate::ir::Type::Ref {
                            dtype,
                            shape,
                            space: MemorySpace::Vmem,
                        } => dtype.size_bytes() * shape.iter().product::<usize>(),
                        _ => 0,
                    })
                    .sum(),
                _ => 0,
            };
            own + op
                .kind
                .regions()
                .into_iter()
                .map(|inner| scoped_vmem(f, inner))
                .sum::<usize>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrower_types_need_taller_tiles() {
        let tiles: Vec<usize> = [
            DType::F32,
            DType::I32,
            DType::BF16,
            DType::F16,
            DType::I8,
            DType::Bool,
        ]
        .map(sublane_tile)
        .to_vec();
        assert_eq!(tiles, [8, 8, 16, 16, 32, 32]);
    }
}
