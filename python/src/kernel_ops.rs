//! Shipped `#[tpu_kernel]` kernels as callables for `tessera.torch.register` (torch custom ops):
//! what a kernel takes and returns (for the op's schema and its fake implementation, without
//! running anything) and running it on the device.

use crate::eager::EagerTensor;
use crate::{convert, device, ArgumentError, DeviceError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use tessera_kernels::ShippedKernel;
use tessera_lowering::kernel::ParamRole;
use tessera_lowering::stablehlo::{Form, TensorType};
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::{Device, DeviceKind, Executable};

fn find(name: &str) -> PyResult<&'static ShippedKernel> {
    tessera_kernels::find(name).ok_or_else(|| {
        let known: Vec<&str> = tessera_kernels::shipped().iter().map(|k| k.name).collect();
        ArgumentError::new_err(format!(
            "no kernel `{name}` (shipped kernels: {})",
            known.join(", ")
        ))
    })
}

/// Traces `kernel` for inputs of `signature`: the launch the problem shape gives, checked
/// against the inputs' dtypes and shapes. Errors name the kernel.
fn trace(kernel: &ShippedKernel, signature: &[(DType, Vec<usize>)]) -> PyResult<KernelProgram> {
    let shapes: Vec<Vec<usize>> = signature.iter().map(|(_, s)| s.clone()).collect();
    let problem = kernel.problem_of(&shapes).map_err(ArgumentError::new_err)?;
    let launch = (kernel.launch)(&problem)
        .map_err(|e| ArgumentError::new_err(format!("kernel `{}`: {e}", kernel.name)))?;
    launch
        .trace_program(signature)
        .map_err(|e| ArgumentError::new_err(format!("kernel `{}`: {e}", kernel.name)))
}

/// Compiled kernels by (kernel, input signature): a cached call neither re-traces the launch
/// nor re-emits and hashes StableHLO text (a trace + emit costs ~0.1-1 ms; see the note of #14).
type Key = (&'static str, Vec<(DType, Vec<usize>)>);
/// A compiled kernel and the types of its outputs.
pub type Compiled = (Arc<Executable>, Vec<TensorType>);
static EXECUTABLES: LazyLock<Mutex<HashMap<Key, Compiled>>> = LazyLock::new(Default::default);

fn executable(
    kernel: &'static ShippedKernel,
    signature: &[(DType, Vec<usize>)],
    dev: &Device,
) -> PyResult<Compiled> {
    let key = (kernel.name, signature.to_vec());
    if let Some(c) = EXECUTABLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
    {
        return Ok(c.clone());
    }
    let program = trace(kernel, signature)?;
    let exe = tessera_runtime::compile_program(&program, dev, Form::Auto)
        .map_err(|e| DeviceError::new_err(format!("kernel `{}`: {e}", kernel.name)))?;
    let outputs = program
        .outputs
        .iter()
        .map(|o| TensorType::new(o.array_shape.clone(), o.dtype))
        .collect();
    let c = (exe, outputs);
    EXECUTABLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, c.clone());
    Ok(c)
}

/// The shipped kernels: name, about, problem_dims, inputs and outputs (parameter names).
#[pyfunction]
pub fn kernel_list(py: Python<'_>) -> PyResult<Vec<Py<PyDict>>> {
    tessera_kernels::shipped()
        .iter()
        .map(|k| {
            let d = PyDict::new(py);
            let launch = (k.launch)(k.default_shape).map_err(ArgumentError::new_err)?;
            let info = launch.kernel().info();
            let names = |role| info.params_of(role).map(|p| p.name).collect::<Vec<_>>();
            d.set_item("name", k.name)?;
            d.set_item("about", k.about)?;
            d.set_item("problem_dims", k.problem_dims.to_vec())?;
            d.set_item("inputs", names(ParamRole::Input))?;
            d.set_item("outputs", names(ParamRole::Output))?;
            d.set_item("default_input_shapes", (k.input_shapes)(k.default_shape))?;
            Ok(d.unbind())
        })
        .collect()
}

/// The outputs `kernel` gives for inputs of these dtypes and shapes, as `(dtype, shape)`,
/// traced, not run (a torch fake implementation).
#[pyfunction]
pub fn kernel_meta(
    name: &str,
    inputs: Vec<(String, Vec<usize>)>,
) -> PyResult<Vec<(String, Vec<usize>)>> {
    let kernel = find(name)?;
    let signature = signature(inputs)?;
    let program = trace(kernel, &signature)?;
    Ok(program
        .outputs
        .iter()
        .map(|o| (o.dtype.name().to_string(), o.array_shape.clone()))
        .collect())
}

