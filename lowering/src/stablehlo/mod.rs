//! StableHLO: a typed text builder (used by the kernel emitter here and by the ATen
//! lowerings of the `tessera-ops` crate) and the kernel -> StableHLO emitter ([`kernel`]).
//!
//! The builder ([`FuncBuilder`]) makes one `func.func public @main(args) -> (results)` in a
//! `module`. Each op is a method that checks its operands per the StableHLO spec, infers the
//! result type and returns typed [`Value`]s; mistakes are [`BuildError`]s, never panics or
//! text the parser rejects. Region ops (`while_loop`, `fori_loop`, `if_else`, `case`,
//! `reduce`, `reduce_window`, `scatter`, `sort`) take closures that get the builder and the
//! region's arguments; using a value outside the region that defines it is an error. Ops
//! print in MLIR's generic form, which both jaxlib's parser and the XLA CPU plugin's
//! (StableHLO 1.13) accept. Element types include complex (`c64`, `c128`): `fft`, `complex`,
//! `real`, `imag`, and the elementwise ops the spec defines on complex take them.
//! The tests verify and run emitted text with jaxlib (`lowering/tests/jaxlib_oracle`).
//!
//! Building `add` with broadcasting, a reduction and a matmul:
//! ```
//! use tessera_lowering::stablehlo::{FuncBuilder, TensorType, BinaryOp};
//! use tessera_lowering::DType;
//! let mut f = FuncBuilder::new("main");
//! let a = f.arg(TensorType::new([4, 3], DType::F32));
//! let b = f.arg(TensorType::new([3], DType::F32));
//! let c = f.broadcast_binary(BinaryOp::Add, &a, &b)?;   // [4, 3]
//! let s = f.reduce_sum(&c, &[1], true)?;                // [4, 1]
//! let w = f.arg(TensorType::new([3, 5], DType::F32));
//! let m = f.matmul(&c, &w)?;                            // [4, 5]
//! let module = f.finish(&[&s, &m])?;
//! assert!(module.text().contains("stablehlo.dot_general"));
//! # Ok::<(), tessera_lowering::stablehlo::BuildError>(())
//! ```

mod builder;
mod error;
pub mod kernel;
mod literal;
pub mod ops;
mod types;

pub use builder::{FuncBuilder, Module};
pub use error::BuildError;
pub use kernel::{
    batched_form_applies, emit_kernel, emit_kernel_as, emit_kernel_checked, Access, BoundsCheck,
    CheckedModule, EmitError, Form,
};
pub use ops::broadcast::broadcast_shapes;
pub use ops::control::Branch;
pub use ops::conv::{ConvDims, ConvOptions};
pub use ops::custom::{mlir_string, RngAlgorithm};
pub use ops::dot::{DotDims, Precision};
pub use ops::elementwise::{BinaryOp, Comparison, UnaryOp};
pub use ops::fft::FftType;
pub use ops::indexing::{GatherDims, ScatterDims};
pub use ops::reduce::{ReduceKind, Window};
pub use types::{TensorType, Value};
