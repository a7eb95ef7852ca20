//! Exporting `#[tpu_kernel]` kernels from a crate of the user's own (a `cdylib`), so Tessera's
//! Python package can load the library and register its kernels as torch ops
//! (`tessera.torch.load_library`). The ABI is three C functions over JSON strings, so the
//! library and Tessera need not share a Rust compiler or crate versions:
//!
//! - `tessera_export_v1_describe() -> *mut c_char`: `[{"name", "problem_dims", "inputs",
//!   "outputs"}]` (parameter names);
//! - `tessera_export_v1_lower(name, signature) -> *mut c_char`: for a signature
//!   `[["f32", [16, 256]], ...]`, `{"stablehlo": text, "outputs": [["f32", [16, 256]]]}` or
//!   `{"error": message}` (a shape no launch fits, a dtype the kernel refuses);
//! - `tessera_export_v1_free(ptr)`: frees a string returned by the other two.
//!
//! The kernel is traced and lowered to StableHLO inside the library; Tessera compiles and runs
//! the text on its device. [`export_kernels!`] writes the three functions.

mod problem;

pub use problem::problem_of;

use serde_json::{json, Value};
use std::ffi::{c_char, CStr, CString};
use tessera_lowering::backend::{self, Backend, Target};
use tessera_lowering::kernel::ParamRole;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::Launch;
use tessera_lowering::DType;

/// A kernel with its launch rule: what a caller's arrays mean as a problem shape, and the
/// launch (grid, blocks) for a problem shape.
#[derive(Debug)]
pub struct ExportedKernel {
    pub name: &'static str,
    /// Names of the problem shape's dims (`["m", "n", "k"]`).
    pub problem_dims: &'static [&'static str],
    /// The input arrays' shapes for a problem shape.
    pub input_shapes: fn(&[usize]) -> Vec<Vec<usize>>,
    /// The launch for a problem shape, or why the shape is not one.
    pub launch: fn(&[usize]) -> Result<Launch, String>,
}

/// The describe document for `kernels`.
pub fn describe(kernels: &[ExportedKernel]) -> Value {
    let entries: Vec<Value> = kernels
        .iter()
        .map(|k| {
            let probe: Vec<usize> = k.problem_dims.iter().map(|_| 8).collect();
            let names = |role| match (k.launch)(&probe) {
                Ok(l) => l.kernel().info().params_of(role).map(|p| p.name).collect(),
                Err(_) => Vec::new(),
            };
            json!({
                "name": k.name,
                "problem_dims": k.problem_dims,
                "inputs": names(ParamRole::Input),
                "outputs": names(ParamRole::Output),
            })
        })
        .collect();
    Value::Array(entries)
}

/// The StableHLO module and output types of kernel `name` for inputs of `signature`.
pub fn lower(kernels: &[ExportedKernel], name: &str, signature: &str) -> Result<Value, String> {
    let kernel = kernels
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| format!("this library exports no kernel `{name}`"))?;
    let sig: Vec<(String, Vec<usize>)> = serde_json::from_str(signature)
        .map_err(|e| format!("kernel `{name}`: bad signature {signature:?}: {e}"))?;
    let sig = sig
        .into_iter()
        .map(|(d, s)| Ok((d.parse::<DType>().map_err(|e| e.to_string())?, s)))
        .collect::<Result<Vec<_>, String>>()?;
    let shapes: Vec<Vec<usize>> = sig.iter().map(|(_, s)| s.clone()).collect();
    let problem = problem_of(
        kernel.name,
        kernel.problem_dims,
        kernel.input_shapes,
        &shapes,
    )?;
    let launch = (kernel.launch)(&problem).map_err(|e| format!("kernel `{name}`: {e}"))?;
    let program = launch
        .trace_program(&sig)
        .map_err(|e| format!("kernel `{name}`: {e}"))?;
    // User crates compile the module with their own PJRT plugin: StableHLO, unchecked.
    let backend = Backend::for_target(Target::StableHlo, Form::Auto, false);
    let text = backend::lower(&program, backend)
        .and_then(|lowered| lowered.into_module())
        .map_err(|e| format!("kernel `{name}`: {e}"))?;
    let outputs: Vec<Value> = program
        .outputs
        .iter()
        .map(|o| json!([o.dtype.name(), o.array_shape]))
        .collect();
    Ok(json!({"stablehlo": text, "outputs": outputs}))
}

/// A JSON document as a C string for the caller (freed by `tessera_export_v1_free`).
pub fn to_c(v: &Value) -> *mut c_char {
    // JSON text never holds a NUL byte (serde_json escapes control characters).
    CString::new(v.to_string())
        .expect("JSON has no NUL")
        .into_raw()
}

/// `tessera_export_v1_lower`'s body: reads the two C strings, answers in JSON.
///
/// # Safety
/// `name` and `signature` must be valid NUL-terminated strings (or null, refused).
pub unsafe fn lower_c(
    kernels: &[ExportedKernel],
    name: *const c_char,
    signature: *const c_char,
) -> *mut c_char {
    if name.is_null() || signature.is_null() {
        return to_c(&json!({"error": "null argument"}));
    }
    // SAFETY: non-null, NUL-terminated per this function's contract.
    let (name, signature) = unsafe { (CStr::from_ptr(name), CStr::from_ptr(signature)) };
    let answer = match (name.to_str(), signature.to_str()) {
        (Ok(n), Ok(s)) => lower(kernels, n, s).unwrap_or_else(|e| json!({ "error": e })),
        _ => json!({"error": "arguments are not UTF-8"}),
    };
    to_c(&answer)
}

/// Frees a string from `to_c`.
///
/// # Safety
/// `ptr` must come from `to_c` (or be null), and be freed once.
pub unsafe fn free_c(ptr: *mut c_char) {
    if !ptr.is_null() {
        // SAFETY: made by CString::into_raw in `to_c`, per this function's contract.
        drop(unsafe { CString::from_raw(ptr) });
    }
}

/// Writes the library's C ABI for `kernels` (a `&'static [ExportedKernel]` expression).
#[macro_export]
macro_rules! export_kernels {
    ($kernels:expr) => {
        #[no_mangle]
        pub extern "C" fn tessera_export_v1_describe() -> *mut ::std::ffi::c_char {
            $crate::to_c(&$crate::describe($kernels))
        }

        /// # Safety
        /// NUL-terminated strings, as the ABI says.
        #[no_mangle]
        pub unsafe extern "C" fn tessera_export_v1_lower(
            name: *const ::std::ffi::c_char,
            signature: *const ::std::ffi::c_char,
        ) -> *mut ::std::ffi::c_char {
            // SAFETY: forwarded contract.
            unsafe { $crate::lower_c($kernels, name, signature) }
        }

        /// # Safety
        /// A pointer returned by the functions above, freed once.
        #[no_mangle]
        pub unsafe extern "C" fn tessera_export_v1_free(ptr: *mut ::std::ffi::c_char) {
            // SAFETY: forwarded contract.
            unsafe { $crate::free_c(ptr) }
        }
    };
}
