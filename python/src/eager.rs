//! Eager device tensors for Python (`tessera._native.EagerTensor`): upload a torch tensor,
//! call ATen ops by name on the device through `tessera_eager::call` (kernel overrides first,
//! in this thread's eager mode), download at sync points. The `tpu` torch device
//! (`python/tessera/device.py`) is built on these.

use crate::{convert, ArgumentError, DeviceError, UnknownOpError, UnsupportedError};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use tessera_eager::{ArgValue, EagerError, EagerMode, Output, Tensor};
use tessera_lowering::HostTensor;
use tessera_ops::OpError;

/// A tensor of the eager runtime: a device buffer, a pending value of this thread's deferred
/// graph, or the error of the op that failed to make it.
#[pyclass(frozen, module = "tessera._native", name = "EagerTensor")]
pub struct EagerTensor {
    pub(crate) t: Tensor,
}

#[pymethods]
impl EagerTensor {
    /// Uploads a CPU tensor (anything with `__dlpack__`).
    #[staticmethod]
    fn upload(v: &Bound<'_, PyAny>) -> PyResult<EagerTensor> {
        let h = convert::tensor(v, "upload")?;
        Tensor::from_host(&h)
            .map(|t| EagerTensor { t })
            .map_err(err)
    }

    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.t.shape()
    }

    /// The dtype's short name (`f32`, `i64`, `bool`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.t.dtype().name()
    }

    /// Copies the value to the host as `(dtype, shape, bytearray)`: a sync point (pending ops
    /// run; the error of a failed producing op is raised here).
    fn download(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let h: HostTensor = self.t.to_host().map_err(err)?;
        convert::host(py, &h)
    }

    /// Waits until the value is computed (a sync point); raises its op's error if it failed.
    /// Other Python threads run meanwhile (autograd's device thread may be what computes it).
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        let t = self.t.clone();
        py.detach(|| t.wait()).map_err(err)
    }

    /// Whether `self` and `other` share device storage.
    fn shares_storage(&self, other: &EagerTensor) -> bool {
        self.t.shares_storage(&other.t)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.t)
    }
}

/// The Python error for an eager error: the same classes as `tessera.ops.call`; reading a
/// tensor whose op failed is a `DeviceError` naming that op.
pub(crate) fn err(e: EagerError) -> PyErr {
    let msg = e.to_string();
    match &e {
        EagerError::Op { source, .. } => match &**source {
            OpError::UnknownOp { .. } => UnknownOpError::new_err(msg),
            OpError::BadArgs { .. }
            | OpError::Checked { .. }
            | OpError::Lower {
                source: tessera_ops::LowerError::Invalid(_),
                ..
            } => ArgumentError::new_err(msg),
            OpError::Lower { .. } | OpError::NotImplemented { .. } | OpError::Override { .. } => {
                UnsupportedError::new_err(msg)
            }
            OpError::Runtime { .. } => DeviceError::new_err(msg),
        },
        EagerError::Device { .. } | EagerError::Failed { .. } | EagerError::Runtime(_) => {
            DeviceError::new_err(msg)
        }
        EagerError::Usage(_) => ArgumentError::new_err(msg),
    }
}

/// One Python argument: eager tensors (and lists of them) as they are; everything else as
/// `tessera.ops.call` converts it, with host tensors (CPU scalars) uploaded.
fn arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<ArgValue<Tensor>> {
    if let Ok(t) = v.cast::<EagerTensor>() {
        return Ok(ArgValue::Tensor(t.get().t.clone()));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
        let eager = |x: &Bound<'_, PyAny>| x.cast::<EagerTensor>().is_ok();
        if !items.is_empty() && items.iter().any(eager) {
            if items.iter().all(eager) {
                return Ok(ArgValue::TensorList(
                    items
                        .iter()
                        .map(|x| x.cast::<EagerTensor>().map(|t| t.get().t.clone()))
                        .collect::<Result<_, _>>()?,
                ));
            }
            if items.iter().all(|x| eager(x) || x.is_none()) {
                return Ok(ArgValue::OptTensorList(
                    items
                        .iter()
                        .map(|x| x.cast::<EagerTensor>().ok().map(|t| t.get().t.clone()))
                        .collect(),
                ));
            }
            return Err(PyTypeError::new_err(format!(
                "{what}: a list mixing device tensors with other values is not an ATen argument"
            )));
        }
    }
    convert::arg(v, what)?.try_map(&mut |h: &HostTensor| Tensor::from_host(h).map_err(err))
}

