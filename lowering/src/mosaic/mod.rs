//! Kernel -> Mosaic TPU. [`lower_to_mosaic`] checks a [`KernelProgram`] against the TPU's
//! rules ([`checks`]) and prints it as a Mosaic module in two spellings: the serialized
//! form that `tpu_custom_call` carries (generic ops renamed `stable_mosaic.<dialect>.<op>`,
//! module attribute `stable_mosaic.version`), and a readable one with plain dialect names.
//! [`tpu_custom_call`] wraps it in the StableHLO module that XLA/libtpu compile.
//!
//! The kernel func follows what Pallas emits (learned from `jax` 0.10.2's lowering of
//! add / matmul / softmax, see `tools/pallas_structure.py`): args are the grid indices
//! (`i32`), one `memref<block, #tpu.memory_space<vmem>>` per input and output, then the
//! scratch refs; attributes `dimension_semantics` (`parallel`, `core_parallel`, `arbitrary`),
//! `iteration_bounds`, `scalar_prefetch`,
//! `scratch_operands`, `tpu.core_type` and `window_params`, whose `transform_indices` are
//! the traced index maps. IR ops map to `arith`, `math`, `vector` (`load`/`store`,
//! `multi_reduction`, `broadcast`, `shape_cast`), `scf` (`if`, `for`) and `tpu`
//! (`matmul`, `iota`); see `body.rs`, `elementwise.rs`, `shape.rs`. Operands left in HBM
//! (`BlockSpec::any()`) are `#tpu.memory_space<any>` memrefs with no window (`{}`), DMAs are
//! `tpu.enqueue_dma`/`tpu.wait_dma2` on semaphore scratch (`dma.rs`), and scoped scratch is a
//! `tpu.region` (`scoped.rs`).

pub mod alignment;
mod body;
pub mod checks;
pub mod cost;
pub mod custom_call;
mod dma;
mod elementwise;
mod error;
mod generation;
mod module;
mod printer;
mod scoped;
mod shape;
mod slice;
mod types;

pub use checks::{check_program, VmemUsage};
pub use cost::CostEstimate;
pub use custom_call::{backend_config, tpu_custom_call};
pub use error::MosaicError;
pub use generation::TpuGeneration;
pub use printer::Flavor;

use crate::ir::KernelProgram;

/// The `stable_mosaic.version` of the serialized form: what jax 0.10.2 emits, which the
/// libtpu releases of DESIGN.md section 5 deserialize.
pub const MOSAIC_VERSION: u32 = 11;

/// A kernel lowered for one TPU generation.
#[derive(Clone, Debug, PartialEq)]
pub struct MosaicKernel {
    /// The kernel func's symbol, also the custom call's `kernel_name`.
    pub name: String,
    pub generation: TpuGeneration,
    /// The module as `tpu_custom_call` carries it (before base64).
    pub serialized: String,
    /// The same module with plain dialect names, for people.
    pub readable: String,
    pub vmem: VmemUsage,
    pub cost: CostEstimate,
}

impl MosaicKernel {
    /// The scoped VMEM limit to ask for, when the footprint exceeds the generation's
    /// default: the footprint plus a quarter of headroom (Mosaic's own temporaries live
    /// there too), rounded up to MiB and capped at the physical size.
    pub fn vmem_limit_bytes(&self) -> Option<usize> {
        let needed = self.vmem.total();
        if needed <= self.generation.default_scoped_vmem_bytes() {
            return None;
        }
        let mib = 1 << 20;
        let padded = (needed + needed / 4).div_ceil(mib) * mib;
        Some(padded.min(self.generation.vmem_capacity_bytes()))
    }
}

/// Checks `program` against the TPU rules of `generation`, then prints its Mosaic module.
pub fn lower_to_mosaic(
    program: &KernelProgram,
    generation: TpuGeneration,
) -> Result<MosaicKernel, MosaicError> {
    alignment::check_dynamic_indices(program)?;
    lower_to_mosaic_unaligned(program, generation)
}

/// [`lower_to_mosaic`] without the traced-index alignment check ([`alignment`]): what the
/// tests hand to libtpu to show that it refuses exactly what the check refuses.
#[doc(hidden)]
pub fn lower_to_mosaic_unaligned(
    program: &KernelProgram,
    generation: TpuGeneration,
) -> Result<MosaicKernel, MosaicError> {
    let vmem = check_program(program, generation)?;
    Ok(MosaicKernel {
        name: program.name.clone(),
        generation,
        serialized: module::print_module(program, Flavor::Serialized)?,
        readable: module::print_module(program, Flavor::Readable)?,
        vmem,
        cost: cost::estimate(program),
    })
}
