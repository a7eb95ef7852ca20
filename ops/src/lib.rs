//! The ATen op library: the table of ATen overloads (schemas read from PyTorch), a default
//! StableHLO lowering per op, kernel overrides chosen by predicate and priority, and eager
//! execution of one call on a PJRT device.
//!
//! ```no_run
//! use tessera_ops::{call, ArgValue, CallOptions, Output};
//! use tessera_lowering::{DType, HostTensor};
//! let x = HostTensor::from_f64(DType::F32, vec![2, 3], &[1., 2., 3., 4., 5., 6.]);
//! let device = tessera_runtime::Device::cpu()?;
//! let r = call("aten::add.Tensor", vec![ArgValue::Tensor(x.clone()), ArgValue::Tensor(x)],
//!              vec![("alpha".into(), ArgValue::Int(2))], &device, CallOptions::default())?;
//! assert!(matches!(&r.outputs[0], Output::Tensor(t) if t.to_f64_vec()[0] == 3.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod args;
pub mod aten;
pub mod bind;
pub mod call;
pub mod check;
pub mod coverage;
pub mod error;
pub mod lower;
pub mod plan;
pub mod registry;
pub mod schema;
pub mod value;

pub use args::{Args, HostArgs};
pub use bind::{bind, Bound};
pub use call::{call, CallOptions, CallResult, Output};
pub use check::{Check, CheckKind};
pub use error::{LowerError, LowerResult, OpError};
pub use inventory;
pub use lower::{Lower, LowerFn, Lowering, Out};
pub use plan::{lower_planned, plan, result_values, Lowered, Plan};
pub use registry::{dispatch, Choice, OpOverride};
pub use schema::{find, table, ArgSchema, ArgType, OpSchema, Tag};
pub use value::{ArgValue, Scalar};
