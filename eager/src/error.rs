//! Errors of the eager runtime. Every error names the op it comes from; Debug mode and
//! record-time errors also give the op's argument shapes and dtypes.

use tessera_ops::OpError;
use tessera_runtime::RuntimeError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum EagerError {
    /// Binding, dispatching or lowering refused the call (bad shapes, dtypes, arguments).
    #[error("{source}{}", fmt_args(.args))]
    Op {
        /// The call's tensors as `f32[2, 3]`, in argument order (empty for the runtime's own
        /// calls: rewrites, views, checks).
        args: String,
        #[source]
        source: std::sync::Arc<OpError>,
    },
    /// Launching or running the op's program on the device failed.
    #[error("{} failed on the device{}: {message}", quoted(.op), fmt_args(.args))]
    Device {
        op: String,
        /// The argument types where known (Debug mode), else empty.
        args: String,
        message: String,
    },
    /// A tensor was read whose producing op failed (earlier, or in a flush that failed).
    #[error("this tensor has no value: it is the result of {}, which failed: {message}", quoted(.op))]
    Failed { op: String, message: String },
    /// The eager runtime could not start (no device, no plugin).
    #[error("eager runtime: {0}")]
    Runtime(String),
    /// A call the eager runtime cannot make (yet), or a misuse of its API.
    #[error("{0}")]
    Usage(String),
}

/// An ATen op's name as `aten::add.Tensor` in backquotes; a name of words (a program's
/// `kernel \`softmax\``, a fused program's list of ops) as it is.
fn quoted(op: &str) -> String {
    if op.contains(' ') {
        op.to_string()
    } else {
        format!("`aten::{op}`")
    }
}

fn fmt_args(args: &str) -> String {
    if args.is_empty() {
        String::new()
    } else {
        format!(" (arguments: {args})")
    }
}

impl EagerError {
    pub(crate) fn op(args: String, e: OpError) -> Self {
        EagerError::Op {
            args,
            source: std::sync::Arc::new(e),
        }
    }
    pub(crate) fn device(op: &str, args: String, e: &RuntimeError) -> Self {
        EagerError::Device {
            op: op.to_string(),
            args,
            message: e.to_string(),
        }
    }
}

pub type Result<T> = std::result::Result<T, EagerError>;
