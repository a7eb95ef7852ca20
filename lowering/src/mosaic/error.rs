//! Errors of the Mosaic lowering. Every variant carries the user's source location, so a
//! TPU problem points at the kernel line, `BlockSpec::new` call or launch that caused it.

use crate::dtype::DType;
use crate::ir::Loc;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MosaicError {
    /// An IR op (or a form of one) that has no Mosaic lowering.
    #[error("{loc}: `{op}` is not supported on TPU: {reason}")]
    Unsupported {
        op: &'static str,
        reason: String,
        loc: Loc,
    },
    /// A block shape that breaks the TPU's (sublane, lane) tiling.
    #[error("{loc}: {what}: block {block:?} of array {array:?}: on TPU the last two block dims must be multiples of ({sublanes}, 128) for {dtype} or equal the array's dims")]
    Tiling {
        what: String,
        dtype: DType,
        block: Vec<usize>,
        array: Vec<usize>,
        sublanes: usize,
        loc: Loc,
    },
    #[error("{loc}: {what} is {dtype}: TPU kernels take real element types only")]
    Complex {
        what: String,
        dtype: DType,
        loc: Loc,
    },
    #[error("{loc}: {what} is {dtype}: TPUs have no 64-bit types")]
    SixtyFourBit {
        what: String,
        dtype: DType,
        loc: Loc,
    },
    #[error("{loc}: needs {needed} bytes of VMEM ({windows} for windows, counted once per pipeline buffer, {scratch} for scratch) but {generation} has {limit} bytes: use smaller blocks")]
    VmemBudget {
        needed: usize,
        windows: usize,
        scratch: usize,
        limit: usize,
        generation: &'static str,
        loc: Loc,
    },
    #[error("{loc}: grid axis {axis} is a reduction axis of output `{output}` (its index map ignores it): {reason}")]
    ReductionAxis {
        output: String,
        axis: usize,
        reason: String,
        loc: Loc,
    },
    /// A `CoreParallel` axis whose extent is not the generation's TensorCore count.
    #[error("{loc}: grid axis {axis} is `CoreParallel` with {extent} steps, but {generation} runs a kernel on {cores} TensorCore(s): a core-parallel axis has one step per core, so it needs exactly {cores} steps here (use `Parallel` otherwise)")]
    CoreParallel {
        axis: usize,
        extent: usize,
        cores: usize,
        generation: &'static str,
        loc: Loc,
    },
    /// A VMEM vector access at a traced index libtpu cannot prove aligned
    /// (`alignment.rs` has the measured rule).
    #[error("{loc}: `{op}` of a VMEM ref of shape {shape:?} at a traced index along dim {dim} ({what}): on TPU that index must be provably a multiple of {multiple} (a constant multiple, or `i * {multiple}` plus such multiples), and this one is not; read unaligned windows with a DMA (`async_copy`) instead")]
    UnalignedIndex {
        op: &'static str,
        dim: usize,
        shape: Vec<usize>,
        multiple: usize,
        what: &'static str,
        loc: Loc,
    },
    /// An element window (`BlockSpec::element`) at an offset along one of its last two dims
    /// that libtpu cannot prove tile-aligned (`alignment.rs` has the measured rule).
    #[error("{loc}: `{what}`: the index map's element offset along dim {dim}, one of the window's last two (tiled) dims, must be provably a multiple of {multiple} on TPU (a constant multiple, or `i * {multiple}` plus such multiples), and this one is not; give unaligned element offsets along leading dims only, or copy such rows by DMA (`BlockSpec::any()` and `async_copy`)")]
    UnalignedElementOffset {
        what: String,
        dim: usize,
        multiple: usize,
        loc: Loc,
    },
    #[error("unknown TPU topology `{0}` (expected e.g. v4:2x2x1, v5e:2x2, v5p:2x2x1, v6e:2x2, tpu7x:2x2x1)")]
    UnknownTopology(String),
    #[error("TPU device kind `{0}` is no generation Tessera targets (expected TPU v4, TPU v5 lite, TPU v5p, TPU v6 lite or TPU7x)")]
    UnknownDeviceKind(String),
    /// The StableHLO wrapper could not be built.
    #[error("{loc}: building the tpu_custom_call wrapper: {message}")]
    Wrapper { message: String, loc: Loc },
}
