//! Search strategies: which config to try next. They see configs as candidate-index vectors
//! and scores as numbers; measuring, memoizing, constraints and budgets are the caller's
//! (a [`Probe`]).

use super::pattern::pattern;
use super::space::Space;
use std::fmt;
use std::str::FromStr;

/// How the tuner walks the space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Every config, in order (small spaces).
    Exhaustive,
    /// Configs in a seeded random order (the budget decides how many).
    Random { seed: u64 },
    /// Local search from the better of the heuristic default and the largest feasible
    /// config, like Helion's pattern search.
    PatternSearch,
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Exhaustive => f.write_str("exhaustive"),
            Strategy::Random { seed } => write!(f, "random(seed {seed})"),
            Strategy::PatternSearch => f.write_str("pattern"),
        }
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Strategy, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "exhaustive" => Ok(Strategy::Exhaustive),
            "random" => Ok(Strategy::Random { seed: 0 }),
            "pattern" | "pattern-search" => Ok(Strategy::PatternSearch),
            other => Err(format!(
                "unknown strategy `{other}` (expected exhaustive, random or pattern)"
            )),
        }
    }
}

/// What evaluating one config gave the search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Seconds per run: lower is better.
    Score(f64),
    /// Skipped, failed or wrong: never a place to move to.
    Invalid,
    /// A budget ran out: stop searching.
    Stop,
}

/// Random order over a huge product is sampled instead of enumerated, up to this many draws.
const MAX_RANDOM_DRAWS: usize = 4096;
const ENUMERATE_LIMIT: usize = 1 << 16;

/// What a search asks of the tuner.
pub(crate) trait Probe {
    /// The verdict on the config at candidate indices `at` (measured once, then recalled).
    fn eval(&mut self, at: &[usize]) -> Verdict;
    /// `challenger`'s time over `incumbent`'s, both (already evaluated) timed again side by
    /// side, in interleaved runs: for a decision between near-tied configs, which separate
    /// measurements on a loaded machine cannot make. `None` when that fails.
    fn rematch(&mut self, incumbent: &[usize], challenger: &[usize]) -> Option<f64>;
}

/// Runs `strategy` over `space` from `start`, asking `probe` about each config it wants.
pub(crate) fn search(strategy: Strategy, space: &Space, start: &[usize], probe: &mut dyn Probe) {
    match strategy {
        Strategy::Exhaustive => {
            for at in space.all_indices() {
                if probe.eval(&at) == Verdict::Stop {
                    return;
                }
            }
        }
        Strategy::Random { seed } => random(space, seed, probe),
        Strategy::PatternSearch => pattern(space, start, probe),
    }
}

fn random(space: &Space, seed: u64, probe: &mut dyn Probe) {
    let mut rng = SplitMix64(seed);
    if space.size() <= ENUMERATE_LIMIT {
        let mut all = space.all_indices();
        // Fisher-Yates.
        for i in (1..all.len()).rev() {
            all.swap(i, rng.below(i + 1));
        }
        for at in all {
            if probe.eval(&at) == Verdict::Stop {
                return;
            }
        }
        return;
    }
    for _ in 0..MAX_RANDOM_DRAWS {
        let at: Vec<usize> = space
            .tunables
            .iter()
            .map(|t| rng.below(t.candidates.len()))
            .collect();
        if probe.eval(&at) == Verdict::Stop {
            return;
        }
    }
}

/// A tiny seeded generator (SplitMix64): the runtime needs reproducible shuffles, not a
/// dependency on `rand`.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A synthetic probe for the strategies' tests: deterministic costs, no device.
#[cfg(test)]
pub(super) mod synthetic {
    use super::{Probe, Verdict};
    use crate::autotune::space::{Space, Tunable};
    use std::collections::HashSet;

    /// A cost per config.
    pub type Cost = Box<dyn Fn(&[usize]) -> f64>;

    /// Scores configs by `score` (NaN: invalid); rematches compare by `truth`, which is
    /// `score` unless set (a noisy measurement against the real cost). `Stop` on call
    /// number `stop_at`.
    pub struct Synthetic {
        pub score: Cost,
        pub truth: Option<Cost>,
        pub stop_at: usize,
        /// Every `eval` call's config, in order.
        pub calls: Vec<Vec<usize>>,
        pub rematches: usize,
    }

    impl Synthetic {
        pub fn new(score: impl Fn(&[usize]) -> f64 + 'static) -> Synthetic {
            Synthetic {
                score: Box::new(score),
                truth: None,
                stop_at: usize::MAX,
                calls: Vec::new(),
                rematches: 0,
            }
        }

        /// Distinct configs evaluated.
        pub fn evaluated(&self) -> usize {
            self.calls.iter().collect::<HashSet<_>>().len()
        }

        /// The lowest score of a valid evaluated config.
        pub fn best(&self) -> f64 {
            self.calls
                .iter()
                .map(|at| (self.score)(at))
                .filter(|s| !s.is_nan())
                .fold(f64::INFINITY, f64::min)
        }
    }

    impl Probe for Synthetic {
        fn eval(&mut self, at: &[usize]) -> Verdict {
            self.calls.push(at.to_vec());
            let s = (self.score)(at);
            match s {
                _ if self.calls.len() == self.stop_at => Verdict::Stop,
                s if s.is_nan() => Verdict::Invalid,
                s => Verdict::Score(s),
            }
        }

        fn rematch(&mut self, incumbent: &[usize], challenger: &[usize]) -> Option<f64> {
            self.rematches += 1;
            let truth = self.truth.as_ref().unwrap_or(&self.score);
            Some(truth(challenger) / truth(incumbent))
        }
    }

    /// A bowl with its minimum at index (5, 1).
    pub fn bowl(at: &[usize]) -> f64 {
        1.0 + (at[0] as f64 - 5.0).powi(2) + (at[1] as f64 - 1.0).powi(2)
    }

    /// 8 x 3 configs.
    pub fn space() -> Space {
        Space::new(vec![
            Tunable::new("a", (0..8).collect::<Vec<i64>>()),
            Tunable::new("b", [0, 1, 2]),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::synthetic::{bowl, space, Synthetic};
    use super::*;

    #[test]
    fn exhaustive_and_random_visit_everything_and_stop_on_request() {
        for strategy in [Strategy::Exhaustive, Strategy::Random { seed: 7 }] {
            let mut probe = Synthetic::new(bowl);
            search(strategy, &space(), &[0, 0], &mut probe);
            assert_eq!(probe.evaluated(), 24, "{strategy}");
            let mut probe = Synthetic::new(|_| f64::NAN);
            probe.stop_at = 3;
            search(strategy, &space(), &[0, 0], &mut probe);
            assert_eq!(probe.calls.len(), 3, "{strategy}");
        }
    }

    #[test]
    fn strategies_parse() {
        assert_eq!("pattern".parse::<Strategy>(), Ok(Strategy::PatternSearch));
        assert!("annealing".parse::<Strategy>().is_err());
    }
}
