//! What `tune` reports: every measured config's outcome, and the winner.

use super::search::Strategy;
use super::space::Config;
use std::path::PathBuf;
use std::time::Duration;

/// What became of one measured config.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Right output; its median undisturbed run (see `Measure::reps`).
    Measured(Duration),
    /// Did not trace, compile or run.
    Failed(String),
    /// Ran, but its output differs from the default config's.
    Rejected(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub config: Config,
    pub outcome: Outcome,
}

impl Evaluation {
    pub fn time(&self) -> Option<Duration> {
        match self.outcome {
            Outcome::Measured(t) => Some(t),
            _ => None,
        }
    }
}

/// Where the report's config came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The cache file (nothing measured).
    Cache,
    /// Tuned now (and stored).
    Tuned,
    /// The default config: mode `off`, or mode `cached` without a cached result.
    Default,
}

/// Handed to the progress callback after every measured config.
#[derive(Debug)]
pub struct Progress<'a> {
    pub evaluation: &'a Evaluation,
    pub evaluated: usize,
    /// Most configs this search can measure (budget or space size).
    pub planned: usize,
}

/// The result of `tune`.
#[derive(Clone, Debug)]
pub struct TuneReport {
    pub kernel: String,
    pub source: Source,
    pub strategy: Strategy,
    /// The config to use.
    pub config: Config,
    pub default_config: Config,
    /// Median times of the default and of `config`, from the interleaved confirmation
    /// rounds, runs disturbed by other work left out (`None` when nothing was measured).
    pub default_time: Option<Duration>,
    pub best_time: Option<Duration>,
    /// Configs measured by this call (0 on a cache hit or without tuning).
    pub evaluated: usize,
    /// Every measured config in order: this call's, or on a cache hit the stored ones.
    pub history: Vec<Evaluation>,
    /// Configs a constraint rejected before measuring, with the reason.
    pub skipped: Vec<(Config, String)>,
    /// Configs that pass the space's constraints: the feasible space, the one evaluations
    /// are counted against (from the cache on a hit).
    pub space_size: usize,
    /// The cache file (absent in mode `off`).
    pub cache_path: Option<PathBuf>,
    /// Why the result could not be written to `cache_path` (a read-only cache folder, ...):
    /// the result stands, but the next run tunes again.
    pub cache_write_error: Option<String>,
    /// Wall time of this call: the tuning work.
    pub elapsed: Duration,
}

impl TuneReport {
    pub fn cache_hit(&self) -> bool {
        self.source == Source::Cache
    }

    /// Default time over best time.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.default_time?.as_secs_f64() / self.best_time?.as_secs_f64())
    }

    /// Measured configs by time, fastest first.
    pub fn ranked(&self) -> Vec<(&Config, Duration)> {
        let mut r: Vec<_> = self
            .history
            .iter()
            .filter_map(|e| Some((&e.config, e.time()?)))
            .collect();
        r.sort_by_key(|(_, t)| *t);
        r
    }
}
