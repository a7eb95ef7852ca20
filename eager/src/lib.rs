//! Tessera's eager runtime: device tensors and ATen ops by name, in four modes.
//!
//! - **Strict** (default): each op launches as issued, asynchronously; inputs and results
//!   stay on the device; a device error surfaces at the next read, naming the op.
//! - **Debug** (`TESSERA_LAUNCH_BLOCKING=1`): waits after every op; errors name the op and
//!   its argument shapes and dtypes.
//! - **DeferAndFuse** (`TESSERA_DEFER_AND_FUSE=1`): ops are recorded (shapes checked at
//!   the op) and run at a sync point as one fused program, cached structurally.
//! - **Compiled**: [`compile`] traces a closure once into one program and replays it.
//!
//! Every op goes through one path: scalars that change every step become device inputs,
//! the lowering cache (keyed by op, argument types, and non-tensor arguments) gives the
//! dispatched plan and result types, then the op is launched or recorded.
//!
//! ```no_run
//! use tessera_eager::{Tensor, EagerMode, ModeGuard};
//! use tessera_lowering::DType;
//! let x = Tensor::from_f64(DType::F32, &[2, 2], &[1., 2., 3., 4.])?;
//! let _fused = ModeGuard::new(EagerMode::DeferAndFuse)?;
//! let y = x.mul(&x)?.add_scalar(1.0)?.softmax(-1)?;
//! println!("{y}"); // a sync point: one fused program runs
//! # Ok::<(), tessera_eager::EagerError>(())
//! ```

mod bounded;
mod cache;
mod compiled;
mod donation;
mod error;
mod graph;
mod memo;
mod methods;
mod mode;
mod program;
mod replay;
mod rng;
mod rules;
mod runtime;
mod scalars;
mod shortcut;
mod stats;
mod tensor;
mod view;
pub mod workloads;

pub use bounded::{cache_capacity, set_cache_capacity, Bounded, DEFAULT_CACHE_CAPACITY};
pub use compiled::{compile, CompiledFn};
pub use error::{EagerError, Result};
pub use memo::call_tensors;
pub use methods::{add_out, first_tensor};
pub use mode::{default_mode, mode, mode_from, set_mode, EagerMode, ModeGuard};
pub use program::ProgramOp;
pub use rng::manual_seed;
pub use rules::{set_max_pending_ops, MAX_PENDING_OPS};
pub use runtime::{call, call_schema, sync, Output};
pub use shortcut::Shortcut;
pub use stats::{reset_stats, stats, FlushReason, ModeStats, Stats};
pub use tensor::Tensor;
pub use tessera_ops::ArgValue;
