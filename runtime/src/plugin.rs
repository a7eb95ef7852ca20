//! Loading a PJRT plugin: dlopen, `GetPjrtApi`, API version check, `PJRT_Plugin_Initialize`.
//!
//! A plugin is loaded and initialized once per process and never unloaded: XLA plugins keep
//! threads and static state alive, and unloading them at exit is a known source of crashes.

use crate::error::{Result, RuntimeError};
use crate::ffi;
use crate::pjrt_call::check;
use std::collections::HashMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A loaded, initialized PJRT plugin.
pub struct Plugin {
    path: PathBuf,
    api: &'static ffi::PJRT_Api,
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

impl Plugin {
    /// Loads the plugin at `path` (once per process; later calls return the same plugin).
    pub fn load(path: &Path) -> Result<Arc<Plugin>> {
        let key = path.canonicalize().map_err(|e| RuntimeError::NotAPlugin {
            path: path.to_path_buf(),
            reason: format!("cannot open it: {e}"),
        })?;
        let mut map = loaded().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = map.get(&key) {
            return Ok(p.clone());
        }
        let plugin = Arc::new(Self::open(&key)?);
        map.insert(key, plugin.clone());
        Ok(plugin)
    }

    fn open(path: &Path) -> Result<Plugin> {
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
