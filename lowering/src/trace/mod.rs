//! The tracer: the DSL vocabulary (`Ref`, `Tile`, `Scalar`, ops) that records kernel IR
//! when a kernel body runs, and the launch spec that traces a kernel into a program.
//!
//! Values are `Copy` handles into a thread-local graph; every vocabulary call is
//! `#[track_caller]` and records the user's location. Mistakes found while tracing (shapes,
//! axes, ...) are recorded and returned by `Launch::trace_program`; calls never panic.
//!
//! Comparisons are methods: `x.lt(y)`, `program_id(2).eq(0)`, `i.ge(n - 1)`. Rust's `==`
//! and `<` must return a plain `bool`, so they cannot record a traced comparison; tracer
//! values implement neither `PartialEq` nor `PartialOrd`, so misuse does not compile. Inside
//! `#[tpu_kernel]` bodies the macro rewrites `<`, `<=`, `>`, `>=`, `==`, `!=` so that they
//! are traced where an operand is (and Rust's own elsewhere): see `__compare`.
//!
//! Element types are checked by Rust: operands of one op share one `E`.
//! ```compile_fail
//! use tessera_lowering::prelude::*;
//! fn mixed(a: Tile<f32>, b: Tile<bf16>) -> Tile<f32> {
//!     a + b // error: no `Add<Tile<bf16>>` for `Tile<f32>`: cast first
//! }
//! ```
//! ```
//! use tessera_lowering::prelude::*;
//! fn mixed(a: Tile<f32>, b: Tile<bf16>) -> Tile<f32> {
//!     a + b.cast::<f32>() * 2.0 - 1
//! }
//! ```
//! ```compile_fail
//! use tessera_lowering::prelude::*;
//! fn compare(i: Scalar<i32>) -> bool {
//!     i == 0 // error: use `i.eq(0)`, which is traced
//! }
//! ```

/// What the macro rewrites comparisons in kernel bodies into.
#[doc(hidden)]
#[path = "compare.rs"]
pub mod __compare;
mod arith;
mod block_spec;
mod builder;
mod control;
mod dma;
mod dot;
mod element;
mod error;
mod grid;
mod index;
mod launch;
mod math;
mod operand;
mod prng;
mod ref_assign;
mod refs;
mod reinterpret;
mod scan;
mod shape_ops;
mod tracer;
mod value;

pub use arith::{maximum, minimum};
pub use block_spec::{BlockSpec, IndexMapFn};
pub use builder::Val;
pub use control::{
    __fori, __if_else, __while, fori_loop, run_scoped, when, while_loop, Carry, CarryLeaf,
    IntoCond, RustValue,
};
pub use dma::{async_copy, AsyncCopy, DmaSemaphore, RefWindow};
pub use dot::{dot, dot_general, dot_i8, dot_t};
pub use element::{Element, Float, Int, Numeric};
pub use error::TraceError;
pub use grid::{num_programs, program_id, range};
pub use index::{IndexList, IndexValue, IntoIndex};
pub use launch::{DmaSemaphores, Launch, ScratchSpec, Smem, Vmem};
pub use math::{abs, ceil, cos, erf, exp, floor, log, rsqrt, sigmoid, sin, sqrt, tanh};
pub use operand::{Operand, ScalarOperand};
pub use prng::{prng_random_bits, prng_seed};
// The traced program is IR; re-exported here because the launch API returns it.
pub use crate::ir::{
    BlockOperand, DimensionSemantics, KernelProgram, PrefetchOperand, ScratchBuffer,
};
pub use refs::{Prefetch, PrefetchElement, Ref, RefMut, Scratch};
pub use scan::{argmax, argmin, cumsum};
pub use shape_ops::{full, iota, max, min, scalar, sum, where_, zeros, zeros_like, Axes};
pub use tracer::KernelTracer;
pub use value::{Scalar, Tile, Traced};
