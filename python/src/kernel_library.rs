//! Kernels from a library of the user's own (a cdylib built with `tessera_export::export_kernels!`),
//! loaded once and kept loaded; each call lowers through the library's C ABI (JSON strings),
//! then compiles and runs the StableHLO on Tessera's device like a shipped kernel.

use crate::{device, ArgumentError, DeviceError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use tessera_eager::{Bounded, ProgramOp};
use tessera_lowering::DType;
use tessera_runtime::{CompileOptions, Executable};

type Describe = unsafe extern "C" fn() -> *mut c_char;
type Lower = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut c_char;
type Free = unsafe extern "C" fn(*mut c_char);

struct Library {
    // Keeps the code behind the function pointers mapped (never unloaded).
    _lib: libloading::Library,
    describe: Describe,
    lower: Lower,
    free: Free,
}

impl Library {
    /// Calls one of the library's JSON-returning functions and frees its answer.
    fn answer(&self, ptr: *mut c_char) -> PyResult<Value> {
        if ptr.is_null() {
            return Err(ArgumentError::new_err(
                "the kernel library returned no answer",
            ));
        }
        // SAFETY: a NUL-terminated string from the library's `to_c`, freed once below.
        let text = unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: the pointer came from this library's functions.
        unsafe { (self.free)(ptr) };
        serde_json::from_str(&text).map_err(|e| {
            ArgumentError::new_err(format!("the kernel library's answer is not JSON: {e}"))
        })
    }
}

static LIBRARIES: LazyLock<Mutex<HashMap<String, Arc<Library>>>> = LazyLock::new(Default::default);
type Key = (String, String, Vec<(DType, Vec<usize>)>);
/// A library kernel lowered for one input signature: its module, its outputs' dtypes and
/// shapes, and (made on first use) its executable and its eager op.
struct Lowered {
    name: String,
    text: String,
    outputs: Vec<(String, Vec<usize>)>,
    exe: OnceLock<Arc<Executable>>,
    op: OnceLock<ProgramOp>,
}

impl Lowered {
    fn executable(&self) -> PyResult<Arc<Executable>> {
        if let Some(e) = self.exe.get() {
            return Ok(e.clone());
        }
        let exe = device()?
            .client()
            .and_then(|c| c.compile_cached(&self.text, &CompileOptions::default()))
            .map_err(|e| DeviceError::new_err(format!("kernel `{}`: {e}", self.name)))?;
        Ok(self.exe.get_or_init(|| exe).clone())
    }

    fn program_op(&self) -> PyResult<ProgramOp> {
        if let Some(op) = self.op.get() {
            return Ok(op.clone());
        }
        let op = crate::kernel_ops::program_op(&self.name, self.text.clone())?;
        Ok(self.op.get_or_init(|| op).clone())
    }
}

/// Bounded as the eager runtime's caches are (a lowered kernel keeps its executable).
static LOWERED: Bounded<Key, Arc<Lowered>> = Bounded::new();

fn library(path: &str) -> PyResult<Arc<Library>> {
    let mut libs = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = libs.get(path) {
        return Ok(l.clone());
    }
    let err = |e: libloading::Error| ArgumentError::new_err(format!("kernel library {path}: {e}"));
    // SAFETY: loading runs the library's initialisers; a kernel library built from the
    // template has none beyond Rust's. The symbols' types are the v1 ABI's.
    let lib = unsafe { libloading::Library::new(path) }.map_err(err)?;
    let (describe, lower, free) = unsafe {
        (
            *lib.get::<Describe>(b"tessera_export_v1_describe\0")
                .map_err(err)?,
            *lib.get::<Lower>(b"tessera_export_v1_lower\0")
                .map_err(err)?,
            *lib.get::<Free>(b"tessera_export_v1_free\0").map_err(err)?,
        )
    };
    let l = Arc::new(Library {
        _lib: lib,
        describe,
        lower,
        free,
    });
    libs.insert(path.to_string(), l.clone());
    Ok(l)
}

/// Loads the kernel library at `path` (once) and lists its kernels: dicts of name,
/// problem_dims, inputs, outputs.
#[pyfunction]
pub fn library_kernels(py: Python<'_>, path: &str) -> PyResult<Vec<Py<PyDict>>> {
    let lib = library(path)?;
    // SAFETY: the v1 ABI's describe takes nothing and returns a string for `answer`.
    let doc = lib.answer(unsafe { (lib.describe)() })?;
    let entries = doc.as_array().ok_or_else(|| {
        ArgumentError::new_err(format!("kernel library {path}: describe is not a list"))
    })?;
    entries
        .iter()
        .map(|e| {
            let d = PyDict::new(py);
            for key in ["name", "problem_dims", "inputs", "outputs"] {
                let v = &e[key];
                match v {
                    Value::String(s) => d.set_item(key, s)?,
                    Value::Array(a) => {
                        d.set_item(key, a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>())?
                    }
                    _ => {
                        return Err(ArgumentError::new_err(format!(
                            "kernel library {path}: `{key}` missing"
                        )))
                    }
                }
            }
            Ok(d.unbind())
        })
        .collect()
}

fn lowered(path: &str, name: &str, signature: &[(DType, Vec<usize>)]) -> PyResult<Arc<Lowered>> {
    let key = (path.to_string(), name.to_string(), signature.to_vec());
    if let Some(l) = LOWERED.get(&key) {
        return Ok(l);
    }
    let lib = library(path)?;
    let sig: Vec<Value> = signature
        .iter()
        .map(|(d, s)| serde_json::json!([d.name(), s]))
        .collect();
    let cname =
        CString::new(name).map_err(|_| ArgumentError::new_err("a kernel name holds a NUL byte"))?;
    let csig = CString::new(Value::Array(sig).to_string()).expect("JSON has no NUL");
    // SAFETY: two NUL-terminated strings alive for the call, as the v1 ABI's lower takes.
    let answer = lib.answer(unsafe { (lib.lower)(cname.as_ptr(), csig.as_ptr()) })?;
    if let Some(e) = answer["error"].as_str() {
        return Err(ArgumentError::new_err(e.to_string()));
    }
    let text = answer["stablehlo"].as_str().ok_or_else(|| {
        ArgumentError::new_err(format!("kernel `{name}`: the library returned no module"))
    })?;
    let outputs: Vec<(String, Vec<usize>)> = serde_json::from_value(answer["outputs"].clone())
        .map_err(|e| ArgumentError::new_err(format!("kernel `{name}`: bad outputs: {e}")))?;
    let l = Arc::new(Lowered {
        name: name.to_string(),
        text: text.to_string(),
        outputs,
        exe: OnceLock::new(),
        op: OnceLock::new(),
    });
    Ok(LOWERED.get_or_insert(key, l))
}

/// A library kernel's executable for inputs of `signature`.
pub fn executable(
    path: &str,
    name: &str,
    signature: &[(DType, Vec<usize>)],
) -> PyResult<Arc<Executable>> {
    lowered(path, name, signature)?.executable()
}

/// Output `(dtype, shape)`s of a library kernel for inputs of these dtypes and shapes.
#[pyfunction]
pub fn library_meta(
    path: &str,
    name: &str,
    inputs: Vec<(String, Vec<usize>)>,
) -> PyResult<Vec<(String, Vec<usize>)>> {
    Ok(lowered(path, name, &crate::kernel_ops::signature(inputs)?)?
        .outputs
        .clone())
}

/// Runs a library kernel on CPU tensors; outputs as torch tensors (see `kernel_run`).
#[pyfunction]
pub fn library_run(
    py: Python<'_>,
    path: &str,
    name: &str,
    tensors: &Bound<'_, PyList>,
) -> PyResult<Vec<Py<PyAny>>> {
    let inputs = crate::kernel_ops::host_inputs(name, tensors)?;
    let exe = executable(path, name, &inputs.signature())?;
    crate::kernel_ops::execute(py, name, &exe, &inputs)
}

/// Runs a library kernel on eager device tensors (no host copy; an op of the eager runtime);
/// see `kernel_run_eager`.
#[pyfunction]
pub fn library_run_eager(
    py: Python<'_>,
    path: &str,
    name: &str,
    tensors: Vec<PyRef<'_, crate::eager::EagerTensor>>,
) -> PyResult<Vec<crate::eager::EagerTensor>> {
    let sig: Vec<(DType, Vec<usize>)> =
        tensors.iter().map(|t| (t.t.dtype(), t.t.shape())).collect();
    let op = lowered(path, name, &sig)?.program_op()?;
    crate::kernel_ops::call_eager(py, &op, &tensors)
}
