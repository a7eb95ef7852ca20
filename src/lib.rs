//! Tessera: a kernel-authoring DSL and JIT for TPUs.
pub use tessera_lowering as lowering;
pub use tessera_runtime as runtime;
