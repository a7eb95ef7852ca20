//! Pattern search: a local search over candidate indices from the better of two starts,
//! with moves that double or halve blocks, alone and combined, and re-measured near-ties.

use super::search::{Probe, Verdict};
use super::space::Space;

/// A move must beat the current point by this fraction: smaller gains are within the noise
/// of a score (about 5% on a loaded machine, see `Measure::reps`), and chasing them spends
/// evaluations walking around a plateau of near-ties.
const MIN_GAIN: f64 = 0.03;
/// A move that gains less than this by the scores is only taken if a rematch (both configs
/// timed again side by side) confirms `MIN_GAIN`: scores measured seconds apart on a loaded
/// machine differ by this much for the same config, so they cannot settle a near-tie.
const NEAR_TIE: f64 = 0.15;

/// A budget ran out: the search stops where it is.
struct Stopped;

/// Pattern search (see `descend`) from the better of two starts: the heuristic default, and
/// the largest feasible config (every tunable as high in its list as the constraints allow).
/// Tunables are mostly block sizes, and the largest blocks that fit (fewest grid steps, most
/// reuse per block) are the other classic heuristic; one of the two is usually near the
/// best, and the second start costs one evaluation where a random restart costs a descent.
pub(crate) fn pattern(space: &Space, start: &[usize], probe: &mut dyn Probe) {
    // No baseline (the default failed, or no budget): nothing to walk from.
    let Verdict::Score(s) = probe.eval(start) else {
        return;
    };
    let mut from = (start.to_vec(), s);
    if let Some(top) = largest_feasible(space) {
        match score_of(probe.eval(&top)) {
            Err(Stopped) => return,
            Ok(Some(t)) if takes(probe, start, &top, t, s) => from = (top, t),
            Ok(_) => {}
        }
    }
    // Stopped by a budget: what was measured so far is the result.
    let _ = descend(space, from, probe);
}

/// The feasible config whose candidates sit highest in their lists (by the sum of their
/// relative positions); `None` when no config is feasible.
fn largest_feasible(space: &Space) -> Option<Vec<usize>> {
    let height = |at: &[usize]| -> f64 {
        at.iter()
            .zip(&space.tunables)
            .map(|(&i, t)| i as f64 / t.candidates.len().saturating_sub(1).max(1) as f64)
            .sum()
    };
    space
        .feasible()
        .into_iter()
        .max_by(|a, b| height(a).total_cmp(&height(b)))
}

/// Whether to move from `here` (score `best`) to `to` (score `s`): a clear gain by the
/// scores, or a gain within `NEAR_TIE` that a rematch confirms.
fn takes(probe: &mut dyn Probe, here: &[usize], to: &[usize], s: f64, best: f64) -> bool {
    if s >= best * (1.0 - MIN_GAIN) {
        return false;
    }
    s < best * (1.0 - NEAR_TIE) || probe.rematch(here, to).is_some_and(|r| r < 1.0 - MIN_GAIN)
}

/// Compass search with pattern moves, from a measured point. Poll every tunable one
/// candidate up and one down (candidate lists are ordered, block sizes powers of two, so a
/// poll halves or doubles one block). Move to the better of the best improving neighbour and
/// the combination of every tunable's improving step (one more evaluation when two or more
/// improve: block sizes interact, and their gains often add up). Then repeat that move while
/// it gains (the pattern move of Hooke and Jeeves: it crosses a big space in few
/// evaluations), and poll again where it stops. Moves go through `takes`; when the best
/// candidate move is not taken, the search has converged.
fn descend(space: &Space, from: (Vec<usize>, f64), probe: &mut dyn Probe) -> Result<(), Stopped> {
    let (mut here, mut best) = from;
    loop {
        // Per tunable that gains by the scores: (tunable, candidate, score) of its better
        // neighbour.
        let mut steps: Vec<(usize, usize, f64)> = Vec::new();
        for d in 0..space.tunables.len() {
            let mut pick: Option<(usize, f64)> = None;
            for up in [false, true] {
                if let Some((i, s)) = neighbour(space, &here, d, up, probe)? {
                    if s < best * (1.0 - MIN_GAIN) && pick.is_none_or(|(_, w)| s < w) {
                        pick = Some((i, s));
                    }
                }
            }
            if let Some((i, s)) = pick {
                steps.push((d, i, s));
            }
        }
        let Some(&(d, i, s)) = steps.iter().min_by(|a, b| a.2.total_cmp(&b.2)) else {
            return Ok(());
        };
        let (mut next, mut score) = (here.clone(), s);
        next[d] = i;
        if steps.len() > 1 {
            let mut all = here.clone();
            for &(d, i, _) in &steps {
                all[d] = i;
            }
            if let Some(s) = score_of(probe.eval(&all))? {
                if s < score {
                    (next, score) = (all, s);
                }
            }
        }
        if !takes(probe, &here, &next, score, best) {
            return Ok(());
        }
        loop {
            let ahead = beyond(space, &here, &next);
            (here, best) = (next, score);
            if ahead == here {
                break;
            }
            match score_of(probe.eval(&ahead))? {
                Some(s) if takes(probe, &here, &ahead, s, best) => (next, score) = (ahead, s),
                _ => break,
            }
        }
    }
}

