//! Tessera: a kernel-authoring DSL and JIT for TPUs.
//!
//! This facade re-exports the crates users need and hosts the `tessera` CLI.

pub use tessera_eager as eager;
pub use tessera_lowering as lowering;
pub use tessera_ops as ops;
pub use tessera_runtime as runtime;

pub mod cli;
pub mod samples;
pub use tessera_kernels::tuning;
