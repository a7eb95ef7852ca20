//! `tune`: cache lookup, then search with measured, output-checked candidates, then store.

use super::cache::{self, CacheEntry, CacheKey, StoredEvaluation};
use super::measure::{max_rel_err, median, Bench, Measure};
use super::report::{Evaluation, Outcome, Progress, Source, TuneReport};
use super::search::{search, Strategy, Verdict};
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
    /// The heuristic config: the baseline every candidate is timed and checked against, the
    /// pattern search's start, and what `TESSERA_AUTOTUNE=off` runs. Must be in the space.
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
        space_size: space.size(),
        cache_path: None,
        elapsed: Duration::ZERO,
    };
    if options.mode == AutotuneMode::Off {
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
    let key = cache_key(kernel, &space, &program, device)?;
    report.cache_path = Some(key.path(&options.cache_dir));

    match cache::load(&key, &options.cache_dir) {
        Ok(entry) if !options.retune => {
            from_cache(&mut report, &entry);
            report.elapsed = start.elapsed();
            return Ok(report);
        }
        Ok(_) => {}
        Err(miss) => tracing::debug!("autotune cache miss for {}: {miss:?}", kernel.name()),
    }
    if options.mode == AutotuneMode::Cached {
        report.elapsed = start.elapsed();
        return Ok(report);
    }

    let client = device.client()?;
    let sets = (0..options.measure.input_sets.max(1))
        .map(|i| kernel.inputs(i))
        .collect();
    let bench = Bench::upload(client, sets, options.measure.clone())?;
    let exe =
        compile_program(&program, device, Form::Auto).map_err(|e| default_fails(e.to_string()))?;
    let reference = bench
        .outputs(&exe)
        .map_err(|e| default_fails(e.to_string()))?;
    let default_time = bench.time(&exe).map_err(|e| default_fails(e.to_string()))?;
    let planned = options.max_evals.unwrap_or(usize::MAX).min(space.size());
    let mut session = Session {
        kernel,
        device,
        space: &space,
        bench: &bench,
        reference: &reference,
        report: &mut report,
        memo: HashMap::new(),
    };
    session.record(
        origin.clone(),
        Evaluation {
            config: default.clone(),
            outcome: Outcome::Measured(default_time),
        },
        planned,
        progress,
    );
    search(options.strategy, &space, &origin, &mut |at| {
        if let Some(v) = session.memo.get(at) {
            return *v;
        }
        let over_evals = options
            .max_evals
            .is_some_and(|m| session.report.evaluated >= m);
        let over_time = options.max_time.is_some_and(|t| start.elapsed() >= t);
        if over_evals || over_time {
            return Verdict::Stop;
        }
        session.evaluate(at, planned, progress)
    });

    report.source = Source::Tuned;
    confirm(kernel, device, &bench, options.measure.confirm, &mut report)?;
    store(&report, key, &options.cache_dir);
    report.elapsed = start.elapsed();
    Ok(report)
}

/// One search's state: what is measured against what, and what was seen.
struct Session<'a> {
    kernel: &'a dyn TunableKernel,
    device: &'a Device,
    space: &'a Space,
    bench: &'a Bench,
    reference: &'a [HostTensor],
    report: &'a mut TuneReport,
    memo: HashMap<Vec<usize>, Verdict>,
}

