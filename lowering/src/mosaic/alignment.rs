//! Vector loads and stores at traced indices: libtpu accepts a dynamic index along a VMEM
//! ref's last two dims only where it can prove it aligned, and otherwise fails late with
//! "cannot statically prove that index in dimension 1 is a multiple of 128" at a line of
//! generated MLIR. This check refuses such an access first, at the user's line.
//!
//! The rule, measured with libtpu AOT compiles for v5e, v6e and tpu7x (all three agree;
//! `kernels/tests/dynamic_index_tests.rs`): `load_slice`/`store_slice` of f32 and bf16 refs
//! and 32-bit `load_scalar`/`store_scalar` on VMEM take a traced index
//! - along the last dim (lanes) only when it is provably a multiple of 128,
//! - along the second-minor dim (sublanes) only when it is provably a multiple of 8 (bf16
//!   too: `s * 8` compiles, `s * 2` does not),
//! - along leading dims freely.
//!
//! "Provably" as libtpu proves it: an integer constant that is a multiple; a product with
//! either factor provably a multiple; a sum or difference of two provable multiples
//! (`s * 8 + 8` compiles, `s * 128 + 1` and `s` do not); a value promised a multiple with
//! `multiple_of(n)` (`tpu.assume_multiple`, as Pallas' `pl.multiple_of`). Anything else (a grid
//! index, a loop index, a value read from memory) is not provable.
//!
//! One element read from a VMEM ref (`load_scalar`), at any index, is 32-bit only: bf16 and
//! f16 reads are refused here too (writing one element compiles).
//!
//! Element windows (`BlockSpec::element`) follow the same rule for the offsets their
//! transform functions return along the window's last two dims: libtpu fails with "Couldn't
//! prove that tiling (8) divides index returned by transform_indices on dimension 0" for an
//! f32 window at `i * 4` or at a row read from SMEM, and "tiling (128)" for lanes at
//! `i * 64`; `i * 8`, `i * 16` and constants compile, and leading dims take any offset (a
//! 3-D window at `i * 2`, or at an SMEM value) (measured for v5e, v6e and tpu7x, f32; other
//! dtypes are assumed to need their sublane tile, as their blocks do).

use super::checks::sublane_tile;
use super::error::MosaicError;
use crate::ir::{BinaryOp, KernelProgram, Literal, MemorySpace, Offset, OpKind, Operation};
use crate::ir::{Func, Region, Type, ValueId};
use std::collections::HashMap;

/// Lanes per vreg: the multiple a traced last-dim index must be.
pub const LANE_MULTIPLE: usize = 128;
/// The multiple a traced second-minor index must be (f32 and bf16 alike).
pub const SUBLANE_MULTIPLE: usize = 8;

/// Refuses every VMEM vector access of the kernel body whose traced index libtpu cannot
/// prove aligned (module docs).
pub fn check_dynamic_indices(program: &KernelProgram) -> Result<(), MosaicError> {
    let body = &program.body;
    // Squeezed block dims come back as size-1 memref dims: the last two dims are the
    // memref's, not the IR ref's.
    let mut squeezed: HashMap<ValueId, &[usize]> = HashMap::new();
    for (k, o) in program.inputs.iter().chain(&program.outputs).enumerate() {
        if let Some(&p) = body.params().get(program.input_param(k)) {
            squeezed.insert(p, &o.squeezed);
        }
    }
    let mut defs = HashMap::new();
    collect_defs(&body.body, &mut defs);
    let check = Check {
        func: body,
        defs,
        squeezed,
    };
    check.region(&body.body)?;
    check_element_windows(program)
}

/// Refuses an element window whose offset along one of its last two dims libtpu cannot
/// prove a multiple of the tile (module docs), at the BlockSpec's line.
fn check_element_windows(program: &KernelProgram) -> Result<(), MosaicError> {
    let operands = program.inputs.iter().chain(&program.outputs);
    for o in operands.filter(|o| !o.element.is_empty() && o.space != MemorySpace::Any) {
        let map = &o.index_map;
        let mut defs = HashMap::new();
        collect_defs(&map.body, &mut defs);
        let check = Check {
            func: map,
            defs,
            squeezed: HashMap::new(),
        };
        let rank = o.block_shape.len();
        let tiled = [(2, sublane_tile(o.dtype)), (1, LANE_MULTIPLE)];
        for (from_end, multiple) in tiled.into_iter().filter(|&(e, _)| e <= rank) {
            let d = rank - from_end;
            let Some(&r) = map.results().get(d) else {
                continue;
            };
            // Mosaic gets `index * block` for a dim that is not an element dim.
            let block = o.block_shape[d] as i64;
            let scaled = !o.is_element(d) && block % multiple as i64 == 0;
            if scaled || check.multiple_of(r, multiple as i64) {
                continue;
            }
            return Err(MosaicError::UnalignedElementOffset {
                what: o.name.clone(),
                dim: d,
                multiple,
                loc: map.loc,
            });
        }
    }
    Ok(())
}

