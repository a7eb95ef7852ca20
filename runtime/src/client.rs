//! `Client`: one PJRT client, shared by threads (PJRT clients are thread-safe).

use crate::buffer::{AlignedBytes, Buffer};
use crate::buffer_type::to_pjrt;
use crate::cache::{capacity_from_env, CacheStats, ExecutableCache};
use crate::compile_options::CompileOptions;
use crate::error::Result;
use crate::executable::Executable;
use crate::ffi;
use crate::pjrt_call::{await_event, pjrt};
use crate::plugin::{c_str_lossy, Plugin};
use std::ffi::CString;
use std::sync::Arc;
use tessera_lowering::{DType, HostTensor};

/// One device the client can address.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub id: i32,
    pub kind: String,
}

pub(crate) struct ClientInner {
    pub(crate) plugin: Arc<Plugin>,
    pub(crate) raw: *mut ffi::PJRT_Client,
    pub(crate) device: *mut ffi::PJRT_Device,
    pub(crate) devices: Vec<DeviceInfo>,
    pub(crate) platform_name: String,
    pub(crate) platform_version: String,
    pub(crate) cache: ExecutableCache,
}

// SAFETY: a PJRT client and its devices may be used from any thread concurrently.
unsafe impl Send for ClientInner {}
unsafe impl Sync for ClientInner {}

impl ClientInner {
    /// `Err(Forked)` in a child forked after the plugin was loaded: every PJRT call that
    /// waits would block forever there.
    pub(crate) fn check_process(&self) -> Result<()> {
        self.plugin.check_process()
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        if self.plugin.forked() {
            return; // the parent's client: destroying it would wait on threads we lack
        }
        let mut a: ffi::PJRT_Client_Destroy_Args = ffi::args();
        a.client = self.raw;
        if let Err(e) = pjrt!(self.plugin.api(), PJRT_Client_Destroy, &mut a) {
            tracing::warn!("destroying PJRT client: {e}");
        }
    }
}

/// A PJRT client. Cheap to clone; all clones share the client, its devices and its
/// executable cache.
#[derive(Clone)]
pub struct Client {
    handle: Arc<ClientHandle>,
}

/// The users' share of a client. Cached executables point back at `ClientInner`, so the cache
/// is emptied when the last user handle goes; buffers and executables still alive keep the
/// client itself alive until they go too.
struct ClientHandle {
    inner: Arc<ClientInner>,
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        self.inner.cache.clear();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner();
        write!(
            f,
            "Client({} {}, {} device(s))",
            i.platform_name,
            i.platform_version,
            i.devices.len()
        )
    }
}

/// A client creation option (`cpu_device_count=1`, ...).
#[derive(Clone, Debug)]
pub enum ClientOption {
    Int(String, i64),
    Bool(String, bool),
    Str(String, String),
}

