//! The tensor handle: a storage cell shared by a base tensor and its views, plus (for a view)
//! the chain of view ops from the base. A storage holds a device buffer, a pending value of
//! this thread's deferred graph, or the error of the op that failed to produce it.

use crate::error::{EagerError, Result};
use crate::runtime;
use crate::stats::FlushReason;
use crate::view::View;
use std::sync::{Arc, Mutex, MutexGuard};
use tessera_lowering::stablehlo::TensorType;
use tessera_lowering::{DType, HostTensor};
use tessera_ops::OpSchema;
use tessera_runtime::{Buffer, DeviceKind};

/// A device tensor. Cloning a handle aliases it (like assigning a `torch.Tensor`); views
/// (`select`, `t`, `view`, ...) share their base's storage, so an in-place op through any of
/// them is seen by all.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) storage: Arc<Storage>,
    pub(crate) view: Option<Arc<View>>,
}

/// The value behind a base tensor and its views.
pub(crate) struct Storage {
    cell: Mutex<Cell>,
    pub(crate) device: DeviceKind,
    /// Creation order (a compiled function's trace tells what it created from what existed).
    pub(crate) serial: u64,
}

static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The serial the next storage will get.
pub(crate) fn next_serial() -> u64 {
    SERIALS.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) struct Cell {
    pub ty: TensorType,
    pub state: State,
}

