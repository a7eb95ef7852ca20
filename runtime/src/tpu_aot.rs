//! Compiling for a TPU without a TPU: libtpu's PJRT API creates a topology description
//! (`v5e:2x2`, `v6e:2x2`, `tpu7x:2x2x1`, ...) and `PJRT_Compile` compiles against it, no
//! client and no device. The result proves the program compiles for that generation (Mosaic
//! included); numerics are proven elsewhere (CPU plugin, interpreter).

use crate::compile_options::CompileOptions;
use crate::device::DeviceKind;
use crate::error::Result;
use crate::ffi;
use crate::pjrt_call::pjrt;
use crate::plugin::Plugin;
use crate::plugin_store;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};
use tessera_lowering::mosaic::{lower_to_mosaic, tpu_custom_call, TpuGeneration};
use tessera_lowering::trace::KernelProgram;

/// Environment libtpu needs on a machine without a TPU. Set only where the user has not.
const AOT_ENV: [(&str, &str); 6] = [
    // Without it libtpu retries a cloud metadata server for minutes.
    ("TPU_SKIP_MDS_QUERY", "1"),
    // Parallel test processes each load libtpu.
    ("ALLOW_MULTIPLE_LIBTPU_LOAD", "1"),
    ("TPU_ACCELERATOR_TYPE", "v5litepod-4"),
    ("TPU_WORKER_HOSTNAMES", "localhost"),
    ("TPU_WORKER_ID", "0"),
    ("TF_CPP_MIN_LOG_LEVEL", "3"),
];

fn set_aot_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (k, v) in AOT_ENV {
            if std::env::var_os(k).is_none() {
                std::env::set_var(k, v);
            }
        }
    });
}

/// A TPU generation and slice to compile for, with no TPU attached.
pub struct TpuTarget {
    plugin: Arc<Plugin>,
    topology: *mut ffi::PJRT_TopologyDescription,
    name: String,
}

// SAFETY: a topology description is immutable after creation; PJRT_Compile is thread-safe.
unsafe impl Send for TpuTarget {}
unsafe impl Sync for TpuTarget {}

/// What an AOT compile produced.
#[derive(Clone, Debug, PartialEq)]
pub struct AotCompiled {
    pub topology: String,
    pub compile_time: Duration,
    /// Size of the generated TPU code, as libtpu reports it.
    pub code_bytes: i64,
    /// Device memory stats where libtpu reports them (arguments, outputs, temporaries).
    pub argument_bytes: Option<i64>,
    pub output_bytes: Option<i64>,
    pub temp_bytes: Option<i64>,
}

impl TpuTarget {
    /// A compile-only target for `topology` (e.g. `v6e:2x2`), on the installed libtpu
    /// (`tessera plugin install tpu`, or `TESSERA_PJRT_PLUGIN_TPU`).
    pub fn aot(topology: &str) -> Result<TpuTarget> {
        set_aot_env();
        let plugin = Plugin::load(&plugin_store::locate(DeviceKind::Tpu)?)?;
        Self::with_plugin(plugin, topology)
    }

    pub fn with_plugin(plugin: Arc<Plugin>, topology: &str) -> Result<TpuTarget> {
        set_aot_env();
        let mut a: ffi::PJRT_TopologyDescription_Create_Args = ffi::args();
        a.topology_name = topology.as_ptr() as *const _;
        a.topology_name_size = topology.len();
        pjrt!(plugin.api(), PJRT_TopologyDescription_Create, &mut a)?;
        Ok(TpuTarget {
            plugin,
            topology: a.topology,
            name: topology.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Lowers a traced kernel to Mosaic for this target's generation (TPU rules checked first,
    /// with the user's source location), wraps it in a `tpu_custom_call` and compiles it.
    pub fn compile_program(&self, program: &KernelProgram) -> Result<AotCompiled> {
        let generation = TpuGeneration::from_topology(&self.name)?;
        let kernel = lower_to_mosaic(program, generation)?;
        let module = tpu_custom_call(program, &kernel)?.into_text();
        self.compile(&module, &CompileOptions::default())
    }

    /// Compiles StableHLO text (which may call Mosaic kernels through `tpu_custom_call`).
    /// libtpu's diagnostics come back verbatim in `RuntimeError::Pjrt`.
    pub fn compile(&self, module: &str, options: &CompileOptions) -> Result<AotCompiled> {
        let api = self.plugin.api();
        let start = Instant::now();
        let program = ffi::mlir_program(module);
        let opts = options.to_proto_bytes();
        let mut a: ffi::PJRT_Compile_Args = ffi::args();
        a.topology = self.topology;
        a.program = &program;
        a.compile_options = opts.as_ptr() as *const _;
        a.compile_options_size = opts.len();
        pjrt!(api, PJRT_Compile, &mut a)?;
        let compile_time = start.elapsed();
        let exe = a.executable;
        let stats = executable_stats(api, exe);
        let mut d: ffi::PJRT_Executable_Destroy_Args = ffi::args();
        d.executable = exe;
        pjrt!(api, PJRT_Executable_Destroy, &mut d)?;
        let (code_bytes, mem) = stats?;
        Ok(AotCompiled {
            topology: self.name.clone(),
            compile_time,
            code_bytes,
            argument_bytes: mem.map(|m| m.0),
            output_bytes: mem.map(|m| m.1),
            temp_bytes: mem.map(|m| m.2),
        })
    }
}

type MemStats = Option<(i64, i64, i64)>;

fn executable_stats(
    api: &ffi::PJRT_Api,
    exe: *mut ffi::PJRT_Executable,
) -> Result<(i64, MemStats)> {
    let mut size: ffi::PJRT_Executable_SizeOfGeneratedCodeInBytes_Args = ffi::args();
    size.executable = exe;
    pjrt!(api, PJRT_Executable_SizeOfGeneratedCodeInBytes, &mut size)?;
    let mut mem: ffi::PJRT_Executable_GetCompiledMemoryStats_Args = ffi::args();
    mem.executable = exe;
    // Not every plugin implements memory stats: absent is not an error.
    let mem = pjrt!(api, PJRT_Executable_GetCompiledMemoryStats, &mut mem)
        .ok()
        .map(|_| {
            (
                mem.argument_size_in_bytes,
                mem.output_size_in_bytes,
                mem.temp_size_in_bytes,
            )
        });
    Ok((size.size_in_bytes, mem))
}

impl Drop for TpuTarget {
    fn drop(&mut self) {
        let mut d: ffi::PJRT_TopologyDescription_Destroy_Args = ffi::args();
        d.topology = self.topology;
        if let Err(e) = pjrt!(self.plugin.api(), PJRT_TopologyDescription_Destroy, &mut d) {
            tracing::warn!("destroying topology: {e}");
        }
    }
}

impl std::fmt::Debug for TpuTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TpuTarget({})", self.name)
    }
}
