//! Device buffers and 64-byte aligned host memory for zero-copy uploads.

use crate::buffer_type::from_pjrt;
use crate::client::ClientInner;
use crate::error::Result;
use crate::ffi;
use crate::pjrt_call::{await_event, pjrt};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::Arc;
use tessera_lowering::{host, DType, HostTensor};

/// An array on a device. Dropping it frees the device memory.
pub struct Buffer {
    client: Arc<ClientInner>,
    raw: *mut ffi::PJRT_Buffer,
    dtype: DType,
    shape: Vec<usize>,
    /// Zero-copy uploads: the host memory the buffer aliases (owned here, or the caller's for
    /// [`crate::Client::upload_aliasing`]), and the event PJRT fires once the buffer no longer
    /// uses it.
    aliased: Option<(Option<Arc<AlignedBytes>>, *mut ffi::PJRT_Event)>,
}

// SAFETY: PJRT buffers may be used and freed from any thread.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer({}{:?} on {})",
            self.dtype, self.shape, self.client.platform_name
        )
    }
}

impl Buffer {
    pub(crate) fn from_raw(
        client: Arc<ClientInner>,
        raw: *mut ffi::PJRT_Buffer,
        dtype: DType,
        shape: Vec<usize>,
    ) -> Buffer {
        Buffer {
            client,
            raw,
            dtype,
            shape,
            aliased: None,
        }
    }

    pub(crate) fn from_raw_zero_copy(
        client: Arc<ClientInner>,
        raw: *mut ffi::PJRT_Buffer,
        dtype: DType,
        shape: Vec<usize>,
        done: *mut ffi::PJRT_Event,
        bytes: Option<Arc<AlignedBytes>>,
    ) -> Buffer {
        Buffer {
            client,
            raw,
            dtype,
            shape,
            aliased: Some((bytes, done)),
        }
    }