/// Where a value is.
#[derive(Clone)]
pub(crate) enum State {
    /// On the device (maybe still being computed: PJRT runs asynchronously). `op` made it
    /// (None: uploaded), for errors that surface when it is read.
    Ready {
        buf: Arc<Buffer>,
        op: Option<OpName>,
    },
    /// Result `out` of node `node` of the deferred graph `graph`.
    Pending(PendingRef),
    /// Its op failed; reading it reports why.
    Failed { op: String, message: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PendingRef {
    pub graph: u64,
    pub node: u32,
    pub out: u32,
}

impl Storage {
    pub(crate) fn new(ty: TensorType, state: State, device: DeviceKind) -> Arc<Storage> {
        Arc::new(Storage {
            cell: Mutex::new(Cell { ty, state }),
            device,
            serial: SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Cell> {
        self.cell.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What made a value: an ATen op, or a program of another origin ([`crate::ProgramOp`]:
/// a kernel op), named as its caller named it (`kernel \`softmax\``).
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpName {
    Aten(&'static OpSchema),
    Program(&'static str),
}

impl OpName {
    pub(crate) fn full_name(self) -> String {
        match self {
            OpName::Aten(s) => s.full_name(),
            OpName::Program(name) => name.to_string(),
        }
    }
}

/// The display name of an op for messages (`add.Tensor`; `upload` for host data).
pub(crate) fn op_name(op: Option<OpName>) -> String {
    op.map_or_else(|| "upload".to_string(), OpName::full_name)
}

impl Tensor {
    pub(crate) fn from_state(ty: TensorType, state: State, device: DeviceKind) -> Tensor {
        Tensor {
            storage: Storage::new(ty, state, device),
            view: None,
        }
    }

    /// Uploads a host tensor to the eager runtime's device (without a copy on the CPU plugin,
    /// which aliases 64-byte aligned host memory).
    pub fn from_host(t: &HostTensor) -> Result<Tensor> {
        runtime::with(|rt| rt.upload(t))
    }

    /// A tensor of `dtype` holding `values` (row-major) in `shape`.
    pub fn from_f64(dtype: DType, shape: &[usize], values: &[f64]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != values.len() {
            return Err(EagerError::Usage(format!(
                "shape {shape:?} holds {n} element(s), {} value(s) given",
                values.len()
            )));
        }
        Tensor::from_host(&HostTensor::from_f64(dtype, shape.to_vec(), values))
    }

    pub fn full(dtype: DType, shape: &[usize], value: f64) -> Result<Tensor> {
        Tensor::from_host(&HostTensor::full(dtype, shape.to_vec(), value))
    }

    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<Tensor> {
        Tensor::full(dtype, shape, 0.0)
    }

    /// A rank-0 tensor.
    pub fn scalar(dtype: DType, value: f64) -> Result<Tensor> {
        Tensor::full(dtype, &[], value)
    }

    /// The tensor's type (its view's, for a view).
    pub(crate) fn ty(&self) -> TensorType {
        match &self.view {
            Some(v) => v.ty.clone(),
            None => self.storage.lock().ty.clone(),
        }
    }

    /// Pushes the type into a cache key without copying it.
    pub(crate) fn push_type(&self, k: &mut Vec<u64>) {
        match &self.view {
            Some(v) => crate::cache::push_type(k, &v.ty),
            None => crate::cache::push_type(k, &self.storage.lock().ty),
        }
    }

    pub fn shape(&self) -> Vec<usize> {
        self.with_shape(<[usize]>::to_vec)
    }

    /// `f` of the shape, without copying it (the per-op paths ask often).
    pub fn with_shape<R>(&self, f: impl FnOnce(&[usize]) -> R) -> R {
        self.with_type(|_, shape| f(shape))
    }

    /// `f` of the dtype and shape, without copying them (one lock, where the two are read).
    pub fn with_type<R>(&self, f: impl FnOnce(DType, &[usize]) -> R) -> R {
        match &self.view {
            Some(v) => f(v.ty.dtype, &v.ty.shape),
            None => {
                let c = self.storage.lock();
                f(c.ty.dtype, &c.ty.shape)
            }
        }
    }

    pub fn dtype(&self) -> DType {
        self.with_type(|dtype, _| dtype)
    }

    pub fn dim(&self) -> usize {
        self.with_shape(<[usize]>::len)
    }

    pub fn numel(&self) -> usize {
        self.with_shape(|s| s.iter().product())
    }

    pub fn device(&self) -> DeviceKind {
        self.storage.device
    }

    /// Whether this handle is a view of another tensor's storage.
    pub fn is_view(&self) -> bool {
        self.view.is_some()
    }

    /// Whether `self` and `other` share storage (a tensor and its views do).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// Copies the value to the host: a sync point (runs pending ops, waits for the device).
    pub fn to_host(&self) -> Result<HostTensor> {
        runtime::with(|rt| rt.to_host(self, FlushReason::HostRead))
    }

    /// The elements as f64 (a sync point).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.to_host()?.to_f64_vec())
    }

    /// The value of a one-element tensor (a sync point).
    pub fn item(&self) -> Result<f64> {
        let n = self.numel();
        if n != 1 {
            return Err(EagerError::Usage(format!(
                "a Tensor with {n} elements cannot be converted to Scalar"
            )));
        }
        Ok(self.to_f64_vec()?[0])
    }

    /// Waits until the value is computed; reports the error of the op that made it, if any.
    pub fn wait(&self) -> Result<()> {
        runtime::with(|rt| rt.wait(self))
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ty = self.ty();
        write!(f, "Tensor({}{:?} on {}", ty.dtype, ty.shape, self.device())?;
        if self.is_view() {
            write!(f, ", view")?;
        }
        write!(f, ")")
    }
}

/// Prints the values (a sync point; an error prints as the error).
impl std::fmt::Display for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_host() {
            Ok(h) => {
                let ty = self.ty();
                write!(
                    f,
                    "tensor({}{:?}, {:?})",
                    ty.dtype,
                    ty.shape,
                    h.to_f64_vec()
                )
            }
            Err(e) => write!(f, "tensor(<error: {e}>)"),
        }
    }
}

impl tessera_ops::bind::TensorArg for Tensor {
    /// A tensor for an `int` argument would need a device read in the middle of binding;
    /// pass the number instead.
    fn as_index(&self) -> Option<i64> {
        None
    }
}
