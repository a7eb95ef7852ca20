//! The kernel IR: typed SSA values with static shapes, ops with source locations, regions
//! for `if` and `fori`, a verifier, a stable structural hash and a text dump; and
//! [`KernelProgram`], a traced launch (body, grid, block operands), which every emitter reads.

pub mod discharge;
mod display;
mod func;
mod hash;
mod loc;
mod op;
mod op_info;
pub mod prng;
mod program;
mod types;
mod verify;

pub use func::Func;
pub use hash::{hash_func_into, structural_hash, Fnv1a};
pub use loc::Loc;
pub use op::{
    BinaryOp, CompareOp, DmaCopy, Literal, Offset, OpKind, Operation, ReduceOp, Region, UnaryOp,
    ValueId,
};
pub use op_info::{CostClass, Domain, MosaicOps, OpInfo};
pub use program::{
    index_map_checked_at_trace, BlockOperand, DimensionSemantics, KernelProgram, PrefetchOperand,
    ScratchBuffer,
};
pub use types::{MemorySpace, Type};
pub use verify::{
    bitcast_shape, check_op, dot_accumulator, reduced_shape, slice_in_bounds, verify, VerifyError,
};