struct Check<'a> {
    func: &'a Func,
    defs: HashMap<ValueId, &'a Operation>,
    squeezed: HashMap<ValueId, &'a [usize]>,
}

fn collect_defs<'a>(region: &'a Region, defs: &mut HashMap<ValueId, &'a Operation>) {
    for op in &region.ops {
        for r in &op.results {
            defs.insert(*r, op);
        }
        for inner in op.kind.regions() {
            collect_defs(inner, defs);
        }
    }
}

impl Check<'_> {
    fn region(&self, region: &Region) -> Result<(), MosaicError> {
        for op in &region.ops {
            let access = match &op.kind {
                OpKind::LoadSlice { src, starts, .. } => Some((*src, starts)),
                OpKind::StoreSlice { dst, starts, .. } => Some((*dst, starts)),
                OpKind::LoadElement { src, indices } => Some((*src, indices)),
                OpKind::StoreElement { dst, indices, .. } => Some((*dst, indices)),
                _ => None,
            };
            if let Some((r, offsets)) = access {
                self.access(op, r, offsets)?;
            }
            if let OpKind::LoadElement { src, .. } = &op.kind {
                self.element_read(op, *src)?;
            }
            for inner in op.kind.regions() {
                self.region(inner)?;
            }
        }
        Ok(())
    }

    fn access(&self, op: &Operation, r: ValueId, offsets: &[Offset]) -> Result<(), MosaicError> {
        let Type::Ref { shape, space, .. } = self.func.ty(r) else {
            return Ok(());
        };
        if *space != MemorySpace::Vmem {
            return Ok(());
        }
        let squeezed = self.squeezed.get(&r).copied().unwrap_or(&[]);
        let rank = shape.len() + squeezed.len();
        // The memref dim of each IR dim.
        let dims: Vec<usize> = (0..rank).filter(|d| !squeezed.contains(d)).collect();
        for (i, offset) in offsets.iter().enumerate() {
            let Offset::Dynamic(v) = offset else { continue };
            let Some(&dim) = dims.get(i) else { continue };
            let (multiple, what) = if dim + 1 == rank {
                (LANE_MULTIPLE, "last dim, lanes")
            } else if dim + 2 == rank {
                (SUBLANE_MULTIPLE, "second-minor dim, sublanes")
            } else {
                continue;
            };
            if !self.multiple_of(*v, multiple as i64) {
                return Err(MosaicError::UnalignedIndex {
                    op: op.kind.name(),
                    dim: i,
                    shape: shape.clone(),
                    multiple,
                    what,
                    loc: op.loc,
                });
            }
        }
        Ok(())
    }

    /// One element read from a VMEM ref (`load_scalar`): libtpu extracts 32-bit elements
    /// only ("Only 32-bit scalar vector.extracts supported", measured on v5e, v6e and tpu7x
    /// at static and traced indices alike; f32 compiles, bf16 and f16 do not; writing one
    /// bf16 element compiles).
    fn element_read(&self, op: &Operation, r: ValueId) -> Result<(), MosaicError> {
        let Type::Ref { dtype, space, .. } = self.func.ty(r) else {
            return Ok(());
        };
        if *space != MemorySpace::Vmem || dtype.bits() == 32 {
            return Ok(());
        }
        Err(MosaicError::Unsupported {
            op: op.kind.name(),
            reason: format!(
                "one element read from a {dtype} VMEM ref: TPUs read single VMEM elements \
                 in 32-bit types only; load a window (`load_slice`) and reduce it, or keep \
                 the values in a 32-bit ref"
            ),
            loc: op.loc,
        })
    }

    /// Whether `v` is provably a multiple of `m`, by libtpu's rules (module docs).
    fn multiple_of(&self, v: ValueId, m: i64) -> bool {
        let Some(op) = self.defs.get(&v) else {
            return false;
        };
        match &op.kind {
            OpKind::Constant {
                value: Literal::Int(c),
            } => c % m == 0,
            OpKind::Binary {
                op: BinaryOp::Mul,
                lhs,
                rhs,
            } => self.multiple_of(*lhs, m) || self.multiple_of(*rhs, m),
            OpKind::Binary {
                op: BinaryOp::Add | BinaryOp::Sub,
                lhs,
                rhs,
            } => self.multiple_of(*lhs, m) && self.multiple_of(*rhs, m),
            OpKind::AssumeMultiple { multiple, .. } => *multiple as i64 % m == 0,
            _ => false,
        }
    }
}