impl Client {
    /// Creates a client on `plugin` with platform-specific `options`.
    pub fn create(plugin: Arc<Plugin>, options: &[ClientOption]) -> Result<Client> {
        plugin.check_process()?;
        let capacity = capacity_from_env()?;
        let api = plugin.api();
        let names: Vec<CString> = options
            .iter()
            .map(|o| match o {
                ClientOption::Int(n, _) | ClientOption::Bool(n, _) | ClientOption::Str(n, _) => {
                    CString::new(n.as_str()).unwrap_or_default()
                }
            })
            .collect();
        let values: Vec<ffi::PJRT_NamedValue> = options
            .iter()
            .zip(&names)
            .map(|(o, name)| {
                let mut nv: ffi::PJRT_NamedValue = ffi::args();
                nv.name = name.as_ptr();
                nv.name_size = name.as_bytes().len();
                nv.value_size = 1;
                match o {
                    ClientOption::Int(_, v) => {
                        nv.type_ = ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kInt64;
                        nv.__bindgen_anon_1.int64_value = *v;
                    }
                    ClientOption::Bool(_, v) => {
                        nv.type_ = ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kBool;
                        nv.__bindgen_anon_1.bool_value = *v;
                    }
                    ClientOption::Str(_, v) => {
                        nv.type_ = ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kString;
                        nv.__bindgen_anon_1.string_value = v.as_ptr() as *const _;
                        nv.value_size = v.len();
                    }
                }
                nv
            })
            .collect();
        let mut a: ffi::PJRT_Client_Create_Args = ffi::args();
        a.create_options = values.as_ptr();
        a.num_options = values.len();
        pjrt!(api, PJRT_Client_Create, &mut a)?;
        let raw = a.client;

        let mut pn: ffi::PJRT_Client_PlatformName_Args = ffi::args();
        pn.client = raw;
        pjrt!(api, PJRT_Client_PlatformName, &mut pn)?;
        let platform_name = c_str_lossy(pn.platform_name, pn.platform_name_size);
        let mut pv: ffi::PJRT_Client_PlatformVersion_Args = ffi::args();
        pv.client = raw;
        pjrt!(api, PJRT_Client_PlatformVersion, &mut pv)?;
        let platform_version = c_str_lossy(pv.platform_version, pv.platform_version_size);

        let mut ad: ffi::PJRT_Client_AddressableDevices_Args = ffi::args();
        ad.client = raw;
        pjrt!(api, PJRT_Client_AddressableDevices, &mut ad)?;
        // SAFETY: the plugin returns `num_addressable_devices` device pointers owned by the client.
        let raw_devices = unsafe {
            std::slice::from_raw_parts(ad.addressable_devices, ad.num_addressable_devices)
        };
        let devices = raw_devices
            .iter()
            .map(|&d| describe_device(api, d))
            .collect::<Result<Vec<_>>>()?;
        let device = raw_devices.first().copied().unwrap_or(std::ptr::null_mut());
        let inner = ClientInner {
            plugin,
            raw,
            device,
            devices,
            platform_name,
            platform_version,
            cache: ExecutableCache::new(capacity),
        };
        Ok(Client {
            handle: Arc::new(ClientHandle {
                inner: Arc::new(inner),
            }),
        })
    }

