//! A device buffer read in place by another framework, where the device's memory is the host's
//! (the CPU plugin): a torch tensor made over a kernel's output instead of a copy of it. The
//! view owns the buffer, so nothing else can donate or free it while the memory is shared
//! (PJRT's external reference count, which DLPack exports of arrays that others still hold
//! take, would add two calls per output and guard against nothing here).

use crate::buffer::Buffer;
use crate::error::Result;
use crate::ffi;
use crate::pjrt_call::pjrt;

/// A computed buffer whose row-major elements lie at [`HostView::as_ptr`] in host memory,
/// valid until the view (which owns the buffer) is dropped.
pub struct HostView {
    buffer: Buffer,
    ptr: *mut u8,
}

// SAFETY: the buffer is Send + Sync; the address is only handed out.
unsafe impl Send for HostView {}
unsafe impl Sync for HostView {}

impl HostView {
    /// The first element. Nothing else reads or writes it: the buffer is owned here.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

impl Buffer {
    /// Waits for the buffer's value, then shares its memory in place where that memory is the
    /// host's, dense and row-major, and not empty; otherwise gives the buffer back (copy it
    /// with [`Buffer::to_host_into`]). An execution error is an error.
    pub fn into_host_view(self) -> Result<std::result::Result<HostView, Buffer>> {
        match self.host_memory()? {
            Some(ptr) => Ok(Ok(HostView { buffer: self, ptr })),
            None => Ok(Err(self)),
        }
    }

    /// Waits for the buffer's value, then gives the address of its row-major elements where
    /// its memory is the host's, dense and row-major, and not empty (else None). The address
    /// stays valid while the buffer lives. An execution error is an error.
    pub(crate) fn host_memory(&self) -> Result<Option<*mut u8>> {
        // (A forked child gets an error here: it cannot use the parent's PJRT.)
        self.block_until_ready()?;
        if self.platform_name() != "cpu" || self.shape().iter().product::<usize>() == 0 {
            return Ok(None);
        }
        let api = self.client_inner().plugin.api();
        if api.PJRT_Buffer_OpaqueDeviceMemoryDataPointer.is_none()
            || api.PJRT_Buffer_GetMemoryLayout.is_none()
            || !self.row_major()?
        {
            return Ok(None);
        }
        let mut p: ffi::PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args = ffi::args();
        p.buffer = self.raw();
        pjrt!(api, PJRT_Buffer_OpaqueDeviceMemoryDataPointer, &mut p)?;
        let ptr = p.device_memory_ptr as *mut u8;
        Ok((!ptr.is_null()).then_some(ptr))
    }

    /// Whether PJRT lays the elements out dense and row-major (untiled, the last dim fastest).
    fn row_major(&self) -> Result<bool> {
        let api = self.client_inner().plugin.api();
        let mut a: ffi::PJRT_Buffer_GetMemoryLayout_Args = ffi::args();
        a.buffer = self.raw();
        pjrt!(api, PJRT_Buffer_GetMemoryLayout, &mut a)?;
        let layout = &a.layout;
        if layout.type_ != ffi::PJRT_Buffer_MemoryLayout_Type::PJRT_Buffer_MemoryLayout_Type_Tiled {
            return Ok(false);
        }
        // SAFETY: the tiled variant is the one set; its arrays live as long as the buffer.
        let tiled = unsafe { &layout.__bindgen_anon_1.tiled };
        if tiled.num_tiles != 0 || tiled.minor_to_major_size != self.shape().len() {
            return Ok(false);
        }
        let minor_to_major = if tiled.minor_to_major_size == 0 {
            &[][..]
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(tiled.minor_to_major, tiled.minor_to_major_size) }
        };
        let rank = self.shape().len() as i64;
        Ok(minor_to_major
            .iter()
            .enumerate()
            .all(|(i, &d)| d == rank - 1 - i as i64))
    }
}
