//! The `Kernel` trait that `#[tpu_kernel]` implements, kernel metadata, generic-dtype
//! dispatch, and the `inventory` registry of kernels.

use crate::dtype::DType;
use crate::ir::Loc;
use crate::trace::{Element, Float, KernelTracer, TraceError};
use half::{bf16, f16};

/// What a parameter is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamRole {
    /// A scalar-prefetch array (Pallas' `PrefetchScalarGridSpec`): a whole integer array
    /// placed in SMEM before the grid runs, readable by the body and by index maps.
    Prefetch,
    Input,
    Output,
    Scratch,
}

/// One kernel parameter. `dtype` is `None` when it is the kernel's generic type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    pub name: &'static str,
    pub role: ParamRole,
    pub dtype: Option<DType>,
}

/// The kernel's generic type parameter, if any, and its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generic {
    None,
    Float,
    Element,
}

/// Static facts about a kernel, written by `#[tpu_kernel]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: &'static str,
    /// Where the kernel fn is defined (its name's span).
    pub file: &'static str,
    pub line: u32,
    pub column: u32,
    pub generic: Generic,
    pub params: &'static [ParamInfo],
}

impl KernelInfo {
    pub fn loc(&self) -> Loc {
        Loc {
            file: self.file,
            line: self.line,
            column: self.column,
        }
    }

    /// The parameters of one role, in declaration order.
    pub fn params_of(&self, role: ParamRole) -> impl Iterator<Item = &'static ParamInfo> {
        self.params.iter().filter(move |p| p.role == role)
    }
}

/// A kernel: metadata plus a body that records IR when traced.
pub trait Kernel: Send + Sync {
    fn info(&self) -> &'static KernelInfo;
    /// Records the body into the trace that `tracer` belongs to; `dtype` instantiates the
    /// generic type parameter (`None` for non-generic kernels).
    fn trace(&self, tracer: &mut KernelTracer, dtype: Option<DType>) -> Result<(), TraceError>;
}

/// Instantiates a kernel generic over `T: Float`.
pub trait FloatVisitor {
    fn visit<T: Float>(self, tracer: &mut KernelTracer) -> Result<(), TraceError>;
}

/// Instantiates a kernel generic over `T: Element`.
pub trait ElementVisitor {
    fn visit<T: Element>(self, tracer: &mut KernelTracer) -> Result<(), TraceError>;
}

fn bad_generic(tracer: &KernelTracer, dtype: Option<DType>, bound: &str) -> TraceError {
    let (kernel, loc) = tracer.kernel();
    let message = match dtype {
        None => format!("is generic over `{bound}` but no dtype was given for it"),
        Some(d) if d.is_complex() => format!(
            "is generic over `{bound}`, but {d} is complex: kernels take real element types only"
        ),
        Some(d) => format!("is generic over `{bound}`, which {d} does not implement"),
    };
    TraceError::Generic {
        kernel,
        message,
        loc,
    }
}

/// Calls `v.visit::<T>` with `T` the Rust type of `dtype` (a float).
pub fn visit_float(
    dtype: Option<DType>,
    tracer: &mut KernelTracer,
    v: impl FloatVisitor,
) -> Result<(), TraceError> {
    match dtype {
        Some(DType::F32) => v.visit::<f32>(tracer),
        Some(DType::F64) => v.visit::<f64>(tracer),
        Some(DType::BF16) => v.visit::<bf16>(tracer),
        Some(DType::F16) => v.visit::<f16>(tracer),
        other => Err(bad_generic(tracer, other, "Float")),
    }
}

/// Calls `v.visit::<T>` with `T` the Rust type of `dtype`.
pub fn visit_element(
    dtype: Option<DType>,
    tracer: &mut KernelTracer,
    v: impl ElementVisitor,
) -> Result<(), TraceError> {
    match dtype {
        Some(DType::Bool) => v.visit::<bool>(tracer),
        Some(DType::I8) => v.visit::<i8>(tracer),
        Some(DType::I16) => v.visit::<i16>(tracer),
        Some(DType::I32) => v.visit::<i32>(tracer),
        Some(DType::I64) => v.visit::<i64>(tracer),
        Some(DType::U8) => v.visit::<u8>(tracer),
        Some(DType::U16) => v.visit::<u16>(tracer),
        Some(DType::U32) => v.visit::<u32>(tracer),
        Some(DType::U64) => v.visit::<u64>(tracer),
        Some(DType::F16) => v.visit::<f16>(tracer),
        Some(DType::BF16) => v.visit::<bf16>(tracer),
        Some(DType::F32) => v.visit::<f32>(tracer),
        Some(DType::F64) => v.visit::<f64>(tracer),
        other @ (Some(DType::C64 | DType::C128) | None) => {
            Err(bad_generic(tracer, other, "Element"))
        }
    }
}

/// A kernel in the global registry (`inventory::submit!` by `#[tpu_kernel]`).
pub struct KernelRegistration(pub &'static dyn Kernel);

inventory::collect!(KernelRegistration);

/// Every registered kernel, sorted by name.
pub fn registered_kernels() -> Vec<&'static dyn Kernel> {
    let mut ks: Vec<&'static dyn Kernel> = inventory::iter::<KernelRegistration>
        .into_iter()
        .map(|r| r.0)
        .collect();
    ks.sort_by_key(|k| k.info().name);
    ks
}

/// The registered kernel called `name`.
pub fn find_kernel(name: &str) -> Option<&'static dyn Kernel> {
    inventory::iter::<KernelRegistration>
        .into_iter()
        .map(|r| r.0)
        .find(|k| k.info().name == name)
}