    pub(crate) fn inner(&self) -> &Arc<ClientInner> {
        &self.handle.inner
    }

    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.inner().plugin
    }
    pub fn platform_name(&self) -> &str {
        &self.inner().platform_name
    }
    pub fn platform_version(&self) -> &str {
        &self.inner().platform_version
    }
    pub fn devices(&self) -> &[DeviceInfo] {
        &self.inner().devices
    }

    /// Compiles StableHLO text (no cache). Text the plugin would die on (nested deeper than
    /// [`crate::MAX_MLIR_NESTING`], tensor types of 2^63 bytes or more) is refused before
    /// the plugin parses it.
    pub fn compile(&self, module: &str, options: &CompileOptions) -> Result<Executable> {
        Executable::compile(self.inner(), module, options)
    }

    /// Compiles through the client's executable cache: a hit returns the same executable.
    pub fn compile_cached(
        &self,
        module: &str,
        options: &CompileOptions,
    ) -> Result<Arc<Executable>> {
        self.inner()
            .cache
            .get_or_compile(module, options, || self.compile(module, options))
    }

    /// `Err(RuntimeError::Forked)` in a child forked after the plugin was loaded (as CUDA
    /// refuses a forked child): a cheap check for bridges to make before anything else.
    pub fn check_process(&self) -> Result<()> {
        self.inner().check_process()
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.inner().cache.stats()
    }

    /// Sets how many executables the cache keeps (least recently used ones are evicted
    /// past it; 0 disables caching). A client starts with `TESSERA_EXECUTABLE_CACHE_SIZE`,
    /// else [`crate::DEFAULT_EXECUTABLE_CACHE_SIZE`].
    pub fn set_cache_capacity(&self, entries: usize) {
        self.inner().cache.set_capacity(entries);
    }

    /// Copies a host tensor to the device.
    pub fn upload(&self, t: &HostTensor) -> Result<Buffer> {
        self.upload_raw(
            t.dtype(),
            t.shape(),
            t.bytes().as_ptr(),
            HostMemory::CopiedDuringCall,
        )
    }

    /// Uploads without a copy where the platform allows it (the CPU plugin aliases 64-byte
    /// aligned host memory); the buffer keeps `bytes` alive. Elsewhere it copies.
    pub fn upload_shared(
        &self,
        dtype: DType,
        shape: &[usize],
        bytes: Arc<AlignedBytes>,
    ) -> Result<Buffer> {
        let need = tessera_lowering::host::byte_len(dtype, shape)?;
        if bytes.len() != need {
            return Err(tessera_lowering::HostTensorError::ByteLength {
                dtype,
                shape: shape.to_vec(),
                expected: need,
                got: bytes.len(),
            }
            .into());
        }
        let ptr = bytes.as_ptr();
        let zero_copy = self.inner().platform_name == "cpu"
            && (ptr as usize).is_multiple_of(AlignedBytes::ALIGN);
        let memory = if zero_copy {
            HostMemory::Aliased(Some(bytes))
        } else {
            HostMemory::CopiedDuringCall
        };
        self.upload_raw(dtype, shape, ptr, memory)
    }

    /// Uploads `data` (row-major `dtype[shape]`) without a copy where the platform allows it
    /// (the CPU plugin, 64-byte aligned memory), else with one during this call: how a
    /// caller's own memory (a torch tensor's) becomes a kernel's input.
    ///
    /// # Safety
    /// `data` points to `byte_len(dtype, shape)` readable bytes that stay alive and unchanged
    /// until the returned buffer is dropped.
    pub unsafe fn upload_aliasing(
        &self,
        dtype: DType,
        shape: &[usize],
        data: *const u8,
    ) -> Result<Buffer> {
        let empty = tessera_lowering::host::byte_len(dtype, shape)? == 0;
        // An empty tensor's data pointer may be null: nothing to alias, nothing to read.
        let data = if empty {
            std::ptr::NonNull::<u8>::dangling().as_ptr() as *const u8
        } else {
            data
        };
        let zero_copy = !empty
            && self.inner().platform_name == "cpu"
            && (data as usize).is_multiple_of(AlignedBytes::ALIGN);
        let memory = if zero_copy {
            HostMemory::Aliased(None)
        } else {
            HostMemory::CopiedDuringCall
        };
        self.upload_raw(dtype, shape, data, memory)
    }

    fn upload_raw(
        &self,
        dtype: DType,
        shape: &[usize],
        data: *const u8,
        memory: HostMemory,
    ) -> Result<Buffer> {
        self.inner().check_process()?;
        let api = self.inner().plugin.api();
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let mut a: ffi::PJRT_Client_BufferFromHostBuffer_Args = ffi::args();
        a.client = self.inner().raw;
        a.data = data as *const _;
        a.type_ = to_pjrt(dtype);
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.host_buffer_semantics = if matches!(memory, HostMemory::Aliased(_)) {
            ffi::PJRT_HostBufferSemantics::PJRT_HostBufferSemantics_kImmutableZeroCopy
        } else {
            ffi::PJRT_HostBufferSemantics::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall
        };
        a.device = self.inner().device;
        pjrt!(api, PJRT_Client_BufferFromHostBuffer, &mut a)?;
        match memory {
            // In zero-copy mode the event fires only when the buffer is destroyed: keep it.
            HostMemory::Aliased(bytes) => Ok(Buffer::from_raw_zero_copy(
                self.inner().clone(),
                a.buffer,
                dtype,
                shape.to_vec(),
                a.done_with_host_buffer,
                bytes,
            )),
            HostMemory::CopiedDuringCall => {
                await_event(api, a.done_with_host_buffer)?;
                Ok(Buffer::from_raw(
                    self.inner().clone(),
                    a.buffer,
                    dtype,
                    shape.to_vec(),
                ))
            }
        }
    }
}

/// How an upload treats the host memory it reads.
enum HostMemory {
    /// PJRT copies it before the upload returns.
    CopiedDuringCall,
    /// The buffer aliases it until dropped; these bytes are kept alive with it (None: the
    /// caller keeps the memory alive, see `upload_aliasing`).
    Aliased(Option<Arc<AlignedBytes>>),
}

fn describe_device(api: &ffi::PJRT_Api, d: *mut ffi::PJRT_Device) -> Result<DeviceInfo> {
    let mut gd: ffi::PJRT_Device_GetDescription_Args = ffi::args();
    gd.device = d;
    pjrt!(api, PJRT_Device_GetDescription, &mut gd)?;
    let mut id: ffi::PJRT_DeviceDescription_Id_Args = ffi::args();
    id.device_description = gd.device_description;
    pjrt!(api, PJRT_DeviceDescription_Id, &mut id)?;
    let mut kind: ffi::PJRT_DeviceDescription_Kind_Args = ffi::args();
    kind.device_description = gd.device_description;
    pjrt!(api, PJRT_DeviceDescription_Kind, &mut kind)?;
    Ok(DeviceInfo {
        id: id.id,
        kind: c_str_lossy(kind.device_kind, kind.device_kind_size),
    })
}
