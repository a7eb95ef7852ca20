//! Tessera's lowering crate: the kernel IR, the tracer types that form the DSL vocabulary,
//! and the emitters (StableHLO, Mosaic) plus the reference interpreter.

pub mod dtype;
pub mod host;

pub use dtype::DType;
pub use host::{HostElement, HostTensor, HostTensorError};
