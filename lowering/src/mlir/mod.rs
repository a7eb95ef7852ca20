//! The MLIR text layer under both emitters: the StableHLO builder and the Mosaic printer
//! print ops, types and literals through it, so both spell MLIR one way.
//!
//! * [`generic_op`]: one op in MLIR's generic form (`%3 = "arith.addf"(%1, %2) : (f32, f32)
//!   -> f32`), with regions. Generic form is the only form Mosaic's serialized text allows,
//!   and one every StableHLO parser accepts, so it is the only form printed.
//! * [`types`]: `tensor<..>`, `vector<..>`, `memref<.., #tpu.memory_space<..>>`, `array<..>`.
//! * [`literal`]: float literals exact in their type (shortest round-trip decimal, hex bits
//!   for non-finite values) and attribute values of IR literals.
//! * [`loc`]: the user's source location of an op, `loc("file":line:col)` after its type.

pub mod literal;
pub mod loc;
mod op;
pub mod types;

pub use literal::float_literal;
pub(crate) use op::{block, generic_op, result_types};
