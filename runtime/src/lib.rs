//! Tessera's runtime: PJRT plugins through their C API (bindings generated at build time),
//! clients shared by threads, device buffers, compiled executables and their cache, devices.

pub mod autotune;
mod buffer;
mod buffer_type;
mod cache;
mod checked_slices;
mod client;
mod compile_options;
mod device;
mod elf;
mod error;
mod executable;
mod ffi;
mod host_view;
mod launch;
mod mlir_check;
mod pjrt_call;
mod plugin;
pub mod plugin_store;
mod signature;
mod source_loc;
mod tpu_aot;

pub use buffer::{AlignedBytes, Buffer};
pub use cache::{
    CacheStats, CAPACITY_ENV as EXECUTABLE_CACHE_SIZE_ENV,
    DEFAULT_CAPACITY as DEFAULT_EXECUTABLE_CACHE_SIZE,
};
pub use checked_slices::{checked_slices, CHECKED_SLICES_ENV};
pub use client::{Client, ClientOption, DeviceInfo};
pub use compile_options::{CompileOptions, OptionOverride};
pub use device::{tpu_attached, Device, DeviceKind};
pub use error::{Result, RuntimeError};
pub use executable::Executable;
pub use host_view::HostView;
pub use launch::{compile_program, program_module, run_program, run_program_checked, LaunchExt};
pub use mlir_check::MAX_NESTING as MAX_MLIR_NESTING;
pub use plugin::{Plugin, HEADER_API_VERSION};
pub use signature::{Signature, TensorType};
pub use tessera_lowering::{DType, HostTensor};
pub use tpu_aot::{validate_topology, AotCompiled, TpuTarget};
