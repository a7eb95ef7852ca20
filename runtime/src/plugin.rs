//! Loading a PJRT plugin: ELF checks, dlopen, `GetPjrtApi`, API version check,
//! `PJRT_Plugin_Initialize`.
//!
//! A plugin is loaded and initialized once per process and never unloaded: XLA plugins keep
//! threads and static state alive, and unloading them at exit is a known source of crashes.
//! The file is checked before `dlopen` maps it (a truncated file dies of SIGBUS inside the
//! loader), and libtpu is recognized by its exports, so that it gets the environment it needs
//! on a machine without a TPU and is never taken for another kind of plugin.

use crate::device::{tpu_attached, DeviceKind};
use crate::elf;
use crate::error::{Result, RuntimeError};
use crate::ffi;
use crate::pjrt_call::check;
use std::collections::HashMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A loaded, initialized PJRT plugin.
pub struct Plugin {
    path: PathBuf,
    api: &'static ffi::PJRT_Api,
    /// Whether the file is libtpu (it exports TPU runtime entry points).
    libtpu: bool,
    /// The process that loaded it, and its fork generation: PJRT's threads and locks do
    /// not survive `fork`.
    pid: u32,
    generation: u64,
    _lib: libloading::Library,
}

// SAFETY: the PJRT_Api table is immutable after GetPjrtApi and its functions are thread-safe.
unsafe impl Send for Plugin {}
unsafe impl Sync for Plugin {}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.api_version();
        write!(f, "Plugin({}, api {major}.{minor})", self.path.display())
    }
}

/// The C API version these bindings were generated from.
pub const HEADER_API_VERSION: (u32, u32) = (ffi::PJRT_API_MAJOR, ffi::PJRT_API_MINOR);

fn loaded() -> &'static Mutex<HashMap<PathBuf, Arc<Plugin>>> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Plugin>>>> = OnceLock::new();
    LOADED.get_or_init(Default::default)
}

/// Bumped in the child of every `fork` by a `pthread_atfork` handler (registered before the
/// first plugin loads): a plugin loaded at another generation belongs to an ancestor process.
/// An atomic load per PJRT call instead of `getpid` (a syscall, ~270 ns on this VM, several
/// per eager op).
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    // Async-signal-safe: a lock-free atomic add.
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only touches an atomic.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
        if rc != 0 {
            tracing::warn!("pthread_atfork failed ({rc}): forked children are not detected");
        }
    });
}

/// What libtpu needs on a machine without a TPU. Set only where the user has not.
const LIBTPU_ENV: [(&str, &str); 6] = [
    // Without it libtpu retries a cloud metadata server for ~10 minutes.
    ("TPU_SKIP_MDS_QUERY", "1"),
    // Parallel test processes each load libtpu.
    ("ALLOW_MULTIPLE_LIBTPU_LOAD", "1"),
    ("TPU_ACCELERATOR_TYPE", "v5litepod-4"),
    ("TPU_WORKER_HOSTNAMES", "localhost"),
    ("TPU_WORKER_ID", "0"),
    ("TF_CPP_MIN_LOG_LEVEL", "3"),
];

/// Sets [`LIBTPU_ENV`] (once, before libtpu is loaded) unless a TPU is attached: there the
/// metadata server is how libtpu learns its slice.
pub(crate) fn set_libtpu_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if tpu_attached() {
            return;
        }
        for (k, v) in LIBTPU_ENV {
            if std::env::var_os(k).is_none() {
                std::env::set_var(k, v);
            }
        }
    });
}

impl Plugin {
    /// Loads the plugin at `path` (once per process; later calls return the same plugin).
    pub fn load(path: &Path) -> Result<Arc<Plugin>> {
        Self::load_checked(path, None)
    }

    /// As [`Plugin::load`], refusing (before loading it) a plugin that is not of `kind`:
    /// libtpu given as a CPU or CUDA plugin would search for a TPU for minutes.
    pub fn load_as(kind: DeviceKind, path: &Path) -> Result<Arc<Plugin>> {
        Self::load_checked(path, Some(kind))
    }

    fn load_checked(path: &Path, kind: Option<DeviceKind>) -> Result<Arc<Plugin>> {
        let key = path.canonicalize().map_err(|e| RuntimeError::NotAPlugin {
            path: path.to_path_buf(),
            reason: format!("cannot open it: {e}"),
        })?;
        let mut map = loaded().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = map.get(&key) {
            check_kind(&key, kind, p.libtpu)?;
            p.check_process()?;
            return Ok(p.clone());
        }
        let so = elf::check_shared_object(&key).map_err(|reason| RuntimeError::NotAPlugin {
            path: key.clone(),
            reason,
        })?;
        check_kind(&key, kind, so.is_libtpu())?;
        if so.is_libtpu() {
            set_libtpu_env();
        }
        watch_forks();
        let plugin = Arc::new(Self::open(&key, so.is_libtpu())?);
        map.insert(key, plugin.clone());
        Ok(plugin)
    }

    /// `Err(Forked)` in a child process forked after this plugin was loaded.
    pub(crate) fn check_process(&self) -> Result<()> {
        if self.forked() {
            return Err(RuntimeError::Forked {
                parent: self.pid,
                child: std::process::id(),
            });
        }
        Ok(())
    }

    /// Whether this process is a fork of the one that loaded the plugin (PJRT objects must
    /// then be leaked, not destroyed: destroying waits on threads the child does not have).
    pub(crate) fn forked(&self) -> bool {
        FORK_GENERATION.load(Ordering::Relaxed) != self.generation
    }

