//! The autotuner: searches a kernel's tunables (block sizes, ...) on a device, checks every
//! candidate's output against the default config's, and caches the winner on disk.
//!
//! A kernel side implements [`TunableKernel`] (its space, a heuristic default, and how to
//! trace a launch for a config); [`tune`] does the rest. `TESSERA_AUTOTUNE=off|cached|full`
//! picks how much of it runs (see [`AutotuneMode`]).

mod cache;
mod confirm;
mod measure;
mod pattern;
#[cfg(test)]
mod pattern_replay;
mod report;
mod search;
mod session;
mod space;
mod tuner;

pub use cache::{CacheEntry, CacheKey, StoredEvaluation};
pub use measure::{max_rel_err, Measure};
pub use report::{Evaluation, Outcome, Progress, Source, TuneReport};
pub use search::Strategy;
pub use space::{Config, Constraint, Space, Tunable};
pub use tuner::{tune, TunableKernel, TuneOptions};

use crate::error::RuntimeError;

/// How much tuning `tune` may do: from `TESSERA_AUTOTUNE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutotuneMode {
    /// Never tune or read the cache: the default config.
    Off,
    /// The cached config if there is one, else the default (never measures).
    Cached,
    /// The cached config if there is one, else tune now and cache the result.
    Full,
}

impl AutotuneMode {
    /// `TESSERA_AUTOTUNE` (`off`, `cached`, `full`); unset or empty means `Full`, since a
    /// caller of `tune` asked for tuning.
    pub fn from_env() -> Result<AutotuneMode, TuneError> {
        AutotuneMode::from_env_or(AutotuneMode::Full)
    }

    /// `TESSERA_AUTOTUNE`, or `default` where it is unset or empty.
    pub fn from_env_or(default: AutotuneMode) -> Result<AutotuneMode, TuneError> {
        match std::env::var("TESSERA_AUTOTUNE") {
            Ok(v) if !v.trim().is_empty() => v.parse(),
            _ => Ok(default),
        }
    }
}

impl std::str::FromStr for AutotuneMode {
    type Err = TuneError;
    fn from_str(s: &str) -> Result<AutotuneMode, TuneError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "0" => Ok(AutotuneMode::Off),
            "cached" => Ok(AutotuneMode::Cached),
            "full" | "1" => Ok(AutotuneMode::Full),
            _ => Err(TuneError::BadMode(s.to_string())),
        }
    }
}

/// Why tuning could not produce a config at all (single candidates failing are not errors:
/// they are [`Outcome`]s in the report).
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Boxed: runtime errors are large and this path is cold.
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
    #[error("TESSERA_AUTOTUNE=`{0}`: expected off, cached or full")]
    BadMode(String),
    #[error("kernel `{kernel}`: the default config `{config}` is not in its space ({space})")]
    DefaultNotInSpace {
        kernel: String,
        config: String,
        space: String,
    },
    /// Without a working default there is no baseline to time or check outputs against.
    #[error("kernel `{kernel}`: the default config `{config}` fails: {reason}")]
    DefaultFails {
        kernel: String,
        config: String,
        reason: String,
    },
    /// A config that traced and ran during the search fails when re-timed at the end.
    #[error("kernel `{kernel}`: config `{config}` failed when timed again: {reason}")]
    Finalist {
        kernel: String,
        config: String,
        reason: String,
    },
}

impl From<RuntimeError> for TuneError {
    fn from(e: RuntimeError) -> Self {
        TuneError::Runtime(Box::new(e))
    }
}
