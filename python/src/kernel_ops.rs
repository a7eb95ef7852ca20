//! Shipped `#[tpu_kernel]` kernels as callables for `tessera.torch.register` (torch custom ops):
//! what a kernel takes and returns (for the op's schema and its fake implementation, without
//! running anything) and running it on the device.

use crate::eager::EagerTensor;
use crate::{device, dlpack, ArgumentError, DeviceError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Arc;
use tessera_eager::{Bounded, ProgramOp};
use tessera_kernels::ShippedKernel;
use tessera_lowering::kernel::ParamRole;
use tessera_lowering::stablehlo::Form;
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

/// The problem shape `kernel` reads back from its inputs' shapes (an error names the kernel).
fn problem(kernel: &ShippedKernel, signature: &[(DType, Vec<usize>)]) -> PyResult<Vec<usize>> {
    let shapes: Vec<Vec<usize>> = signature.iter().map(|(_, s)| s.clone()).collect();
    kernel.problem_of(&shapes).map_err(ArgumentError::new_err)
}

/// Traces `kernel` for inputs of `signature`: the launch the problem shape gives, checked
/// against the inputs' dtypes and shapes. With a device, the launch's blocks are the
/// autotuner's cached winner for this problem where there is one
/// ([`tessera_kernels::tuning::launch_for`]); without (a fake implementation's output
/// types, which no config changes), the shipped launch. Errors name the kernel.
fn trace(
    kernel: &ShippedKernel,
    signature: &[(DType, Vec<usize>)],
    device: Option<&Device>,
) -> PyResult<KernelProgram> {
    let problem = problem(kernel, signature)?;
    let named = |e: String| ArgumentError::new_err(format!("kernel `{}`: {e}", kernel.name));
    let launch = match (device, signature.first()) {
        (Some(dev), Some((dtype, _))) if dev.kind() != DeviceKind::Interp => {
            tessera_kernels::tuning::launch_for(
                kernel,
                &problem,
                *dtype,
                dev,
                Form::Auto,
                &cache_dir(),
            )
            .map_err(named)?
            .0
        }
        _ => (kernel.launch)(&problem).map_err(named)?,
    };
    launch
        .trace_program(signature)
        .map_err(|e| named(e.to_string()))
}

/// Where `tessera tune` caches its winners (the autotune cache the launches read).
fn cache_dir() -> std::path::PathBuf {
    tessera_runtime::plugin_store::cache_dir()
}

/// The launch config a kernel op runs with on the current device for inputs of these dtypes
/// and shapes: `{"config": "bm=.., ..", "source": "cached" | "default" | ..}`, or None for a
/// kernel without tunables.
#[pyfunction]
pub fn kernel_launch_config(
    py: Python<'_>,
    name: &str,
    inputs: Vec<(String, Vec<usize>)>,
) -> PyResult<Option<Py<PyDict>>> {
    let kernel = find(name)?;
    let signature = signature(inputs)?;
    let problem = problem(kernel, &signature)?;
    let dtype = signature.first().map_or(DType::F32, |(d, _)| *d);
    let (_, config) = tessera_kernels::tuning::launch_for(
        kernel,
        &problem,
        dtype,
        device()?,
        Form::Auto,
        &cache_dir(),
    )
    .map_err(|e| ArgumentError::new_err(format!("kernel `{name}`: {e}")))?;
    config
        .map(|(c, source)| {
            let d = PyDict::new(py);
            d.set_item("config", c.to_string())?;
            d.set_item("source", format!("{source:?}").to_lowercase())?;
            Ok(d.unbind())
        })
        .transpose()
}

/// Compiled kernels by (kernel, input signature): a cached call neither re-traces the launch
/// nor re-emits and hashes StableHLO text (a trace + emit costs ~0.1-1 ms; see the note of #14).
/// Bounded as the eager runtime's caches are (each executable holds memory mappings).
type Key = (&'static str, Vec<(DType, Vec<usize>)>);
static EXECUTABLES: Bounded<Key, Arc<Executable>> = Bounded::new();

fn executable(
    kernel: &'static ShippedKernel,
    signature: &[(DType, Vec<usize>)],
    dev: &Device,
) -> PyResult<Arc<Executable>> {
    let key = (kernel.name, signature.to_vec());
    if let Some(c) = EXECUTABLES.get(&key) {
        return Ok(c);
    }
    let program = trace(kernel, signature, Some(dev))?;
    let exe = tessera_runtime::compile_program(&program, dev, Form::Auto)
        .map_err(|e| DeviceError::new_err(format!("kernel `{}`: {e}", kernel.name)))?;
    Ok(EXECUTABLES.get_or_insert(key, exe))
}

/// The executable of a shipped kernel (`library` None) or of a library kernel, for inputs of
/// `signature`, on the current device.
pub fn executable_for(
    name: &str,
    library: Option<&str>,
    signature: &[(DType, Vec<usize>)],
) -> PyResult<Arc<Executable>> {
    match library {
        None => executable(find(name)?, signature, device()?),
        Some(path) => crate::kernel_library::executable(path, name, signature),
    }
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
    let program = trace(kernel, &signature, None)?;
    Ok(program
        .outputs
        .iter()
        .map(|o| (o.dtype.name().to_string(), o.array_shape.clone()))
        .collect())
}

/// Runs `kernel` on tensors (anything with `__dlpack__`) on the current device; returns its
/// outputs as torch tensors (the inputs are read in place where the device allows it).
#[pyfunction]
pub fn kernel_run(
    py: Python<'_>,
    name: &str,
    tensors: &Bound<'_, PyList>,
) -> PyResult<Vec<Py<PyAny>>> {
    let kernel = find(name)?;
    let inputs = host_inputs(name, tensors)?;
    let signature = inputs.signature();
    let dev = device()?;
    let run_err =
        |e: tessera_runtime::RuntimeError| DeviceError::new_err(format!("kernel `{name}`: {e}"));
    if dev.kind() == DeviceKind::Interp {
        let program = trace(kernel, &signature, None)?;
        let inputs = inputs.to_host()?;
        let refs: Vec<&HostTensor> = inputs.iter().collect();
        let outputs = py
            .detach(|| tessera_runtime::run_program(&program, dev, &refs, Form::Auto))
            .map_err(run_err)?;
        return outputs
            .iter()
            .map(|t| {
                let (out, dst) = empty_torch(py, t.dtype(), t.shape())?;
                // SAFETY: `out` is a new tensor of exactly this many bytes.
                unsafe { bytes_at(dst, t.bytes().len()) }.copy_from_slice(t.bytes());
                Ok(out.unbind())
            })
            .collect();
    }
    let exe = executable(kernel, &signature, dev)?;
    execute(py, name, &exe, &inputs)
}

/// The kernel's own time on these CPU tensors, for benches: the median over `rounds` runs of
/// what every call does after its arguments are read (upload without a copy, execute, wait
/// for the outputs; on the CPU plugin the op's outputs are then read in place, with no
/// download), timed in Rust, in microseconds.
#[pyfunction]
pub fn kernel_execute_us(
    py: Python<'_>,
    name: &str,
    tensors: &Bound<'_, PyList>,
    rounds: usize,
) -> PyResult<f64> {
    let kernel = find(name)?;
    let inputs = host_inputs(name, tensors)?;
    let dev = device()?;
    let exe = executable(kernel, &inputs.signature(), dev)?;
    let raw = inputs.raw();
    let err =
        |e: tessera_runtime::RuntimeError| DeviceError::new_err(format!("kernel `{name}`: {e}"));
    let mut times = py
        .detach(|| {
            (0..rounds.max(1))
                .map(|_| {
                    let start = std::time::Instant::now();
                    for b in launch(dev, &exe, &raw)? {
                        b.block_until_ready()?;
                    }
                    Ok(start.elapsed().as_secs_f64() * 1e6)
                })
                .collect::<tessera_runtime::Result<Vec<f64>>>()
        })
        .map_err(err)?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Runs `kernel` on eager device tensors (the `tpu` torch device's storage): no host copy in
/// or out; the results are new eager tensors. The kernel is an op of the eager runtime: it
/// launches on its own in Strict and Debug, and is recorded into the fused program in
/// DeferAndFuse and in a compiled trace (`torch.compile` on the device). Same checks and
/// errors as `kernel_run`.
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
    let key = (kernel.name, signature);
    let op = match PROGRAM_OPS.get(&key) {
        Some(op) => op,
        None => {
            let program = trace(kernel, &key.1, Some(dev))?;
            let text = tessera_runtime::program_module(&program, dev, Form::Auto)
                .map_err(|e| DeviceError::new_err(format!("kernel `{name}`: {e}")))?;
            PROGRAM_OPS.get_or_insert(key, program_op(name, text)?)
        }
    };
    call_eager(py, &op, &tensors)
}

/// Kernels as eager ops by (kernel, input signature).
static PROGRAM_OPS: Bounded<Key, ProgramOp> = Bounded::new();

/// A kernel's module as an op of the eager runtime, named `kernel \`name\`` in errors.
pub fn program_op(name: &str, module: String) -> PyResult<ProgramOp> {
    ProgramOp::new(&format!("kernel `{name}`"), module).map_err(crate::eager::err)
}

/// Calls a kernel's eager op on eager tensors (see `kernel_run_eager`).
pub fn call_eager(
    py: Python<'_>,
    op: &ProgramOp,
    tensors: &[PyRef<'_, EagerTensor>],
) -> PyResult<Vec<EagerTensor>> {
    let inputs: Vec<tessera_eager::Tensor> = tensors.iter().map(|t| t.t.clone()).collect();
    py.detach(|| op.call(&inputs))
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

/// Input tensors viewed in place through DLPack; each view's memory stays valid while its
/// capsule, kept here, is alive.
pub struct HostInputs<'py> {
    _capsules: Vec<Bound<'py, PyAny>>,
    views: Vec<dlpack::View>,
}

impl HostInputs<'_> {
    pub fn signature(&self) -> Vec<(DType, Vec<usize>)> {
        self.views
            .iter()
            .map(|v| (v.dtype, v.shape.clone()))
            .collect()
    }

    /// `(dtype, shape, address)` per input, as [`launch`] takes them (raw pointers are not
    /// Send: the addresses cross into GIL-free closures as integers).
    pub fn raw(&self) -> Vec<(DType, &[usize], usize)> {
        self.views
            .iter()
            .map(|v| (v.dtype, v.shape.as_slice(), v.data as usize))
            .collect()
    }

    /// Copies of the inputs (for the interpreter, which runs on host tensors).
    pub fn to_host(&self) -> PyResult<Vec<HostTensor>> {
        self.views
            .iter()
            .map(|v| {
                // SAFETY: the view's capsule is alive (held by `self`) and the view contiguous.
                let bytes = unsafe { bytes_at(v.data as usize, v.byte_len()) }.to_vec();
                HostTensor::from_bytes(v.dtype, v.shape.clone(), bytes)
                    .map_err(|e| ArgumentError::new_err(e.to_string()))
            })
            .collect()
    }
}

/// Tensors (anything with `__dlpack__`, CPU and contiguous) viewed in place.
pub fn host_inputs<'py>(name: &str, tensors: &Bound<'py, PyList>) -> PyResult<HostInputs<'py>> {
    let mut capsules = Vec::with_capacity(tensors.len());
    let mut views = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let what = format!("kernel `{name}`: input {i}");
        let capsule = t.call_method0("__dlpack__")?;
        let ptr =
            // SAFETY: `capsule` is alive for this call; the name is checked by the call.
            unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), c"dltensor".as_ptr()) };
        if ptr.is_null() {
            return Err(PyErr::take(t.py()).unwrap_or_else(|| {
                ArgumentError::new_err(format!("{what}: __dlpack__ gave no dltensor capsule"))
            }));
        }
        // SAFETY: a live, unconsumed dltensor capsule's pointer, kept alive in `capsules`.
        let view = unsafe { dlpack::view(ptr) }
            .map_err(|e| ArgumentError::new_err(format!("{what}: {e}")))?;
        if !view.contiguous {
            return Err(ArgumentError::new_err(format!(
                "{what}: tensor is not contiguous; call .contiguous() first"
            )));
        }
        views.push(view);
        capsules.push(capsule);
    }
    Ok(HostInputs {
        _capsules: capsules,
        views,
    })
}