fn output(py: Python<'_>, o: Output) -> PyResult<Py<PyAny>> {
    Ok(match o {
        Output::Tensor(t) => Py::new(py, EagerTensor { t })?.into_any(),
        Output::Tensors(ts) => PyList::new(
            py,
            ts.into_iter()
                .map(|t| Py::new(py, EagerTensor { t }))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any()
        .unbind(),
        Output::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Output::Float(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Output::None => py.None(),
    })
}

/// Calls ATen op `op` on eager tensors in this thread's mode; returns the op's results
/// (in-place and `out=` overloads return the tensors they wrote).
#[pyfunction]
fn eager_call(
    py: Python<'_>,
    op: &str,
    args: &Bound<'_, PyList>,
    kwargs: &Bound<'_, PyDict>,
) -> PyResult<Vec<Py<PyAny>>> {
    let pos = args
        .iter()
        .enumerate()
        .map(|(i, a)| arg(&a, &format!("{op}: argument {i}")))
        .collect::<PyResult<Vec<_>>>()?;
    let names: Vec<String> = kwargs
        .keys()
        .iter()
        .map(|k| k.extract())
        .collect::<PyResult<_>>()?;
    let kw = names
        .iter()
        .zip(kwargs.values().iter())
        .map(|(k, v)| Ok((k.as_str(), arg(&v, &format!("{op}: argument `{k}`"))?)))
        .collect::<PyResult<Vec<_>>>()?;
    let outs = tessera_eager::call(op, pos, kw).map_err(err)?;
    outs.into_iter().map(|o| output(py, o)).collect()
}

/// This thread's eager mode: `strict`, `debug`, `defer` or `compiled`.
#[pyfunction]
fn eager_mode() -> &'static str {
    tessera_eager::mode().name()
}

/// Sets this thread's eager mode (leaving a deferring mode runs what is pending).
#[pyfunction]
fn eager_set_mode(name: &str) -> PyResult<()> {
    let m = EagerMode::parse(name).ok_or_else(|| {
        ArgumentError::new_err(format!(
            "unknown eager mode `{name}` (strict, debug, defer, compiled)"
        ))
    })?;
    tessera_eager::set_mode(m).map_err(err)
}

/// Runs this thread's pending deferred ops (TorchTPU's `sync`).
#[pyfunction]
fn eager_sync() -> PyResult<()> {
    tessera_eager::sync().map_err(err)
}

/// Waits until every one of `values` is computed (one call for many, the GIL released once:
/// a training step's gradients); raises the error of the first whose op failed.
#[pyfunction]
fn eager_wait_all(py: Python<'_>, values: Vec<PyRef<'_, EagerTensor>>) -> PyResult<()> {
    let ts: Vec<tessera_eager::Tensor> = values.iter().map(|e| e.t.clone()).collect();
    py.detach(|| ts.iter().try_for_each(|t| t.wait()))
        .map_err(err)
}

/// Restarts the eager runtime's random sequence (random ops in compiled graphs, `rand` by
/// name): `torch.manual_seed` calls it through the device's backend module.
#[pyfunction]
fn eager_manual_seed(seed: u64) {
    tessera_eager::manual_seed(seed)
}

/// This thread's eager counters: `{mode: {ops, launches, compiles, cache_hits,
/// bytes_to_device, bytes_to_host, donated, flushes, execute_nanos}}` for every mode.
#[pyfunction]
fn eager_stats(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let s = tessera_eager::stats();
    let all = PyDict::new(py);
    for m in EagerMode::ALL {
        let ms = s.mode(m);
        let d = PyDict::new(py);
        d.set_item("ops", ms.ops)?;
        d.set_item("launches", ms.launches)?;
        d.set_item("compiles", ms.compiles)?;
        d.set_item("cache_hits", ms.cache_hits)?;
        d.set_item("bytes_to_device", ms.bytes_to_device)?;
        d.set_item("bytes_to_host", ms.bytes_to_host)?;
        d.set_item("donated", ms.donated)?;
        d.set_item("flushes", ms.flushes_total())?;
        d.set_item("execute_nanos", ms.execute_nanos)?;
        all.set_item(m.name(), d)?;
    }
    Ok(all.unbind())
}

/// Programs this thread compiled, all modes (cheaper than `eager_stats` for per-op polling).
#[pyfunction]
pub(crate) fn eager_compiles() -> u64 {
    let s = tessera_eager::stats();
    EagerMode::ALL.iter().map(|&m| s.mode(m).compiles).sum()
}

#[pyfunction]
fn eager_reset_stats() {
    tessera_eager::reset_stats()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EagerTensor>()?;
    m.add_function(wrap_pyfunction!(eager_call, m)?)?;
    m.add_function(wrap_pyfunction!(eager_mode, m)?)?;
    m.add_function(wrap_pyfunction!(eager_set_mode, m)?)?;
    m.add_function(wrap_pyfunction!(eager_sync, m)?)?;
    m.add_function(wrap_pyfunction!(eager_wait_all, m)?)?;
    m.add_function(wrap_pyfunction!(eager_manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(eager_stats, m)?)?;
    m.add_function(wrap_pyfunction!(eager_compiles, m)?)?;
    m.add_function(wrap_pyfunction!(eager_reset_stats, m)?)?;
    Ok(())
}