    /// Wraps an output buffer of an execution, reading its dtype and shape from PJRT.
    pub(crate) fn from_output(
        client: Arc<ClientInner>,
        raw: *mut ffi::PJRT_Buffer,
    ) -> Result<Buffer> {
        let api = client.plugin.api();
        // Own it first so that an error below still frees it.
        let mut b = Buffer::from_raw(client, raw, DType::U8, Vec::new());
        let mut et: ffi::PJRT_Buffer_ElementType_Args = ffi::args();
        et.buffer = raw;
        pjrt!(api, PJRT_Buffer_ElementType, &mut et)?;
        b.dtype = from_pjrt(et.type_)?;
        let mut dims: ffi::PJRT_Buffer_Dimensions_Args = ffi::args();
        dims.buffer = raw;
        pjrt!(api, PJRT_Buffer_Dimensions, &mut dims)?;
        // SAFETY: `dims` points to `num_dims` values owned by the buffer.
        let d = unsafe { std::slice::from_raw_parts(dims.dims, dims.num_dims) };
        b.shape = d.iter().map(|&x| x as usize).collect();
        Ok(b)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Whether the buffer aliases host memory (a zero-copy upload): such a buffer is never
    /// donated, or a program would write into that memory.
    pub fn aliases_host(&self) -> bool {
        self.aliased.is_some()
    }
    /// The platform the buffer lives on (`cpu`, `tpu`, `cuda`).
    pub fn platform_name(&self) -> &str {
        &self.client.platform_name
    }
    pub(crate) fn client_inner(&self) -> &Arc<ClientInner> {
        &self.client
    }
    pub(crate) fn raw(&self) -> *mut ffi::PJRT_Buffer {
        self.raw
    }

    /// Copies the buffer to the host, waiting for any computation producing it. A result
    /// larger than the host can hold is an error naming its size, not an abort.
    pub fn to_host(&self) -> Result<HostTensor> {
        let len = host::byte_len(self.dtype, &self.shape)?;
        let mut bytes = host::try_zeroed_bytes(self.dtype, &self.shape, len)?;
        self.to_host_into(&mut bytes)?;
        Ok(HostTensor::from_bytes(
            self.dtype,
            self.shape.clone(),
            bytes,
        )?)
    }

    /// Copies the buffer into `dst` (row-major, exactly the buffer's size), waiting for any
    /// computation producing it: a download into memory the caller owns, e.g. a torch tensor's.
    pub fn to_host_into(&self, dst: &mut [u8]) -> Result<()> {
        self.client.check_process()?;
        let len = host::byte_len(self.dtype, &self.shape)?;
        if dst.len() != len {
            return Err(tessera_lowering::HostTensorError::ByteLength {
                dtype: self.dtype,
                shape: self.shape.clone(),
                expected: len,
                got: dst.len(),
            }
            .into());
        }
        if len == 0 {
            return Ok(());
        }
        if let Some(src) = self.host_memory()? {
            // The CPU plugin's own download runs on its thread pool: waking a pool thread
            // costs ~10-100 us, a copy of the computed elements here a few.
            // SAFETY: `src` holds the buffer's `len` bytes (dense, row-major) while `self`
            // lives (a donation would have taken the buffer); `dst` holds `len` bytes. A
            // buffer uploaded without a copy may be `dst`'s own memory: `copy` allows overlap.
            unsafe { std::ptr::copy(src as *const u8, dst.as_mut_ptr(), len) };
            return Ok(());
        }
        let api = self.client.plugin.api();
        let mut a: ffi::PJRT_Buffer_ToHostBuffer_Args = ffi::args();
        a.src = self.raw;
        a.dst = dst.as_mut_ptr() as *mut _;
        a.dst_size = len;
        pjrt!(api, PJRT_Buffer_ToHostBuffer, &mut a)?;
        await_event(api, a.event)
    }

    /// Waits until the buffer's value is computed; reports an execution error if there was one.
    pub fn block_until_ready(&self) -> Result<()> {
        self.client.check_process()?;
        let api = self.client.plugin.api();
        let mut a: ffi::PJRT_Buffer_ReadyEvent_Args = ffi::args();
        a.buffer = self.raw;
        pjrt!(api, PJRT_Buffer_ReadyEvent, &mut a)?;
        await_event(api, a.event)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.client.plugin.forked() {
            // The parent's buffer: PJRT cannot run in a forked child, and an aliased host
            // array must outlive a buffer that was never destroyed.
            if let Some((bytes, _)) = self.aliased.take() {
                std::mem::forget(bytes);
            }
            return;
        }
        let api = self.client.plugin.api();
        let mut a: ffi::PJRT_Buffer_Destroy_Args = ffi::args();
        a.buffer = self.raw;
        if let Err(e) = pjrt!(api, PJRT_Buffer_Destroy, &mut a) {
            tracing::warn!("destroying buffer: {e}");
        }
        if let Some((_bytes, done)) = self.aliased.take() {
            // Now that the buffer is gone PJRT releases the host memory; only then may it be freed.
            if let Err(e) = await_event(api, done) {
                tracing::warn!("zero-copy release: {e}");
            }
        }
    }
}

/// Host memory aligned to 64 bytes, the alignment the CPU plugin needs to alias instead of copy.
pub struct AlignedBytes {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain owned memory.
unsafe impl Send for AlignedBytes {}
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    pub const ALIGN: usize = 64;

    /// `len` zeroed bytes; aborts if the allocator refuses (see [`AlignedBytes::try_zeroed`]).
    pub fn zeroed(len: usize) -> AlignedBytes {
        Self::try_zeroed(len).unwrap_or_else(|_| std::alloc::handle_alloc_error(Self::layout(len)))
    }

    /// `len` zeroed bytes, or `OutOfMemory` naming the size when the allocator refuses.
    pub fn try_zeroed(len: usize) -> Result<AlignedBytes> {
        let oom = || tessera_lowering::HostTensorError::OutOfMemory {
            dtype: DType::U8,
            shape: vec![len],
            bytes: len,
        };
        let layout =
            Layout::from_size_align(len.max(Self::ALIGN), Self::ALIGN).map_err(|_| oom())?;
        // SAFETY: the layout has non-zero size (at least ALIGN).
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(oom().into());
        }
        Ok(AlignedBytes { ptr, len })
    }

    pub fn from_slice(data: &[u8]) -> AlignedBytes {
        let mut b = AlignedBytes::zeroed(data.len());
        b.as_mut_slice().copy_from_slice(data);
        b
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len.max(Self::ALIGN), Self::ALIGN).expect("valid layout")
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        // SAFETY: allocated with the same layout.
        unsafe { dealloc(self.ptr, Self::layout(self.len)) }
    }
}
