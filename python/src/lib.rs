//! `tessera._native`: the Rust side of the Python package `tessera`. The user-facing API
//! (`tessera.ops.call`, torch tensor conversion) is in `python/tessera/`.

mod compiled;
mod convert;
mod device_ffi;
mod dlpack;
mod eager;
mod kernel_ffi;
mod kernel_library;
mod kernel_ops;

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::OnceLock;
use tessera_lowering::DType;
use tessera_ops::{CallOptions, OpError};
use tessera_runtime::Device;

// Linked for its inventory registrations (kernel overrides of ATen ops).
use tessera_kernels as _;

create_exception!(
    _native,
    TesseraError,
    PyRuntimeError,
    "Base of Tessera's errors."
);
create_exception!(
    _native,
    UnknownOpError,
    TesseraError,
    "The op is not in Tessera's ATen table."
);
create_exception!(
    _native,
    ArgumentError,
    TesseraError,
    "Arguments the op's schema or PyTorch reject."
);
create_exception!(
    _native,
    UnsupportedError,
    TesseraError,
    "Valid for PyTorch, not supported by Tessera (dtype, feature, unimplemented op)."
);
create_exception!(
    _native,
    DeviceError,
    TesseraError,
    "The PJRT device failed to compile or run the op."
);

/// A dtype argument (`torch.float32` arrives as `ScalarType("f32")`).
#[pyclass(frozen, module = "tessera._native")]
pub struct ScalarType {
    pub dtype: DType,
}

#[pymethods]
impl ScalarType {
    #[new]
    fn new(name: &str) -> PyResult<Self> {
        name.parse().map(|dtype| ScalarType { dtype }).map_err(
            |e: tessera_lowering::dtype::UnknownDType| ArgumentError::new_err(e.to_string()),
        )
    }
    fn __repr__(&self) -> String {
        format!("ScalarType({:?})", self.dtype.name())
    }
}

/// The process's device. In a child forked after the first call it is a `DeviceError`
/// (PJRT's threads do not survive `fork`: waiting on the device would block forever), raised
/// before any argument reaches the device, whichever path (default lowering or a kernel
/// override) the op would take.
pub(crate) fn device() -> PyResult<&'static Device> {
    static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();
    let dev = DEVICE
        .get_or_init(|| Device::from_env().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| DeviceError::new_err(e.clone()))?;
    if let Ok(client) = dev.client() {
        client
            .check_process()
            .map_err(|e| DeviceError::new_err(e.to_string()))?;
    }
    Ok(dev)
}

fn py_err(e: OpError) -> PyErr {
    let msg = e.to_string();
    match e {
        OpError::UnknownOp { .. } => UnknownOpError::new_err(msg),
        OpError::BadArgs { .. } | OpError::Checked { .. } => ArgumentError::new_err(msg),
        OpError::Lower {
            source: tessera_ops::LowerError::Invalid(_),
            ..
        } => ArgumentError::new_err(msg),
        OpError::Lower { .. } | OpError::NotImplemented { .. } | OpError::Override { .. } => {
            UnsupportedError::new_err(msg)
        }
        OpError::Runtime { .. } => DeviceError::new_err(msg),
    }
}

