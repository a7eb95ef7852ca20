//! The C entry point of a kernel op's CPU implementation in C++ (`tessera/csrc/kernel_ops.cpp`):
//! torch's dispatcher calls that boxed kernel without Python, and it calls [`tessera_kernel_call`]
//! with the tensors' memory. Going through Python costs 15-21 us per call (the dispatcher's
//! Python kernel, then `_run`); this path costs what the runtime does.
//!
//! Outputs: on the CPU plugin an output's memory is the host's, so the torch tensor is made
//! over it (the buffer is held until torch frees the tensor: [`tessera_host_view_release`]);
//! elsewhere it is downloaded into a tensor allocated through a callback.
//!
//! Anything this path does not take (the interpreter device, a dtype Tessera lacks, a kernel
//! whose launch rejects the shapes, a device error) returns [`NOT_HANDLED`]: the C++ kernel
//! then calls the Python implementation, which runs it or raises the kernel's own error.

use crate::kernel_ops::{download, executable_for, launch};
use std::ffi::{c_char, c_void, CStr};
use tessera_lowering::DType;
use tessera_runtime::{DeviceKind, HostView};

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

/// Makes output `index` a torch tensor of `dtype` and `rank` dims over `data`, memory the
/// runtime owns, whose deleter calls [`tessera_host_view_release`]`(owner)`. Returns 0, or
/// nonzero after releasing `owner` itself.
pub type Adopt = unsafe extern "C" fn(
    ctx: *mut c_void,
    index: usize,
    dtype: i32,
    rank: usize,
    dims: *const i64,
    data: *mut u8,
    owner: *mut c_void,
) -> i32;

/// Runs kernel `kernel` (of the kernel library at `library`, or a shipped one when it is
/// empty) on `n` contiguous CPU tensors: `data[i]` points to input i, of ScalarType
/// `dtypes[i]` and shape `dims[i][..ranks[i]]`; each output, in order, is either made over
/// the runtime's memory through `adopt` or allocated through `alloc` and written. Returns
/// [`OK`] or [`NOT_HANDLED`].
///
/// # Safety
/// The strings are NUL-terminated; the arrays hold `n` entries; each input's memory holds
/// its shape's elements and stays valid and unwritten for the call; `alloc` returns memory
/// of the size it was asked for, valid for the call; `adopt` owns `owner` once called.
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
    adopt: Adopt,
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
        let (mut copies, mut targets) = (Vec::new(), Vec::new());
        for (i, b) in outputs.into_iter().enumerate() {
            let dtype = b.dtype().torch_scalar_type();
            let dims: Vec<i64> = b.shape().iter().map(|&d| d as i64).collect();
            match b.into_host_view().ok()? {
                Ok(view) => {
                    let data = view.as_ptr();
                    let owner = Box::into_raw(Box::new(view)) as *mut c_void;
                    if adopt(ctx, i, dtype, dims.len(), dims.as_ptr(), data, owner) != 0 {
                        return None;
                    }
                }
                Err(b) => {
                    let ptr = alloc(ctx, i, dtype, dims.len(), dims.as_ptr());
                    if ptr.is_null() && b.shape().iter().product::<usize>() > 0 {
                        return None;
                    }
                    copies.push(b);
                    targets.push(ptr as usize);
                }
            }
        }
        download(&copies, &targets).ok()
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Some(())) => OK,
        _ => NOT_HANDLED,
    }
}

/// Ends the sharing of an output adopted by a torch tensor (its deleter calls this once).
///
/// # Safety
/// `owner` is what [`Adopt`] was given, released once, or null.
#[no_mangle]
pub unsafe extern "C" fn tessera_host_view_release(owner: *mut c_void) {
    if !owner.is_null() {
        // A panic must not unwind into torch's deleter: the view is then leaked.
        let _ = std::panic::catch_unwind(|| drop(Box::from_raw(owner as *mut HostView)));
    }
}

/// The addresses of [`tessera_kernel_call`] and [`tessera_host_view_release`], for the C++
/// kernel to call.
#[pyo3::pyfunction]
pub fn kernel_call_address() -> (usize, usize) {
    (
        tessera_kernel_call as *const () as usize,
        tessera_host_view_release as *const () as usize,
    )
}
