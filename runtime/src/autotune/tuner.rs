//! `tune`: cache lookup, then search with measured, output-checked candidates, then store.

use super::cache::{self, CacheEntry, CacheKey, StoredEvaluation};
use super::confirm::confirm;
use super::measure::{Bench, Measure};
use super::report::{Evaluation, Outcome, Progress, Source, TuneReport};
use super::search::{search, Strategy};
use super::session::Session;
use super::space::{Config, Space};
use super::{AutotuneMode, TuneError};
use crate::device::Device;
use crate::launch::compile_program;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;

/// A kernel bound to one problem (shapes, dtype), as the tuner sees it.
pub trait TunableKernel {
    /// The kernel's name (cache file names, reports).
    fn name(&self) -> String;
    /// Its tunables and constraints for this problem.
    fn space(&self) -> Space;
    /// The heuristic config: the baseline every candidate is timed and checked against, one
    /// of the pattern search's starts, and what `TESSERA_AUTOTUNE=off` runs. Must be in the
    /// space.
    fn default_config(&self) -> Config;
    /// The launch at `config`, traced. `Err` (or a panic) makes the config a failure.
    fn program(&self, config: &Config) -> Result<KernelProgram, String>;
    /// Input set `index`: deterministic, so every candidate sees the same data.
    fn inputs(&self, index: usize) -> Vec<HostTensor>;
    /// Largest relative error against the default config's output that still counts as
    /// right. The default suits f32 (summation order differs between block sizes).
    fn tolerance(&self) -> f64 {
        1e-4
    }
}

/// What to tune with, and how much.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    pub strategy: Strategy,
    /// Most configs measured (the default included); `None`: no limit.
    pub max_evals: Option<usize>,
    /// Wall time for the search; checked between candidates.
    pub max_time: Option<Duration>,
    pub measure: Measure,
    /// The StableHLO form candidates are compiled in. `Auto` times what a launch runs;
    /// `GridLoop` keeps the block structure a TPU executes (one step per grid point), so
    /// on a CPU plugin, where `Auto` folds many block configs into one program, block
    /// sizes still change the measured program.
    pub form: Form,
    pub mode: AutotuneMode,
    /// The cache root; results go under `<cache_dir>/autotune/`.
    pub cache_dir: PathBuf,
    /// Ignore a cached result (it is replaced).
    pub retune: bool,
}

impl TuneOptions {
    /// Pattern search, no budget, mode `Full`, caching under `cache_dir`.
    pub fn new(cache_dir: impl Into<PathBuf>) -> TuneOptions {
        TuneOptions {
            strategy: Strategy::PatternSearch,
            max_evals: None,
            max_time: None,
            measure: Measure::default(),
            form: Form::Auto,
            mode: AutotuneMode::Full,
            cache_dir: cache_dir.into(),
            retune: false,
        }
    }

    /// As `new` in the user's cache folder (`TESSERA_CACHE_DIR`, ...) with the mode of
    /// `TESSERA_AUTOTUNE`.
    pub fn from_env() -> Result<TuneOptions, TuneError> {
        Ok(TuneOptions {
            mode: AutotuneMode::from_env()?,
            ..TuneOptions::new(crate::plugin_store::cache_dir())
        })
    }
}

