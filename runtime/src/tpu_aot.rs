//! Compiling for a TPU without a TPU: libtpu's PJRT API creates a topology description
//! (`v5e:2x2`, `v6e:2x2`, `tpu7x:2x2x1`, ...) and `PJRT_Compile` compiles against it, no
//! client and no device. The result proves the program compiles for that generation (Mosaic
//! included); numerics are proven elsewhere (CPU plugin, interpreter).

use crate::compile_options::CompileOptions;
use crate::device::DeviceKind;
use crate::error::{Result, RuntimeError};
use crate::ffi;
use crate::pjrt_call::pjrt;
use crate::plugin::{set_libtpu_env, Plugin};
use crate::plugin_store;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_lowering::backend::{self, Backend, Target};
use tessera_lowering::mosaic::TpuGeneration;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;

/// TPU generations libtpu knows by these names, whether their chips form a 2-D torus
/// (v5e, v6e: a third dim must be 1) and the largest dim. Measured with libtpu 0.0.52:
/// `v5e:0x0` dies of SIGFPE, `v5e:32x32` and `v5e:2x2x16` of a failed CHECK (chip bounds
/// x <= 16, z == 1), while `v4:64x64x64`, `v5p:64x2x2` and `tpu7x:32x32x32` are handled.
const GENERATIONS: [(&str, bool, u64); 5] = [
    ("v4", false, 64),
    ("v5e", true, 16),
    ("v5p", false, 64),
    ("v6e", true, 16),
    ("tpu7x", false, 64),
];

/// Most chips in a topology: more than any TPU pod (v5p: 8,960, tpu7x: 9,216 chips).
const MAX_CHIPS: u64 = 65_536;

/// Checks a topology name (`v5e:2x2`, `tpu7x:2x2x1`, `v5p:2x2x1_untwisted`) before libtpu
/// sees it: libtpu aborts the process on some malformed ones instead of returning an error.
pub fn validate_topology(topology: &str) -> Result<()> {
    let bad = |reason: String| RuntimeError::BadTopology {
        topology: topology.to_string(),
        reason,
    };
    let names = || {
        GENERATIONS
            .iter()
            .map(|g| g.0)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (generation, layout) = topology.split_once(':').ok_or_else(|| {
        bad(format!(
            "expected GENERATION:DIMS, e.g. v5e:2x2 or tpu7x:2x2x1 (generations: {})",
            names()
        ))
    })?;
    let &(_, two_d, max_dim) = GENERATIONS
        .iter()
        .find(|g| g.0 == generation)
        .ok_or_else(|| {
            bad(format!(
                "unknown TPU generation `{generation}` (libtpu knows {})",
                names()
            ))
        })?;
    let dims = layout
        .strip_suffix("_twisted")
        .or_else(|| layout.strip_suffix("_untwisted"))
        .unwrap_or(layout);
    let dims: Vec<u64> = dims
        .split('x')
        .map(|d| {
            d.parse::<u64>()
                .map_err(|_| bad(format!("`{d}` is not a chip count")))
        })
        .collect::<Result<_>>()?;
    if !(2..=3).contains(&dims.len()) {
        return Err(bad(format!(
            "{} dims; a topology has 2 or 3 (e.g. 2x2 or 2x2x1)",
            dims.len()
        )));
    }
    if let Some(d) = dims.iter().find(|&&d| d == 0) {
        return Err(bad(format!(
            "a dim of {d} chips; every dim must be at least 1"
        )));
    }
    if let Some(d) = dims.iter().find(|&&d| d > max_dim) {
        return Err(bad(format!(
            "a dim of {d} chips; {generation} slices have at most {max_dim} along each dim"
        )));
    }
    if two_d && dims.get(2).is_some_and(|&z| z != 1) {
        return Err(bad(format!(
            "{generation} chips form a 2-D torus: the third dim must be 1"
        )));
    }
    let chips: u64 = dims.iter().product();
    if chips > MAX_CHIPS {
        return Err(bad(format!(
            "{chips} chips, more than any TPU pod ({MAX_CHIPS} at most)"
        )));
    }
    Ok(())
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
        validate_topology(topology)?;
        set_libtpu_env();
        let plugin = Plugin::load_as(DeviceKind::Tpu, &plugin_store::locate(DeviceKind::Tpu)?)?;
        Self::with_plugin(plugin, topology)
    }

    /// A compile-only target on an already loaded libtpu; the topology is checked first.
    pub fn with_plugin(plugin: Arc<Plugin>, topology: &str) -> Result<TpuTarget> {
        validate_topology(topology)?;
        plugin.check_process()?;
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

    /// What kernels are lowered for on this topology: Mosaic for its generation.
    pub fn target(&self) -> Result<Target> {
        Ok(Target::Tpu(TpuGeneration::from_topology(&self.name)?))
    }

    /// Lowers a traced kernel for this target (Mosaic for its generation, TPU rules checked
    /// first, with the user's source location, in a `tpu_custom_call`) and compiles it.
    pub fn compile_program(&self, program: &KernelProgram) -> Result<AotCompiled> {
        let backend = Backend::for_target(self.target()?, Form::Auto, false);
        let module = backend::lower(program, backend)?.into_module()?;
        self.compile(&module, &CompileOptions::default())
    }

    /// Compiles StableHLO text (which may call Mosaic kernels through `tpu_custom_call`).
    /// libtpu's diagnostics come back verbatim in `RuntimeError::Pjrt`.
    pub fn compile(&self, module: &str, options: &CompileOptions) -> Result<AotCompiled> {
        self.plugin.check_process()?;
        crate::mlir_check::check_before_parse(module)?;
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
        if self.plugin.forked() {
            return;
        }
        let mut d: ffi::PJRT_TopologyDescription_Destroy_Args = ffi::args();
        d.topology = self.topology;
        if let Err(e) = pjrt!(self.plugin.api(), PJRT_TopologyDescription_Destroy, &mut d) {
            tracing::warn!("destroying topology: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies_libtpu_crashes_on_are_refused_first() {
        for ok in [
            "v5e:2x2",
            "v6e:16x16",
            "v4:2x2x1",
            "v5p:2x2x1_untwisted",
            "tpu7x:64x2x2",
            "v5e:2x2x1",
        ] {
            assert!(validate_topology(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("v5e:0x0", "every dim must be at least 1"),
            ("v6e:0x2", "every dim must be at least 1"),
            ("v5e:32x32", "at most 16 along each dim"),
            ("v5e:2x2x16", "the third dim must be 1"),
            ("v5e", "expected GENERATION:DIMS"),
            ("v99:1x1", "unknown TPU generation `v99`"),
            ("v5e:2", "1 dims"),
            ("v4:1x1x1x1", "4 dims"),
            ("v4:2x-1", "`-1` is not a chip count"),
            ("v4:99999999999999999999x1", "is not a chip count"),
            ("v4:64x64x64", "262144 chips"),
        ] {
            let err = validate_topology(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}

impl std::fmt::Debug for TpuTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TpuTarget({})", self.name)
    }
}
