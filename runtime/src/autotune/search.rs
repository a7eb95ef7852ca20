//! Search strategies: which config to try next. They see configs as candidate-index vectors
//! and scores as numbers; measuring, memoizing, constraints and budgets are the caller's.

use super::space::Space;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

/// How the tuner walks the space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Every config, in order (small spaces).
    Exhaustive,
    /// Configs in a seeded random order (the budget decides how many).
    Random { seed: u64 },
    /// Local search from the heuristic default, like Helion's pattern search.
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

/// A move must beat the current point by this fraction: smaller gains are timing noise,
/// and chasing them would spend evaluations walking around a plateau.
const MIN_GAIN: f64 = 0.01;

/// Random order over a huge product is sampled instead of enumerated, up to this many draws.
const MAX_RANDOM_DRAWS: usize = 4096;
const ENUMERATE_LIMIT: usize = 1 << 16;

/// Runs `strategy` over `space` from `start`, calling `eval` for each config it wants.
pub(crate) fn search(
    strategy: Strategy,
    space: &Space,
    start: &[usize],
    eval: &mut dyn FnMut(&[usize]) -> Verdict,
) {
    match strategy {
        Strategy::Exhaustive => {
            for at in space.all_indices() {
                if eval(&at) == Verdict::Stop {
                    return;
                }
            }
        }
        Strategy::Random { seed } => random(space, seed, eval),
        Strategy::PatternSearch => pattern(space, start, eval),
    }
}