/// Finds the best config of `kernel` on `device`: from the cache, or by searching (mode
/// `Full`), calling `progress` after each measured config.
pub fn tune(
    kernel: &dyn TunableKernel,
    device: &Device,
    options: &TuneOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<TuneReport, TuneError> {
    let start = Instant::now();
    let space = kernel.space();
    let default = kernel.default_config();
    let mut report = TuneReport {
        kernel: kernel.name(),
        source: Source::Default,
        strategy: options.strategy,
        config: default.clone(),
        default_config: default.clone(),
        default_time: None,
        best_time: None,
        evaluated: 0,
        history: Vec::new(),
        skipped: Vec::new(),
        // Counted below, where needed: a cache hit reads it instead (it must stay cheap).
        space_size: 0,
        cache_path: None,
        cache_write_error: None,
        elapsed: Duration::ZERO,
    };
    if options.mode == AutotuneMode::Off {
        report.space_size = space.feasible().len();
        report.elapsed = start.elapsed();
        return Ok(report);
    }
    let default_fails = |reason: String| TuneError::DefaultFails {
        kernel: kernel.name(),
        config: default.to_string(),
        reason,
    };
    let origin = space
        .indices_of(&default)
        .ok_or_else(|| TuneError::DefaultNotInSpace {
            kernel: kernel.name(),
            config: default.to_string(),
            space: space.describe(),
        })?;
    let program = build(kernel, &default).map_err(default_fails)?;
    let key = cache_key(kernel, &space, &program, device, options.form)?;
    report.cache_path = Some(key.path(&options.cache_dir));

    match cache::load(&key, &options.cache_dir) {
        Ok(entry) if !options.retune => match cached_config(&entry, &space) {
            Ok(config) => {
                from_cache(&mut report, &entry, config);
                report.elapsed = start.elapsed();
                return Ok(report);
            }
            // A hand-edited or stale file: tune again (and overwrite it) instead of
            // launching a config the space does not allow.
            Err(why) => tracing::warn!(
                "ignoring the cached config of {} in {}: {why}",
                kernel.name(),
                key.path(&options.cache_dir).display()
            ),
        },
        Ok(_) => {}
        Err(miss) => tracing::debug!("autotune cache miss for {}: {miss:?}", kernel.name()),
    }
    report.space_size = space.feasible().len();
    if options.mode == AutotuneMode::Cached {
        report.elapsed = start.elapsed();
        return Ok(report);
    }

    let client = device.client()?;
    let sets = (0..options.measure.input_sets.max(1))
        .map(|i| kernel.inputs(i))
        .collect();
    let bench = Bench::upload(client, sets, options.measure.clone())?;
    let exe = compile_program(&program, device, options.form)
        .map_err(|e| default_fails(e.to_string()))?;
    let reference = bench
        .outputs(&exe)
        .map_err(|e| default_fails(e.to_string()))?;
    let default_time = bench.time(&exe).map_err(|e| default_fails(e.to_string()))?;
    let planned = options
        .max_evals
        .unwrap_or(usize::MAX)
        .min(report.space_size);
    let mut session = Session {
        kernel,
        device,
        form: options.form,
        space: &space,
        bench: &bench,
        reference: &reference,
        report: &mut report,
        memo: HashMap::new(),
        limits: (options.max_evals, options.max_time, start),
        planned,
        progress,
    };
    session.record(
        origin.clone(),
        Evaluation {
            config: default.clone(),
            outcome: Outcome::Measured(default_time),
        },
    );
    search(options.strategy, &space, &origin, &mut session);

    report.source = Source::Tuned;
    confirm(
        kernel,
        device,
        options.form,
        &bench,
        options.measure.confirm,
        &mut report,
    )?;
    report.cache_write_error = store(&report, key, &options.cache_dir).err();
    report.elapsed = start.elapsed();
    Ok(report)
}

/// `kernel.program(config)`, with a panic in user tracing code turned into a failure.
pub(crate) fn build(kernel: &dyn TunableKernel, config: &Config) -> Result<KernelProgram, String> {
    catch_unwind(AssertUnwindSafe(|| kernel.program(config)))
        .unwrap_or_else(|_| Err(format!("tracing `{config}` panicked")))
}

fn cache_key(
    kernel: &dyn TunableKernel,
    space: &Space,
    program: &KernelProgram,
    device: &Device,
    form: Form,
) -> Result<CacheKey, TuneError> {
    let client = device.client()?;
    let (major, minor) = client.plugin().api_version();
    Ok(CacheKey {
        kernel: kernel.name(),
        program_hash: format!("{:016x}", program.structural_hash()),
        space: space.describe(),
        inputs: program
            .inputs
            .iter()
            .map(|o| format!("{}{:?}", o.dtype, o.array_shape))
            .collect(),
        device: device.kind().name().to_string(),
        form: format!("{form:?}"),
        platform_version: client.platform_version().to_string(),
        pjrt_api: format!("{major}.{minor}"),
        tessera_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// The cached best config, if it is one the space allows: it parses, names every tunable
/// with one of its candidates, and passes the constraints.
fn cached_config(entry: &CacheEntry, space: &Space) -> Result<Config, String> {
    let config: Config = entry
        .best_config
        .parse()
        .map_err(|e| format!("`{}` does not parse: {e}", entry.best_config))?;
    if config.pairs().len() != space.tunables.len() || space.indices_of(&config).is_none() {
        return Err(format!(
            "`{config}` is not in the space {}",
            space.describe()
        ));
    }
    space
        .check(&config)
        .map_err(|why| format!("`{config}` breaks a constraint: {why}"))?;
    Ok(config)
}

fn from_cache(report: &mut TuneReport, entry: &CacheEntry, config: Config) {
    let ms = |v: f64| Duration::try_from_secs_f64(v / 1e3).unwrap_or(Duration::ZERO);
    report.source = Source::Cache;
    report.config = config;
    report.best_time = Some(ms(entry.best_ms));
    report.space_size = entry.space_size;
    report.default_time = Some(ms(entry.default_ms));
    report.history = entry
        .evaluations
        .iter()
        .filter_map(|e| {
            let config = e.config.parse().ok()?;
            let outcome = match (e.ms, e.outcome.split_once(": ")) {
                (Some(t), _) => Outcome::Measured(ms(t)),
                (None, Some(("rejected", why))) => Outcome::Rejected(why.to_string()),
                (None, other) => {
                    Outcome::Failed(other.map_or(e.outcome.clone(), |(_, why)| why.to_string()))
                }
            };
            Some(Evaluation { config, outcome })
        })
        .collect();
}

/// Writes the result; a cache that cannot be written costs the next run a re-tune, not
/// this one its result (the reason is returned for the report).
fn store(report: &TuneReport, key: CacheKey, cache_dir: &std::path::Path) -> Result<(), String> {
    let ms = |t: Option<Duration>| t.map_or(f64::NAN, |t| t.as_secs_f64() * 1e3);
    let evaluations = report
        .history
        .iter()
        .map(|e| {
            let (ms, outcome) = match &e.outcome {
                Outcome::Measured(t) => (Some(t.as_secs_f64() * 1e3), "ok".to_string()),
                Outcome::Failed(why) => (None, format!("failed: {why}")),
                Outcome::Rejected(why) => (None, format!("rejected: {why}")),
            };
            StoredEvaluation {
                config: e.config.to_string(),
                ms,
                outcome,
            }
        })
        .collect();
    let entry = CacheEntry::new(
        key,
        report.strategy.to_string(),
        (report.config.to_string(), ms(report.best_time)),
        (report.default_config.to_string(), ms(report.default_time)),
        report.space_size,
        evaluations,
    );
    cache::store(&entry, cache_dir).map(drop).map_err(|e| {
        let why = format!(
            "writing the autotune cache under {}: {e}",
            cache_dir.display()
        );
        tracing::warn!("{why}");
        why
    })
}
