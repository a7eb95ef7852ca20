//! Tuning spaces of the shipped kernels: which block sizes each may use on a problem, the
//! TPU rules a config must pass before it is measured, and the launch for a config.
//!
//! `for_kernel("matmul", &[m, n, k], DType::F32)` gives a [`TunableKernel`] for
//! `tessera_runtime::autotune::tune`. Candidates are powers of two from 8 to 512 that divide
//! the dim (plus the whole dim, always a legal block); the default is the shipped launch's own
//! choice. Constraints, cheap first: the tiling rule (last dim a multiple of 128, the one
//! before a multiple of the dtype's sublane tile, or the whole dim), then every Mosaic check
//! of the traced launch, VMEM budget of the target generation included, so a tuned config
//! is still a legal TPU kernel even when tuned on the CPU plugin.

mod elementwise;
mod matmul;
mod rows;

use crate::ShippedKernel;
use tessera_lowering::mosaic::checks::sublane_tile;
use tessera_lowering::mosaic::{check_program, TpuGeneration};
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::autotune::{
    tune, AutotuneMode, Config, Source, Space, Tunable, TunableKernel, TuneOptions,
};
use tessera_runtime::Device;

/// Why a kernel cannot be tuned on a problem.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    #[error("kernel `{0}` has no tuning space (tunable: {1})")]
    NoSpace(String, String),
    #[error("kernel `{kernel}` on {shape:?}: {reason}")]
    Problem {
        kernel: String,
        shape: Vec<usize>,
        reason: String,
    },
}

/// The tiling rule a block dim follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The last dim: a multiple of 128 lanes.
    Lane,
    /// The second to last: a multiple of the dtype's sublane tile (8 for 32-bit).
    Sublane,
}

/// One tunable block size: its name, the array dim it cuts, and its tiling rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    pub name: &'static str,
    pub dim: usize,
    pub rule: Rule,
}

/// How one shipped kernel is tuned.
pub(crate) struct TuningSpec {
    pub kernel: &'static str,
    /// The tunable blocks on a problem shape (already a valid one for the kernel).
    pub blocks: fn(&[usize]) -> Vec<Block>,
    /// The shipped default launch's config, read off its traced program.
    pub default: fn(&KernelProgram) -> Config,
    /// The launch for a config.
    pub launch: fn(&[usize], &Config) -> Result<Launch, String>,
}

const SPECS: [TuningSpec; 5] = [
    matmul::SPEC,
    rows::SOFTMAX,
    rows::LAYER_NORM,
    elementwise::ADD,
    elementwise::SILU,
];

/// The launch a kernel runs with on `shape` (`dtype` inputs) on `device`: the autotuner's
/// winner for this problem, device and form cached under `cache_dir` (where `tessera tune`
/// stores it: `tessera_runtime::plugin_store::cache_dir()`), else the shipped launch's own
/// choice. Never measures unless
/// `TESSERA_AUTOTUNE=full` says so (a call must not start a search by surprise); `off` skips
/// the cache. Kernels without a tuning space take their shipped launch. Returns the launch
/// and the config with where it came from (None for a kernel without a space).
pub fn launch_for(
    kernel: &ShippedKernel,
    shape: &[usize],
    dtype: DType,
    device: &Device,
    form: tessera_lowering::stablehlo::Form,
    cache_dir: &std::path::Path,
) -> Result<(Launch, Option<(Config, Source)>), String> {
    let Some(spec) = SPECS.iter().find(|s| s.kernel == kernel.name) else {
        return Ok(((kernel.launch)(shape)?, None));
    };
    let mode = AutotuneMode::from_env_or(AutotuneMode::Cached).map_err(|e| e.to_string())?;
    let tuning = KernelTuning::for_generation(kernel.name, shape, dtype, TpuGeneration::V5e)
        .map_err(|e| e.to_string())?;
    let options = TuneOptions {
        mode,
        form,
        ..TuneOptions::new(cache_dir)
    };
    let report = tune(&tuning, device, &options, &mut |_| {}).map_err(|e| e.to_string())?;
    let launch = (spec.launch)(shape, &report.config)?;
    Ok((launch, Some((report.config, report.source))))
}

/// Names of the kernels with a tuning space.
pub fn tunable_kernels() -> Vec<&'static str> {
    SPECS.iter().map(|s| s.kernel).collect()
}

/// A shipped kernel bound to a problem, ready for `autotune::tune`.
#[derive(Clone)]
pub struct KernelTuning {
    spec: &'static TuningSpec,
    kernel: &'static ShippedKernel,
    shape: Vec<usize>,
    dtype: DType,
    generation: TpuGeneration,
    default: Config,
}

