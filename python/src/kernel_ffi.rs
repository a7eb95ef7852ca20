//! The C entry point of a kernel op's CPU implementation in C++ (`tessera/csrc/kernel_ops.cpp`):
//! torch's dispatcher calls that boxed kernel without Python, and it calls [`tessera_kernel_call`]
//! with the tensors' memory. Going through Python costs 15-21 us per call (the dispatcher's
//! Python kernel, then `_run`); this path costs what the runtime does.
//!
//! Anything this path does not take (the interpreter device, a dtype Tessera lacks, a kernel
//! whose launch rejects the shapes, a device error) returns [`NOT_HANDLED`]: the C++ kernel
//! then calls the Python implementation, which runs it or raises the kernel's own error.

use crate::kernel_ops::{download, executable_for, launch};
use std::ffi::{c_char, c_void, CStr};
use tessera_lowering::DType;
use tessera_runtime::DeviceKind;

/// Ran; the outputs were written.
const OK: i32 = 0;
/// Not run here: call the Python implementation.
const NOT_HANDLED: i32 = 1;

/// Allocates output `index` (a new contiguous torch tensor of `dtype`, a torch ScalarType,
/// and `rank` dims) and returns its memory, or null.
pub type Alloc = unsafe extern "C" fn(
    ctx: *mut c_void,
    index: usize,
    dtype: i32,
    rank: usize,
    dims: *const i64,
) -> *mut u8;

/// Runs kernel `kernel` (of the kernel library at `library`, or a shipped one when it is
/// empty) on `n` contiguous CPU tensors: `data[i]` points to input i, of ScalarType
/// `dtypes[i]` and shape `dims[i][..ranks[i]]`; each output is allocated through `alloc`
/// and written. Returns [`OK`] or [`NOT_HANDLED`].
///
/// # Safety
/// The strings are NUL-terminated; the arrays hold `n` entries; each input's memory holds
/// its shape's elements and stays valid and unwritten for the call; `alloc` returns memory
/// of the size it was asked for, valid for the call.
#[no_mangle]
pub unsafe extern "C" fn tessera_kernel_call(
    kernel: *const c_char,
    library: *const c_char,
    n: usize,
    data: *const *const u8,
    dtypes: *const i32,
    ranks: *const usize,
    dims: *const *const i64,
    ctx: *mut c_void,
    alloc: Alloc,
) -> i32 {
    // A panic must not unwind into C++: it is a call not handled here.
    let run = || -> Option<()> {
        let dev = crate::device().ok()?;
        if dev.kind() == DeviceKind::Interp {
            return None;
        }
        let kernel = CStr::from_ptr(kernel).to_str().ok()?;
        let library = CStr::from_ptr(library).to_str().ok()?;
        let mut signature = Vec::with_capacity(n);
        let mut addresses = Vec::with_capacity(n);
        for i in 0..n {
            let dtype = DType::from_torch_scalar_type(i64::from(*dtypes.add(i)))?;
            let rank = *ranks.add(i);
            let shape = (0..rank)
                .map(|d| usize::try_from(*(*dims.add(i)).add(d)).ok())
                .collect::<Option<Vec<usize>>>()?;
            signature.push((dtype, shape));
            addresses.push(*data.add(i) as usize);
        }
        let exe =
            executable_for(kernel, (!library.is_empty()).then_some(library), &signature).ok()?;
        let inputs: Vec<(DType, &[usize], usize)> = signature
            .iter()
            .zip(&addresses)
            .map(|((d, s), &a)| (*d, s.as_slice(), a))
            .collect();
        let outputs = launch(dev, &exe, &inputs).ok()?;
        let mut targets = Vec::with_capacity(outputs.len());
        for (i, b) in outputs.iter().enumerate() {
            let dims: Vec<i64> = b.shape().iter().map(|&d| d as i64).collect();
            let ptr = alloc(
                ctx,
                i,
                b.dtype().torch_scalar_type(),
                dims.len(),
                dims.as_ptr(),
            );
            if ptr.is_null() && b.shape().iter().product::<usize>() > 0 {
                return None;
            }
            targets.push(ptr as usize);
        }
        download(&outputs, &targets).ok()
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Some(())) => OK,
        _ => NOT_HANDLED,
    }
}

/// The address of [`tessera_kernel_call`], for the C++ kernel to call.
#[pyo3::pyfunction]
pub fn kernel_call_address() -> usize {
    tessera_kernel_call as *const () as usize
}
