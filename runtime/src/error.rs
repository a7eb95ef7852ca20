//! Every failure of the runtime, with enough context to act on it.

use std::path::PathBuf;
use tessera_lowering::HostTensorError;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("no PJRT plugin for device `{kind}`: {detail}. Install it with `tessera plugin install {kind}`, or point {env_var} at a plugin .so")]
    PluginNotFound {
        kind: String,
        env_var: String,
        detail: String,
    },

    #[error("`{}` is not a PJRT plugin: {reason}", path.display())]
    NotAPlugin { path: PathBuf, reason: String },

    /// A plugin of another kind than asked for (libtpu as the CPU plugin, ...).
    #[error("`{}` is {found}, not a {wanted} plugin; point {} at a {wanted} plugin or run `tessera plugin install {wanted}`", path.display(), env_var_name(wanted))]
    WrongPluginKind {
        path: PathBuf,
        wanted: String,
        found: String,
    },

    /// PJRT use in a child forked from the process that loaded the plugin: the plugin's
    /// threads did not survive the fork, so waiting on any event would block forever.
    #[error("cannot use the PJRT client in a forked subprocess (the plugin was loaded by process {parent}, this is process {child}); use spawn instead of fork to start subprocesses (Python: multiprocessing.set_start_method(\"spawn\")), or make the first Tessera call in the child")]
    Forked { parent: u32, child: u32 },

    /// Outputs of a CPU-plugin launch that host memory cannot hold (checked before launching).
    #[error("executable `{name}` produces {bytes} bytes of outputs, more than the host can allocate (the CPU device computes in host memory)")]
    OutputsTooLarge { name: String, bytes: String },

    #[error("TPU topology `{topology}` is not valid: {reason}")]
    BadTopology { topology: String, reason: String },

    /// MLIR text nested deeper than the plugins' recursive parsers can take on a thread's
    /// stack (see `mlir_check::MAX_NESTING`).
    #[error("MLIR text nests {{, (, [ and < {depth} deep at line {line}, more than the {limit} levels Tessera hands to a PJRT plugin (deeper text overflows the plugin parser's stack)")]
    MlirTooDeep {
        depth: usize,
        limit: usize,
        line: usize,
    },

    /// A static tensor type of 2^63 bytes or more: XLA throws a C++ exception on it, which
    /// aborts the process, so it is refused before the plugin parses the text.
    #[error("MLIR text at line {line} has the type {ty}, of 2^63 bytes or more: larger than any device can address")]
    MlirTensorTooLarge { ty: String, line: usize },

    #[error("{var}=`{value}`: {reason}")]
    BadEnv {
        var: &'static str,
        value: String,
        reason: String,
    },

    #[error("PJRT plugin `{}` implements C API {found_major}.{found_minor}, older than the {need_major}.{need_minor} this build of Tessera was generated from; install a newer plugin (`tessera plugin install <kind>`)", path.display())]
    PluginTooOld {
        path: PathBuf,
        found_major: i32,
        found_minor: i32,
        need_major: u32,
        need_minor: u32,
    },

    /// An error reported by the plugin itself; `message` is the plugin's text, verbatim,
    /// after the kernel's `file:line:col` where the message quotes a kernel op's location.
    #[error(
        "{}{call} failed [{code}]: {message}",
        crate::source_loc::prefix(message)
    )]
    Pjrt {
        call: &'static str,
        code: String,
        message: String,
    },

    #[error("executable `{name}` takes {expected} input(s), got {got}")]
    InputCount {
        name: String,
        expected: usize,
        got: usize,
    },

    #[error("executable `{name}` input {index}: expected {expected}, got {got}")]
    InputMismatch {
        name: String,
        index: usize,
        expected: String,
        got: String,
    },

    #[error("the plugin produced a buffer of element type {0}, which Tessera does not support")]
    UnsupportedBufferType(String),

    #[error("unknown device `{0}` (expected one of cpu, tpu, cuda, interp)")]
    UnknownDevice(String),

    #[error("device `{0}` runs kernels through the interpreter and has no PJRT client")]
    NoClient(String),

    #[error("no TPU is attached to this machine (no /dev/accel* or /dev/vfio group); to compile for a TPU generation without one, use `TpuTarget::aot(\"v6e:2x2\")` or `tessera aot`")]
    NoTpuAttached,

    #[error("installing the `{kind}` plugin failed: {detail}")]
    Install { kind: String, detail: String },

    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },

    #[error(transparent)]
    HostTensor(#[from] HostTensorError),

    /// A kernel launch that does not trace (shapes, dtypes, block specs): carries the user's
    /// source location.
    #[error(transparent)]
    Trace(Box<tessera_lowering::trace::TraceError>),

    #[error("lowering to StableHLO: {0}")]
    Emit(Box<tessera_lowering::stablehlo::EmitError>),

    /// A kernel that breaks a TPU rule (tiling, 64-bit types, VMEM, reduction axes) or uses an
    /// op Mosaic lowering does not support; carries the user's source location.
    #[error(transparent)]
    Mosaic(Box<tessera_lowering::mosaic::MosaicError>),

    #[error(transparent)]
    Interp(Box<tessera_lowering::interp::InterpError>),

    /// A traced slice start out of bounds in a checked launch (`checked_slices.rs`): the
    /// user's line, the grid step (program ids), the window, and where `dynamic_slice` would
    /// have clamped it.
    #[error("{}", check.describe(*start, step))]
    StartOutOfBounds {
        check: Box<tessera_lowering::stablehlo::BoundsCheck>,
        start: i64,
        /// The program ids of the first step where the start was out of bounds.
        step: Vec<i64>,
    },
}

// The lowering errors are large (they carry IR context and source locations); boxing them
// keeps every `Result<_, RuntimeError>` small.
macro_rules! boxed_from {
    ($($variant:ident($t:ty)),* $(,)?) => {
        $(impl From<$t> for RuntimeError {
            fn from(e: $t) -> Self {
                RuntimeError::$variant(Box::new(e))
            }
        })*
    };
}
boxed_from!(
    Trace(tessera_lowering::trace::TraceError),
    Emit(tessera_lowering::stablehlo::EmitError),
    Mosaic(tessera_lowering::mosaic::MosaicError),
    Interp(tessera_lowering::interp::InterpError),
);

impl From<tessera_lowering::backend::LowerError> for RuntimeError {
    fn from(e: tessera_lowering::backend::LowerError) -> Self {
        use tessera_lowering::backend::LowerError;
        match e {
            LowerError::StableHlo(e) => e.into(),
            LowerError::Mosaic(e) => e.into(),
            LowerError::NoModule => {
                RuntimeError::NoClient(crate::device::DeviceKind::Interp.name().into())
            }
        }
    }
}

fn env_var_name(kind: &str) -> String {
    format!("TESSERA_PJRT_PLUGIN_{}", kind.to_uppercase())
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

impl RuntimeError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        RuntimeError::Io {
            context: context.into(),
            source,
        }
    }
}
