//! Reading a tensor handed over through DLPack (`tensor.__dlpack__()`): the capsule's
//! `DLManagedTensor` is read while the capsule is alive, as a view of its memory (which a
//! kernel op uploads without a copy) or copied once into a `HostTensor`. The capsule is not
//! consumed, so its producer frees it as usual.
//!
//! The structs follow the DLPack ABI (dlpack.h v0.8+, stable since v0.6).

use std::ffi::c_void;
use tessera_lowering::{DType, HostTensor};

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const KDL_CPU: i32 = 1;

fn dtype_of(t: &DLDataType) -> Result<DType, String> {
    if t.lanes != 1 {
        return Err(format!(
            "vector dtypes (lanes={}) are not supported",
            t.lanes
        ));
    }
    Ok(match (t.code, t.bits) {
        (0, 8) => DType::I8,
        (0, 16) => DType::I16,
        (0, 32) => DType::I32,
        (0, 64) => DType::I64,
        (1, 8) => DType::U8,
        (1, 16) => DType::U16,
        (1, 32) => DType::U32,
        (1, 64) => DType::U64,
        (2, 16) => DType::F16,
        (2, 32) => DType::F32,
        (2, 64) => DType::F64,
        (4, 16) => DType::BF16,
        (6, 8) => DType::Bool,
        (5, 64) => DType::C64,
        (5, 128) => DType::C128,
        (5, bits) => {
            return Err(format!(
                "complex tensors of {bits} bits are not supported (only complex64 and complex128)"
            ))
        }
        (code, bits) => {
            return Err(format!(
                "unsupported DLPack dtype (code {code}, {bits} bits)"
            ))
        }
    })
}

/// A tensor's memory as a `dltensor` capsule describes it, not copied.
pub struct View {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// The first element (the capsule's byte offset applied).
    pub data: *const u8,
    /// Row-major and dense: `data` holds the elements in order.
    pub contiguous: bool,
}

impl View {
    pub fn byte_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }
}

/// Reads what the capsule describes: a CPU tensor's dtype, shape and memory.
///
/// # Safety
/// `managed` must be the pointer of a live, unconsumed `dltensor` capsule; `View::data` is
/// valid while that capsule is alive.
pub unsafe fn view(managed: *const c_void) -> Result<View, String> {
    let m = &*(managed as *const DLManagedTensor);
    let t = &m.dl_tensor;
    if t.device.device_type != KDL_CPU {
        return Err(format!(
            "tensor is on DLPack device type {} (id {}); pass CPU tensors",
            t.device.device_type, t.device.device_id
        ));
    }
    let dtype = dtype_of(&t.dtype)?;
    let ndim = usize::try_from(t.ndim).map_err(|_| "negative ndim".to_string())?;
    let shape: Vec<usize> = if ndim == 0 {
        Vec::new()
    } else {
        std::slice::from_raw_parts(t.shape, ndim)
            .iter()
            .map(|&d| d as usize)
            .collect()
    };
    let mut contiguous = true;
    if !t.strides.is_null() && shape.iter().product::<usize>() > 1 {
        let strides = std::slice::from_raw_parts(t.strides, ndim);
        let mut expected = 1i64;
        for (d, s) in shape.iter().zip(strides).rev() {
            contiguous &= *d == 1 || *s == expected;
            expected *= *d as i64;
        }
    }
    let data = (t.data as *const u8).wrapping_add(t.byte_offset as usize);
    Ok(View {
        dtype,
        shape,
        data,
        contiguous,
    })
}

/// Copies the tensor behind a `dltensor` capsule pointer into host memory.
///
/// # Safety
/// `managed` must be the pointer of a live, unconsumed `dltensor` capsule.
pub unsafe fn read(managed: *const c_void) -> Result<HostTensor, String> {
    let v = view(managed)?;
    if !v.contiguous {
        return Err("tensor is not contiguous; call .contiguous() first".into());
    }
    let len = v.byte_len();
    let bytes = if len == 0 {
        Vec::new()
    } else {
        std::slice::from_raw_parts(v.data, len).to_vec()
    };
    HostTensor::from_bytes(v.dtype, v.shape, bytes).map_err(|e| e.to_string())
}