/// The nearest candidate of tunable `d` above (`up`) or below `here`'s that scores, with its
/// index and score: invalid ones (say a block that breaks the tiling rule) are stepped
/// over, so gaps in a list do not wall the walk in. `None` past the end of the list.
fn neighbour(
    space: &Space,
    here: &[usize],
    d: usize,
    up: bool,
    probe: &mut dyn Probe,
) -> Result<Option<(usize, f64)>, Stopped> {
    let last = space.tunables[d].candidates.len().saturating_sub(1);
    let mut at = here.to_vec();
    loop {
        at[d] = match (up, at[d]) {
            (true, i) if i < last => i + 1,
            (false, i) if i > 0 => i - 1,
            _ => return Ok(None),
        };
        if let Some(s) = score_of(probe.eval(&at))? {
            return Ok(Some((at[d], s)));
        }
    }
}

/// The point as far past `to` as `to` is past `from`, clamped to each candidate list.
fn beyond(space: &Space, from: &[usize], to: &[usize]) -> Vec<usize> {
    from.iter()
        .zip(to)
        .zip(&space.tunables)
        .map(|((&f, &t), tunable)| {
            (2 * t)
                .saturating_sub(f)
                .min(tunable.candidates.len().saturating_sub(1))
        })
        .collect()
}

/// A verdict's score (`None` for an invalid config), or `Stopped`.
fn score_of(v: Verdict) -> Result<Option<f64>, Stopped> {
    match v {
        Verdict::Score(s) => Ok(Some(s)),
        Verdict::Invalid => Ok(None),
        Verdict::Stop => Err(Stopped),
    }
}

#[cfg(test)]
mod tests {
    use super::super::search::synthetic::{bowl, space, Synthetic};
    use super::*;
    use crate::autotune::space::Tunable;

    #[test]
    fn pattern_search_descends_to_the_minimum_with_few_evaluations() {
        let mut probe = Synthetic::new(bowl);
        pattern(&space(), &[0, 0], &mut probe);
        let found = probe.calls.iter().position(|at| bowl(at) == 1.0);
        let n = found.expect("the minimum") + 1;
        assert!(n < 12, "found after {n} of 24");
    }

    #[test]
    fn the_largest_feasible_start_escapes_a_local_minimum_at_the_default() {
        // (0, 0) beats all its neighbours, but every config with a >= 2 slopes down to the
        // global minimum at (7, 2), which a constraint rules out: the second start must be
        // the highest feasible config by relative position, (6, 2), not (7, 1).
        let space = space().constraint(|c| match (c.get("a"), c.get("b")) {
            (Some(7), Some(2)) => Err("too big".into()),
            _ => Ok(()),
        });
        let mut probe = Synthetic::new(|at| match at {
            [7, 2] => f64::NAN,
            [0 | 1, b] => 1.0 + (at[0] + b) as f64,
            [a, b] => 0.5 + 0.1 * ((7 - a) + (2 - b)) as f64,
            _ => f64::NAN,
        });
        pattern(&space, &[0, 0], &mut probe);
        assert_eq!(probe.calls[1], vec![6, 2]);
        assert_eq!(probe.best(), 0.6);
    }

    #[test]
    fn combined_and_pattern_moves_cross_a_big_space_in_few_evaluations() {
        // 512 configs, a bowl around (5, 5, 5), and a slow largest config: the walk from
        // (0, 0, 0) must go diagonally and keep going, not one tunable and one step a time.
        let space = Space::new(
            ["a", "b", "c"]
                .map(|n| Tunable::new(n, (0..8).collect::<Vec<i64>>()))
                .to_vec(),
        );
        let mut probe = Synthetic::new(|at| match at {
            [7, 7, 7] => 100.0,
            _ => 1.0 + at.iter().map(|&i| (i as f64 - 5.0).powi(2)).sum::<f64>(),
        });
        pattern(&space, &[0, 0, 0], &mut probe);
        assert_eq!(probe.best(), 1.0);
        assert!(probe.evaluated() <= 20, "{} evaluations", probe.evaluated());
    }

    #[test]
    fn near_ties_are_rematched_before_a_move() {
        // By the scores, a = 1 looks 5% faster than the start a = 0 and a = 2 another 5%;
        // in truth every step up is 5% slower. Rematches must stop the walk at the start.
        let slope = |at: &[usize]| 1.0 - 0.05 * at[0] as f64;
        let mut probe = Synthetic::new(move |at| if at[0] == 7 { 9.0 } else { slope(at) });
        probe.truth = Some(Box::new(|at| 1.0 + 0.05 * at[0] as f64));
        pattern(&space(), &[0, 1], &mut probe);
        assert!(probe.rematches > 0);
        assert!(!probe.calls.contains(&vec![2, 1]), "{:?}", probe.calls);
        // The same scores with rematches that agree: the walk follows them.
        let mut probe = Synthetic::new(move |at| if at[0] == 7 { 9.0 } else { slope(at) });
        pattern(&space(), &[0, 1], &mut probe);
        assert!(probe.calls.contains(&vec![6, 1]), "{:?}", probe.calls);
    }

    #[test]
    fn pattern_search_steps_over_invalid_candidates() {
        // Only a in {0, 6} is valid: the walk must jump the invalid middle to reach 6.
        let mut probe = Synthetic::new(|at| match at[0] {
            0 => 5.0,
            6 => 1.0,
            _ => f64::NAN,
        });
        pattern(&space(), &[0, 1], &mut probe);
        assert_eq!(probe.best(), 1.0);
    }

    #[test]
    fn pattern_search_stops_when_a_budget_runs_out() {
        let mut probe = Synthetic::new(bowl);
        probe.stop_at = 4;
        pattern(&space(), &[0, 0], &mut probe);
        assert_eq!(probe.calls.len(), 4);
    }
}