    /// Whether the plugin is libtpu.
    pub fn is_libtpu(&self) -> bool {
        self.libtpu
    }

    fn open(path: &Path, libtpu: bool) -> Result<Plugin> {
        let not_a_plugin = |reason: String| RuntimeError::NotAPlugin {
            path: path.to_path_buf(),
            reason,
        };
        // SAFETY: loading a shared library runs its initializers; that is the point of a plugin.
        let lib =
            unsafe { libloading::Library::new(path) }.map_err(|e| not_a_plugin(e.to_string()))?;
        let api_ptr = {
            // SAFETY: GetPjrtApi has this signature in every PJRT plugin.
            let get: libloading::Symbol<unsafe extern "C" fn() -> *const ffi::PJRT_Api> =
                unsafe { lib.get(b"GetPjrtApi\0") }
                    .map_err(|e| not_a_plugin(format!("no GetPjrtApi symbol ({e})")))?;
            unsafe { get() }
        };
        if api_ptr.is_null() {
            return Err(not_a_plugin("GetPjrtApi returned null".into()));
        }
        // SAFETY: non-null pointer to a static table owned by the library, which we never unload.
        let api: &'static ffi::PJRT_Api = unsafe { &*api_ptr };
        let v = &api.pjrt_api_version;
        let (need_major, need_minor) = HEADER_API_VERSION;
        if v.major_version as u32 != need_major
            || (v.minor_version as u32) < need_minor
            || api.struct_size < std::mem::size_of::<ffi::PJRT_Api>()
        {
            return Err(RuntimeError::PluginTooOld {
                path: path.to_path_buf(),
                found_major: v.major_version,
                found_minor: v.minor_version,
                need_major,
                need_minor,
            });
        }
        let plugin = Plugin {
            path: path.to_path_buf(),
            api,
            libtpu,
            pid: std::process::id(),
            generation: FORK_GENERATION.load(Ordering::Relaxed),
            _lib: lib,
        };
        let mut args: ffi::PJRT_Plugin_Initialize_Args = ffi::args();
        let init = plugin
            .api
            .PJRT_Plugin_Initialize
            .ok_or_else(|| not_a_plugin("no PJRT_Plugin_Initialize".into()))?;
        // SAFETY: valid args struct; the API is loaded.
        check(plugin.api, "PJRT_Plugin_Initialize", unsafe {
            init(&mut args)
        })?;
        Ok(plugin)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn api(&self) -> &'static ffi::PJRT_Api {
        self.api
    }

    /// (major, minor) of the C API the plugin implements.
    pub fn api_version(&self) -> (i32, i32) {
        (
            self.api.pjrt_api_version.major_version,
            self.api.pjrt_api_version.minor_version,
        )
    }

    /// The plugin's attributes (`xla_version`, `stablehlo_current_version`, ...) as text.
    pub fn attributes(&self) -> Vec<(String, String)> {
        let Some(f) = self.api.PJRT_Plugin_Attributes else {
            return Vec::new();
        };
        let mut args: ffi::PJRT_Plugin_Attributes_Args = ffi::args();
        // SAFETY: valid args; attributes live as long as the process.
        if check(self.api, "PJRT_Plugin_Attributes", unsafe { f(&mut args) }).is_err()
            || args.attributes.is_null()
        {
            return Vec::new();
        }
        let attrs = unsafe { std::slice::from_raw_parts(args.attributes, args.num_attributes) };
        attrs.iter().map(named_value_to_string).collect()
    }
}

/// libtpu is only ever a TPU plugin.
fn check_kind(path: &Path, kind: Option<DeviceKind>, libtpu: bool) -> Result<()> {
    match kind {
        Some(kind) if libtpu && kind != DeviceKind::Tpu => Err(RuntimeError::WrongPluginKind {
            path: path.to_path_buf(),
            wanted: kind.name().into(),
            found: "libtpu, the TPU plugin".into(),
        }),
        _ => Ok(()),
    }
}

fn named_value_to_string(nv: &ffi::PJRT_NamedValue) -> (String, String) {
    // SAFETY: name points to name_size bytes; the union member is selected by `type_`.
    unsafe {
        let name = String::from_utf8_lossy(std::slice::from_raw_parts(
            nv.name as *const u8,
            nv.name_size,
        ))
        .into_owned();
        let value = match nv.type_ {
            ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kString => {
                let s = nv.__bindgen_anon_1.string_value;
                String::from_utf8_lossy(std::slice::from_raw_parts(s as *const u8, nv.value_size))
                    .into_owned()
            }
            ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kInt64 => {
                nv.__bindgen_anon_1.int64_value.to_string()
            }
            ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kInt64List => {
                let p = nv.__bindgen_anon_1.int64_array_value;
                format!("{:?}", std::slice::from_raw_parts(p, nv.value_size))
            }
            ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kFloat => {
                nv.__bindgen_anon_1.float_value.to_string()
            }
            ffi::PJRT_NamedValue_Type::PJRT_NamedValue_kBool => {
                nv.__bindgen_anon_1.bool_value.to_string()
            }
        };
        (name, value)
    }
}

/// Reads a C string the plugin owns (platform names and the like).
pub(crate) fn c_str_lossy(ptr: *const std::os::raw::c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the plugin promises `len` readable bytes at `ptr`.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    String::from_utf8_lossy(bytes).into_owned()
}

#[allow(dead_code)]
pub(crate) fn c_str(ptr: *const std::os::raw::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: NUL-terminated string owned by the plugin.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}