/// Runs a compiled kernel on the current device and returns its outputs as torch tensors:
/// the inputs are uploaded without a copy where the device allows it (the CPU plugin aliases
/// a torch tensor's memory), the outputs downloaded straight into new torch tensors. Errors
/// name the kernel.
pub fn execute(
    py: Python<'_>,
    name: &str,
    exe: &Executable,
    inputs: &HostInputs<'_>,
) -> PyResult<Vec<Py<PyAny>>> {
    let dev = device()?;
    let err =
        |e: tessera_runtime::RuntimeError| DeviceError::new_err(format!("kernel `{name}`: {e}"));
    let inputs = inputs.raw();
    let outputs = py.detach(|| launch(dev, exe, &inputs)).map_err(err)?;
    // New tensors first (that needs the GIL), then every download in one GIL-free section.
    let mut results = Vec::with_capacity(outputs.len());
    let mut targets = Vec::with_capacity(outputs.len());
    for b in &outputs {
        let (t, ptr) = empty_torch(py, b.dtype(), b.shape())?;
        targets.push(ptr);
        results.push(t.unbind());
    }
    py.detach(|| download(&outputs, &targets)).map_err(err)?;
    Ok(results)
}

/// Runs `exe` on host memory: `(dtype, shape, address)` per input, each contiguous, alive
/// and unwritten until this returns (the CPU plugin's uploads alias it).
pub fn launch(
    dev: &Device,
    exe: &Executable,
    inputs: &[(DType, &[usize], usize)],
) -> tessera_runtime::Result<Vec<tessera_runtime::Buffer>> {
    let client = dev.client()?;
    let bufs = inputs
        .iter()
        .map(|&(dtype, shape, data)| {
            // SAFETY: the caller keeps the memory alive past these buffers (dropped at the
            // end of this function; a drop waits until PJRT releases the memory).
            unsafe { client.upload_aliasing(dtype, shape, data as *const u8) }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<_> = bufs.iter().collect();
    exe.execute(&refs)
}

/// Downloads each output into the memory at `targets[i]` (a new contiguous tensor of exactly
/// the output's size, not shared while it is written).
pub fn download(
    outputs: &[tessera_runtime::Buffer],
    targets: &[usize],
) -> tessera_runtime::Result<()> {
    outputs.iter().zip(targets).try_for_each(|(b, &ptr)| {
        let len = b.shape().iter().product::<usize>() * b.dtype().size_bytes();
        // SAFETY: as this function's contract says.
        b.to_host_into(unsafe { bytes_at(ptr, len) })
    })
}

/// The `len` bytes at address `ptr` (a tensor's memory); empty for an empty tensor, whose
/// data pointer may be null.
///
/// # Safety
/// For `len > 0`, `ptr` points to `len` bytes that stay valid, and unaliased while written
/// through the slice, for `'a`.
unsafe fn bytes_at<'a>(ptr: usize, len: usize) -> &'a mut [u8] {
    if len == 0 {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(ptr as *mut u8, len)
    }
}

/// A new contiguous torch CPU tensor and the address of its memory.
fn empty_torch<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let torch = py.import("torch")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", torch.getattr(torch_dtype(dtype))?)?;
    let t = torch.call_method("empty", (shape.to_vec(),), Some(&kwargs))?;
    let ptr = t.call_method0("data_ptr")?.extract()?;
    Ok((t, ptr))
}

/// torch's name of a dtype (`torch.<name>`).
fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::C64 => "complex64",
        DType::C128 => "complex128",
    }
}