/// Runs `kernel` on tensors (anything with `__dlpack__`) on the current device; returns its
/// outputs as `(dtype, shape, bytearray)`.
#[pyfunction]
pub fn kernel_run(
    py: Python<'_>,
    name: &str,
    tensors: &Bound<'_, PyList>,
) -> PyResult<Vec<Py<PyAny>>> {
    let kernel = find(name)?;
    let (inputs, signature) = host_inputs(name, tensors)?;
    let dev = device()?;
    let run_err =
        |e: tessera_runtime::RuntimeError| DeviceError::new_err(format!("kernel `{name}`: {e}"));
    if dev.kind() == DeviceKind::Interp {
        let program = trace(kernel, &signature)?;
        let refs: Vec<&HostTensor> = inputs.iter().collect();
        let outputs = py
            .detach(|| tessera_runtime::run_program(&program, dev, &refs, Form::Auto))
            .map_err(run_err)?;
        return outputs.iter().map(|t| convert::host(py, t)).collect();
    }
    let (exe, _) = executable(kernel, &signature, dev)?;
    execute(py, name, &exe, &inputs)
}

/// Runs `kernel` on eager device tensors (the `tpu` torch device's storage): no host copy in
/// or out; the results are new eager tensors. Same checks and errors as `kernel_run`.
#[pyfunction]
pub fn kernel_run_eager(
    py: Python<'_>,
    name: &str,
    tensors: Vec<PyRef<'_, EagerTensor>>,
) -> PyResult<Vec<EagerTensor>> {
    let kernel = find(name)?;
    let signature: Vec<(DType, Vec<usize>)> =
        tensors.iter().map(|t| (t.t.dtype(), t.t.shape())).collect();
    let dev = device()?;
    if dev.kind() == DeviceKind::Interp {
        return Err(ArgumentError::new_err(format!(
            "kernel `{name}`: device tensors live on a PJRT device, not the interpreter"
        )));
    }
    let compiled = executable(kernel, &signature, dev)?;
    run_eager(py, name, &compiled, &tensors)
}

/// Runs a compiled kernel on eager tensors (see `kernel_run_eager`).
pub fn run_eager(
    py: Python<'_>,
    name: &str,
    (exe, outputs): &Compiled,
    tensors: &[PyRef<'_, EagerTensor>],
) -> PyResult<Vec<EagerTensor>> {
    let inputs: Vec<tessera_eager::Tensor> = tensors.iter().map(|t| t.t.clone()).collect();
    let label = format!("kernel `{name}`");
    py.detach(|| tessera_eager::run_program(exe, &inputs, outputs, &label))
        .map(|ts| ts.into_iter().map(|t| EagerTensor { t }).collect())
        .map_err(crate::eager::err)
}

/// A signature from Python: `(dtype name, shape)` per input.
pub fn signature(inputs: Vec<(String, Vec<usize>)>) -> PyResult<Vec<(DType, Vec<usize>)>> {
    inputs
        .into_iter()
        .map(|(d, s)| {
            let d: DType = d
                .parse()
                .map_err(|e: tessera_lowering::dtype::UnknownDType| {
                    ArgumentError::new_err(e.to_string())
                })?;
            Ok((d, s))
        })
        .collect()
}

/// Tensors (anything with `__dlpack__`) as host tensors and their signature.
pub fn host_inputs(
    name: &str,
    tensors: &Bound<'_, PyList>,
) -> PyResult<(Vec<HostTensor>, Vec<(DType, Vec<usize>)>)> {
    let inputs: Vec<HostTensor> = tensors
        .iter()
        .enumerate()
        .map(|(i, t)| convert::tensor(&t, &format!("kernel `{name}`: input {i}")))
        .collect::<PyResult<_>>()?;
    let signature = inputs
        .iter()
        .map(|t| (t.dtype(), t.shape().to_vec()))
        .collect();
    Ok((inputs, signature))
}

/// Runs a compiled kernel on the current device: upload, execute, download, as
/// `(dtype, shape, bytearray)` per output. Errors name the kernel.
pub fn execute(
    py: Python<'_>,
    name: &str,
    exe: &Executable,
    inputs: &[HostTensor],
) -> PyResult<Vec<Py<PyAny>>> {
    let dev = device()?;
    let outputs = py
        .detach(|| {
            let client = dev.client()?;
            let bufs = inputs
                .iter()
                .map(|t| client.upload(t))
                .collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<_> = bufs.iter().collect();
            exe.execute(&refs)?
                .iter()
                .map(|b| b.to_host())
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| DeviceError::new_err(format!("kernel `{name}`: {e}")))?;
    outputs.iter().map(|t| convert::host(py, t)).collect()
}