/// The tuning problem of `kernel` on `shape` with `dtype` inputs, with the VMEM budget of a
/// v5e (16 MiB scoped VMEM; see [`KernelTuning::for_generation`]).
pub fn for_kernel(
    kernel: &str,
    shape: &[usize],
    dtype: DType,
) -> Result<KernelTuning, TuningError> {
    KernelTuning::for_generation(kernel, shape, dtype, TpuGeneration::V5e)
}

impl KernelTuning {
    /// As [`for_kernel`], checking configs against `generation`'s rules.
    pub fn for_generation(
        kernel: &str,
        shape: &[usize],
        dtype: DType,
        generation: TpuGeneration,
    ) -> Result<KernelTuning, TuningError> {
        let no_space = || TuningError::NoSpace(kernel.to_string(), tunable_kernels().join(", "));
        let spec = SPECS
            .iter()
            .find(|s| s.kernel == kernel)
            .ok_or_else(no_space)?;
        let shipped = crate::find(kernel).ok_or_else(no_space)?;
        let problem = |reason: String| TuningError::Problem {
            kernel: kernel.to_string(),
            shape: shape.to_vec(),
            reason,
        };
        let launch = (shipped.launch)(shape).map_err(problem)?;
        let program = launch
            .trace_program(&signature(shipped, shape, dtype))
            .map_err(|e| problem(e.to_string()))?;
        let default = (spec.default)(&program);
        Ok(KernelTuning {
            spec,
            kernel: shipped,
            shape: shape.to_vec(),
            dtype,
            generation,
            default,
        })
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The launch for `config`, traced, without the TPU checks.
    fn trace(&self, config: &Config) -> Result<KernelProgram, String> {
        let launch = (self.spec.launch)(&self.shape, config)?;
        launch
            .trace_program(&signature(self.kernel, &self.shape, self.dtype))
            .map_err(|e| e.to_string())
    }
}

fn signature(kernel: &ShippedKernel, shape: &[usize], dtype: DType) -> Vec<(DType, Vec<usize>)> {
    (kernel.input_shapes)(shape)
        .into_iter()
        .map(|s| (dtype, s))
        .collect()
}

/// Powers of two in 8..=512 dividing `dim`, then `dim` itself if small enough (a whole-dim
/// block is always legal), then `default` if still missing; ascending, so pattern search
/// steps to the next smaller or larger block.
fn candidates(dim: usize, default: i64) -> Vec<i64> {
    let mut c: Vec<i64> = (3..=9)
        .map(|p| 1usize << p)
        .filter(|b| dim.is_multiple_of(*b))
        .map(|b| b as i64)
        .collect();
    for extra in [(dim <= 512).then_some(dim as i64), Some(default)]
        .into_iter()
        .flatten()
    {
        if !c.contains(&extra) {
            c.push(extra);
        }
    }
    c.sort_unstable();
    c
}

impl TunableKernel for KernelTuning {
    fn name(&self) -> String {
        self.spec.kernel.to_string()
    }

    fn space(&self) -> Space {
        let blocks = (self.spec.blocks)(&self.shape);
        let tunables = blocks
            .iter()
            .map(|b| {
                Tunable::new(
                    b.name,
                    candidates(b.dim, self.default.get(b.name).unwrap_or(b.dim as i64)),
                )
            })
            .collect();
        let sublanes = sublane_tile(self.dtype);
        let tiling = move |c: &Config| {
            blocks.iter().try_for_each(|b| {
                let v = c.usize(b.name)?;
                let multiple = if b.rule == Rule::Lane { 128 } else { sublanes };
                if v.is_multiple_of(multiple) || v == b.dim {
                    Ok(())
                } else {
                    Err(format!(
                        "{} = {v}: not a multiple of {multiple} nor the whole dim {}",
                        b.name, b.dim
                    ))
                }
            })
        };
        let me = self.clone();
        let tpu_rules = move |c: &Config| {
            let program = me.trace(c)?;
            check_program(&program, me.generation)
                .map(drop)
                .map_err(|e| e.to_string())
        };
        Space::new(tunables)
            .constraint(tiling)
            .constraint(tpu_rules)
    }

    fn default_config(&self) -> Config {
        self.default.clone()
    }

    fn program(&self, config: &Config) -> Result<KernelProgram, String> {
        self.trace(config)
    }

    fn inputs(&self, index: usize) -> Vec<HostTensor> {
        crate::random_inputs(self.kernel, self.dtype, &self.shape, 1 + index as u64)
    }

    /// Both outputs are within `tolerance_for` of the exact result, so within twice that
    /// of each other (floor 1e-4: f32 sums in another order differ by a few ulps).
    fn tolerance(&self) -> f64 {
        (2.0 * crate::tolerance_for(self.kernel, self.dtype, &self.shape)).max(1e-4)
    }
}