fn random(space: &Space, seed: u64, eval: &mut dyn FnMut(&[usize]) -> Verdict) {
    let mut rng = SplitMix64(seed);
    if space.size() <= ENUMERATE_LIMIT {
        let mut all = space.all_indices();
        // Fisher-Yates.
        for i in (1..all.len()).rev() {
            all.swap(i, rng.below(i + 1));
        }
        for at in all {
            if eval(&at) == Verdict::Stop {
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
        if eval(&at) == Verdict::Stop {
            return;
        }
    }
}

/// Local searches after the first converges, each from a seeded random config not yet
/// seen: a walk from the default can settle in a local minimum (or on a plateau inside
/// timing noise), and a few fresh starts find other basins for a handful of evaluations.
const RESTARTS: usize = 2;
/// Random picks tried per restart to find an unseen, valid start.
const RESTART_DRAWS: usize = 64;

/// Pattern search from `start`, then `RESTARTS` more from random unseen configs (see
/// `descend`). The restarts are seeded by the space's size, so a run is reproducible.
fn pattern(space: &Space, start: &[usize], eval: &mut dyn FnMut(&[usize]) -> Verdict) {
    let seen = RefCell::new(HashSet::new());
    let mut eval = |at: &[usize]| {
        seen.borrow_mut().insert(at.to_vec());
        eval(at)
    };
    // No baseline (the default failed, or no budget): nothing to walk from.
    let Verdict::Score(s) = eval(start) else {
        return;
    };
    if descend(space, start, s, &mut eval).is_none() {
        return;
    }
    let mut rng = SplitMix64(space.size() as u64);
    for _ in 0..RESTARTS {
        let from = (0..RESTART_DRAWS).find_map(|_| {
            let at: Vec<usize> = space
                .tunables
                .iter()
                .map(|t| rng.below(t.candidates.len()))
                .collect();
            let fresh = !seen.borrow().contains(&at);
            (fresh && space.check(&space.config_at(&at)).is_ok()).then_some(at)
        });
        let Some(from) = from else { return };
        match eval(&from) {
            Verdict::Stop => return,
            // A start that fails or is wrong: try the next restart.
            Verdict::Invalid => continue,
            Verdict::Score(s) => {
                if descend(space, &from, s, &mut eval).is_none() {
                    return;
                }
            }
        }
    }
}

/// One local search: from the current point, try moving one tunable `step` candidates up or
/// down; go to the best neighbour that beats the current point by `MIN_GAIN`. When none
/// does, halve the step; at step 1 with no gain, stop. The first step is 2 when some
/// tunable has more than three candidates, so the walk crosses a big space quickly, then
/// refines. A step past the end lands on the end candidate, and a neighbour that is invalid
/// (say a block that breaks the tiling rule) is stepped over to the next one in that
/// direction, so infeasible candidates in a list do not wall the walk in.
/// `None` when a budget ran out.
fn descend(
    space: &Space,
    start: &[usize],
    score: f64,
    eval: &mut dyn FnMut(&[usize]) -> Verdict,
) -> Option<()> {
    let mut here = start.to_vec();
    let mut best = score;
    let widest = space
        .tunables
        .iter()
        .map(|t| t.candidates.len())
        .max()
        .unwrap_or(0);
    let mut step = if widest > 3 { 2 } else { 1 };
    loop {
        let mut winner: Option<(Vec<usize>, f64)> = None;
        for (d, t) in space.tunables.iter().enumerate() {
            for up in [false, true] {
                let mut i = here[d];
                loop {
                    i = match (up, i) {
                        (true, i) if i + 1 < t.candidates.len() => {
                            (i + step).min(t.candidates.len() - 1)
                        }
                        (false, i) if i > 0 => i.saturating_sub(step),
                        _ => break,
                    };
                    let mut next = here.clone();
                    next[d] = i;
                    match eval(&next) {
                        Verdict::Stop => return None,
                        Verdict::Invalid => continue,
                        Verdict::Score(s) => {
                            if s < best * (1.0 - MIN_GAIN)
                                && winner.as_ref().is_none_or(|(_, w)| s < *w)
                            {
                                winner = Some((next, s));
                            }
                            break;
                        }
                    }
                }
            }
        }
        match winner {
            Some((next, s)) => {
                here = next;
                best = s;
            }
            None if step > 1 => step /= 2,
            None => return Some(()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autotune::space::Tunable;

    /// A bowl with its minimum at index (5, 1): pattern search must find it from (0, 0).
    fn bowl(at: &[usize]) -> f64 {
        1.0 + (at[0] as f64 - 5.0).powi(2) + (at[1] as f64 - 1.0).powi(2)
    }

    fn space() -> Space {
        Space::new(vec![
            Tunable::new("a", (0..8).collect::<Vec<i64>>()),
            Tunable::new("b", [0, 1, 2]),
        ])
    }

    #[test]
    fn pattern_search_descends_to_the_minimum_with_few_evaluations() {
        let mut seen = HashSet::new();
        let mut found_after = None;
        search(Strategy::PatternSearch, &space(), &[0, 0], &mut |at| {
            seen.insert(at.to_vec());
            if bowl(at) == 1.0 {
                found_after.get_or_insert(seen.len());
            }
            Verdict::Score(bowl(at))
        });
        let n = found_after.expect("the minimum");
        assert!(n < 12, "found after {n} of 24");
    }

    #[test]
    fn restarts_escape_a_local_minimum_at_the_start() {
        // (0, 0) beats all its neighbours, but every config with a >= 2 slopes down to the
        // global minimum at (7, 2): one restart landing there is enough.
        let cost = |at: &[usize]| match at[0] {
            0 | 1 => 1.0 + (at[0] + at[1]) as f64,
            a => 0.5 + 0.1 * ((7 - a) + (2 - at[1])) as f64,
        };
        let mut best = f64::INFINITY;
        search(Strategy::PatternSearch, &space(), &[0, 0], &mut |at| {
            best = best.min(cost(at));
            Verdict::Score(cost(at))
        });
        assert_eq!(best, 0.5);
    }

    #[test]
    fn pattern_search_steps_over_invalid_candidates() {
        // Only a in {0, 7} is valid: the walk must jump the invalid middle to reach 7.
        let mut best = f64::INFINITY;
        search(Strategy::PatternSearch, &space(), &[0, 1], &mut |at| {
            if at[0] != 0 && at[0] != 7 {
                return Verdict::Invalid;
            }
            let s = if at[0] == 7 { 1.0 } else { 5.0 };
            best = best.min(s);
            Verdict::Score(s)
        });
        assert_eq!(best, 1.0);
    }

    #[test]
    fn exhaustive_and_random_visit_everything_and_stop_on_request() {
        for strategy in [Strategy::Exhaustive, Strategy::Random { seed: 7 }] {
            let mut seen = HashSet::new();
            search(strategy, &space(), &[0, 0], &mut |at| {
                seen.insert(at.to_vec());
                Verdict::Score(bowl(at))
            });
            assert_eq!(seen.len(), 24, "{strategy}");
            let mut calls = 0;
            search(strategy, &space(), &[0, 0], &mut |_| {
                calls += 1;
                if calls == 3 {
                    Verdict::Stop
                } else {
                    Verdict::Invalid
                }
            });
            assert_eq!(calls, 3, "{strategy}");
        }
    }

    #[test]
    fn strategies_parse() {
        assert_eq!("pattern".parse::<Strategy>(), Ok(Strategy::PatternSearch));
        assert!("annealing".parse::<Strategy>().is_err());
    }
}