/// Runs `op` on converted arguments. Returns `(outputs, writes, kernel, returns)`: outputs
/// as `(dtype, shape, bytearray)` (or lists of them, or numbers), writes as
/// `(schema arg index, arg name, output index)`, kernel = the override that ran or None,
/// returns = how many outputs are the op's results (the rest only update written arguments).
/// `overrides=False` runs the default lowering even where a kernel override applies.
#[pyfunction]
#[pyo3(signature = (op, args, kwargs, seed=0, overrides=true))]
fn call(
    py: Python<'_>,
    op: &str,
    args: &Bound<'_, PyList>,
    kwargs: &Bound<'_, PyDict>,
    seed: u64,
    overrides: bool,
) -> PyResult<(
    Vec<Py<PyAny>>,
    Vec<(usize, String, usize)>,
    Option<String>,
    usize,
)> {
    let pos = args
        .iter()
        .enumerate()
        .map(|(i, a)| convert::arg(&a, &format!("{op}: argument {i}")))
        .collect::<PyResult<Vec<_>>>()?;
    let kw = kwargs
        .iter()
        .map(|(k, v)| {
            let k: String = k.extract()?;
            let a = convert::arg(&v, &format!("{op}: argument `{k}`"))?;
            Ok((k, a))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let dev = device()?;
    let result = py
        .detach(|| {
            tessera_ops::call(
                op,
                pos,
                kw,
                dev,
                CallOptions {
                    seed,
                    skip_overrides: !overrides,
                },
            )
        })
        .map_err(py_err)?;
    let schema = tessera_ops::find(op).expect("the call found it");
    let outputs = result
        .outputs
        .iter()
        .map(|o| convert::output(py, o))
        .collect::<PyResult<_>>()?;
    let writes = result
        .writes
        .iter()
        .map(|&(arg, out)| (arg, schema.args[arg].name.to_string(), out))
        .collect();
    Ok((
        outputs,
        writes,
        result.kernel.map(str::to_string),
        result.returns,
    ))
}

/// The op table: one dict per overload (name, overload, schema, tags, core, implemented).
#[pyfunction]
fn op_table(py: Python<'_>) -> PyResult<Vec<Py<PyDict>>> {
    tessera_ops::table()
        .iter()
        .map(|s| {
            let d = PyDict::new(py);
            d.set_item("name", s.full_name())?;
            d.set_item("schema", s.schema)?;
            d.set_item("core", s.is_core())?;
            d.set_item("functional", s.functional)?;
            d.set_item(
                "tags",
                s.tags.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>(),
            )?;
            d.set_item("implemented", tessera_ops::registry::is_implemented(s))?;
            d.set_item(
                "overrides",
                tessera_ops::registry::overrides(&s.full_name())
                    .iter()
                    .map(|o| o.kernel)
                    .collect::<Vec<_>>(),
            )?;
            Ok(d.unbind())
        })
        .collect()
}

/// The PJRT plugin file the runtime loads for device `kind` (`cpu`, `cuda`, `tpu`):
/// $TESSERA_PJRT_PLUGIN_<KIND>, else the plugin store (`tessera plugin install KIND`). Lets
/// other PJRT hosts (JAX, in the benches) load the very plugin Tessera runs on. A missing
/// file or an unknown kind is a `DeviceError` naming it.
#[pyfunction]
fn plugin_path(kind: &str) -> PyResult<String> {
    let kind = tessera_runtime::DeviceKind::parse(kind)
        .map_err(|e| DeviceError::new_err(e.to_string()))?;
    tessera_runtime::plugin_store::locate(kind)
        .map(|p| p.display().to_string())
        .map_err(|e| DeviceError::new_err(e.to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<ScalarType>()?;
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(op_table, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_path, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ops::kernel_list, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ops::kernel_meta, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ops::kernel_run, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ops::kernel_launch_config, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ops::kernel_run_eager, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ffi::kernel_call_address, m)?)?;
    m.add_function(wrap_pyfunction!(device_ffi::device_call_addresses, m)?)?;
    m.add_function(wrap_pyfunction!(device_ffi::eager_from_raws, m)?)?;
    m.add_function(wrap_pyfunction!(device_ffi::device_counts, m)?)?;
    m.add_function(wrap_pyfunction!(device_ffi::eager_into_raws, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_ops::kernel_execute_us, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_library::library_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_library::library_meta, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_library::library_run, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_library::library_run_eager, m)?)?;
    eager::register(m)?;
    compiled::register(m)?;
    m.add("TesseraError", py.get_type::<TesseraError>())?;
    m.add("UnknownOpError", py.get_type::<UnknownOpError>())?;
    m.add("ArgumentError", py.get_type::<ArgumentError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("TORCH_VERSION", tessera_ops::schema::TORCH_VERSION)?;
    Ok(())
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