impl Session<'_> {
    fn evaluate(
        &mut self,
        at: &[usize],
        planned: usize,
        progress: &mut dyn FnMut(&Progress),
    ) -> Verdict {
        let config = self.space.config_at(at);
        if let Err(reason) = self.space.check(&config) {
            self.report.skipped.push((config, reason));
            self.memo.insert(at.to_vec(), Verdict::Invalid);
            return Verdict::Invalid;
        }
        let outcome = self.measure(&config);
        self.record(
            at.to_vec(),
            Evaluation { config, outcome },
            planned,
            progress,
        )
    }

    fn record(
        &mut self,
        at: Vec<usize>,
        evaluation: Evaluation,
        planned: usize,
        progress: &mut dyn FnMut(&Progress),
    ) -> Verdict {
        let verdict = evaluation
            .time()
            .map_or(Verdict::Invalid, |t| Verdict::Score(t.as_secs_f64()));
        self.memo.insert(at, verdict);
        self.report.evaluated += 1;
        progress(&Progress {
            evaluation: &evaluation,
            evaluated: self.report.evaluated,
            planned,
        });
        self.report.history.push(evaluation);
        verdict
    }

    fn measure(&self, config: &Config) -> Outcome {
        let program = match build(self.kernel, config) {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(e),
        };
        let exe = match compile_program(&program, self.device, Form::Auto) {
            Ok(exe) => exe,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let got = match self.bench.outputs(&exe) {
            Ok(got) => got,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let tolerance = self.kernel.tolerance();
        match max_rel_err(&got, self.reference) {
            Err(why) => return Outcome::Rejected(why),
            Ok(err) if err.is_nan() || err > tolerance => {
                return Outcome::Rejected(format!(
                    "max rel err {err:.3e} vs the default config's output exceeds {tolerance:.0e}"
                ));
            }
            Ok(_) => {}
        }
        self.bench
            .time(&exe)
            .map_or_else(|e| Outcome::Failed(e.to_string()), Outcome::Measured)
    }
}

/// How much faster than the default (as a fraction of its time) a finalist's confirmed
/// median must be to replace it: closer than this is within run-to-run noise on a CPU.
const CONFIRM_MARGIN: f64 = 0.02;
/// The fraction of paired confirmation rounds a finalist must win against the default.
const CONFIRM_WINS: f64 = 0.75;

/// Re-times the fastest `top` configs and the default, interleaved, and sets the report's
/// winner and both times from that (see `Measure::confirm`, `beats`).
fn confirm(
    kernel: &dyn TunableKernel,
    device: &Device,
    bench: &Bench,
    top: usize,
    report: &mut TuneReport,
) -> Result<(), TuneError> {
    let mut finalists: Vec<Config> = vec![report.default_config.clone()];
    finalists.extend(
        report
            .ranked()
            .into_iter()
            .map(|(c, _)| c.clone())
            .filter(|c| *c != report.default_config)
            .take(top),
    );
    // Each finalist traced and compiled before (an executable-cache hit now).
    let exes = finalists
        .iter()
        .map(|c| {
            let program = build(kernel, c).map_err(|reason| TuneError::Finalist {
                kernel: kernel.name(),
                config: c.to_string(),
                reason,
            })?;
            Ok(compile_program(&program, device, Form::Auto)?)
        })
        .collect::<Result<Vec<_>, TuneError>>()?;
    let rounds = bench.confirm(&exes.iter().map(|e| e.as_ref()).collect::<Vec<_>>())?;
    let Some(default_rounds) = rounds.first() else {
        return Ok(());
    };
    let default_time = median(default_rounds.clone());
    report.default_time = Some(default_time);
    report.best_time = Some(default_time);
    // The fastest challenger wins only if it clearly beats the default in this same
    // interleaved measurement; otherwise the default stays, so the tuned config is never
    // slower than the default by the tuner's own confirmation.
    let challenger = finalists
        .into_iter()
        .zip(rounds.iter().map(|r| median(r.clone())))
        .zip(&rounds)
        .skip(1)
        .min_by_key(|((_, t), _)| *t);
    if let Some(((config, time), times)) = challenger {
        if beats(time, times, default_time, default_rounds) {
            report.config = config;
            report.best_time = Some(time);
        }
    }
    Ok(())
}

/// Whether a challenger (median `time`, per-round `times`) beats the default beyond noise:
/// its median is `CONFIRM_MARGIN` lower, and it was faster in `CONFIRM_WINS` of the paired
/// rounds. On a loaded machine identical programs differ by tens of percent between
/// medians; the paired rounds share the load, so the majority test rejects such flukes.
fn beats(time: Duration, times: &[Duration], default_time: Duration, default: &[Duration]) -> bool {
    let wins = times.iter().zip(default).filter(|(c, d)| c < d).count();
    time.as_secs_f64() < default_time.as_secs_f64() * (1.0 - CONFIRM_MARGIN)
        && wins as f64 >= CONFIRM_WINS * default.len() as f64
}

/// `kernel.program(config)`, with a panic in user tracing code turned into a failure.
fn build(kernel: &dyn TunableKernel, config: &Config) -> Result<KernelProgram, String> {
    catch_unwind(AssertUnwindSafe(|| kernel.program(config)))
        .unwrap_or_else(|_| Err(format!("tracing `{config}` panicked")))
}

fn cache_key(
    kernel: &dyn TunableKernel,
    space: &Space,
    program: &KernelProgram,
    device: &Device,
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
        platform_version: client.platform_version().to_string(),
        pjrt_api: format!("{major}.{minor}"),
        tessera_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

fn from_cache(report: &mut TuneReport, entry: &CacheEntry) {
    let ms = |v: f64| Duration::from_secs_f64(v.max(0.0) / 1e3);
    report.source = Source::Cache;
    // A config string that no longer parses (hand-edited file) keeps the default.
    if let Ok(c) = entry.best_config.parse() {
        report.config = c;
    }
    report.best_time = Some(ms(entry.best_ms));
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
/// this one its result.
fn store(report: &TuneReport, key: CacheKey, cache_dir: &std::path::Path) {
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
    if let Err(e) = cache::store(&entry, cache_dir) {
        tracing::warn!(
            "writing the autotune cache under {}: {e}",
            cache_dir.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finalist_must_beat_the_default_by_median_and_in_most_rounds() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&t| Duration::from_millis(t))
                .collect::<Vec<_>>()
        };
        let default = ms(&[10, 10, 10, 10]);
        let clear = ms(&[8, 8, 8, 11]);
        assert!(beats(
            median(clear.clone()),
            &clear,
            median(default.clone()),
            &default
        ));
        // Faster by median but in only half the rounds: noise.
        let lucky = ms(&[5, 5, 11, 11]);
        assert!(!beats(
            Duration::from_millis(5),
            &lucky,
            median(default.clone()),
            &default
        ));
        // Faster in every round but by less than the margin.
        let close = ms(&[9990, 9990, 9990, 9990]);
        let slow = ms(&[10000, 10000, 10000, 10000]);
        assert!(!beats(
            median(close.clone()),
            &close,
            median(slow.clone()),
            &slow
        ));
    }
}
