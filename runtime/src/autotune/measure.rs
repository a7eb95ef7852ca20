//! Timing one compiled candidate, and checking its outputs against the default config's.

use crate::buffer::Buffer;
use crate::error::Result;
use crate::executable::Executable;
use crate::Client;
use std::time::{Duration, Instant};
use tessera_lowering::HostTensor;

/// How each candidate is timed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measure {
    /// Untimed runs first (first-touch page faults, lazy thread pools).
    pub warmup: usize,
    /// Timed runs; a config's score is the median of its undisturbed runs (see
    /// [`DISTURBED`]). Other work on a shared machine only ever adds time to a run, in
    /// bursts of a few milliseconds: a plain median of 10 runs then varies by 20% to 100%
    /// between measurements and near-tied configs rank by luck; leaving out the runs that
    /// other work visibly slowed keeps the median's robustness without that noise.
    pub reps: usize,
    /// Distinct input sets, used in turn, so a candidate is not flattered by inputs that
    /// stay hot in cache from the previous run.
    pub input_sets: usize,
    /// After the search, the fastest `confirm` configs and the default are timed again,
    /// interleaved run by run for `3 * reps` rounds, and the winner is picked from those
    /// times: a config that looked fast because the machine was quiet during its turn does
    /// not win, and the default keeps its place unless something beats it by more than a
    /// noise margin (2% faster by median and in 3 of 4 paired rounds, runs disturbed by
    /// other work left out), so the tuned config is never slower than the default.
    pub confirm: usize,
}

impl Default for Measure {
    fn default() -> Measure {
        Measure {
            warmup: 2,
            reps: 10,
            input_sets: 3,
            confirm: 3,
        }
    }
}

/// The input sets of one tuning session, on the device once, shared by every candidate.
pub(crate) struct Bench {
    sets: Vec<Vec<Buffer>>,
    measure: Measure,
}

impl Bench {
    pub(crate) fn upload(
        client: &Client,
        sets: Vec<Vec<HostTensor>>,
        measure: Measure,
    ) -> Result<Bench> {
        let sets = sets
            .iter()
            .map(|set| {
                set.iter()
                    .map(|t| client.upload(t))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Bench { sets, measure })
    }

    fn run(&self, exe: &Executable, set: usize) -> Result<Vec<Buffer>> {
        let inputs: Vec<&Buffer> = self.sets[set % self.sets.len()].iter().collect();
        exe.execute_blocking(&inputs)
    }

    /// The outputs on the first input set (what candidates are compared on).
    pub(crate) fn outputs(&self, exe: &Executable) -> Result<Vec<HostTensor>> {
        self.run(exe, 0)?.iter().map(Buffer::to_host).collect()
    }

    /// The median undisturbed wall time of a run (launch to every output ready) after the
    /// warm-up, rotating the input sets: see `Measure::reps`.
    pub(crate) fn time(&self, exe: &Executable) -> Result<Duration> {
        for i in 0..self.measure.warmup {
            self.run(exe, i)?;
        }
        let times = (0..self.measure.reps.max(1))
            .map(|i| self.once(exe, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(median(undisturbed(&times)))
    }

    /// Times of `exes` measured in `3 * reps` interleaved rounds, per exe, in round order
    /// (for `Measure::confirm` and rematches of near-ties): round `r` of every exe ran back
    /// to back, so rounds pair up.
    pub(crate) fn interleaved(&self, exes: &[&Executable]) -> Result<Vec<Vec<Duration>>> {
        let mut times = vec![Vec::new(); exes.len()];
        for round in 0..3 * self.measure.reps.max(1) {
            // Rotate who runs first: running right after another exe (or first) is not
            // free, and a fixed order would hand that cost to the same config every round.
            for i in (0..exes.len()).map(|i| (i + round) % exes.len()) {
                times[i].push(self.once(exes[i], round)?);
            }
        }
        Ok(times)
    }

    fn once(&self, exe: &Executable, set: usize) -> Result<Duration> {
        let start = Instant::now();
        self.run(exe, set).map(|_| start.elapsed())
    }
}

/// A run slower than this multiple of its config's fastest run was disturbed: other work
/// took the core (a preemption costs whole milliseconds, more than most runs).
pub(crate) const DISTURBED: f64 = 1.5;

/// Whether each of `times` was undisturbed (within [`DISTURBED`] of the fastest).
pub(crate) fn clean_runs(times: &[Duration]) -> Vec<bool> {
    let fastest = times.iter().min().copied().unwrap_or_default();
    times
        .iter()
        .map(|t| t.as_secs_f64() <= fastest.as_secs_f64() * DISTURBED)
        .collect()
}

/// The undisturbed runs of `times`.
pub(crate) fn undisturbed(times: &[Duration]) -> Vec<Duration> {
    times
        .iter()
        .zip(clean_runs(times))
        .filter_map(|(t, c)| c.then_some(*t))
        .collect()
}

pub(crate) fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// The largest `|got - want| / max(1, |want|)` over every element of every output (NaN
/// where the other is not counts as infinite); `Err` when the outputs do not line up.
pub fn max_rel_err(got: &[HostTensor], want: &[HostTensor]) -> std::result::Result<f64, String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} output(s), the default config gives {}",
            got.len(),
            want.len()
        ));
    }
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.shape() != w.shape() || g.dtype() != w.dtype() {
            return Err(format!(
                "output {i} is {}{:?}, the default config's is {}{:?}",
                g.dtype(),
                g.shape(),
                w.dtype(),
                w.shape()
            ));
        }
        for (a, b) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()) {
            let err = if a.is_nan() || b.is_nan() {
                if a.is_nan() && b.is_nan() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (a - b).abs() / b.abs().max(1.0)
            };
            worst = worst.max(err);
        }
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_error_is_scaled_and_counts_nan() {
        let t = |v: Vec<f32>| HostTensor::from_vec(vec![v.len()], v);
        assert_eq!(
            max_rel_err(&[t(vec![1.0, 4.0])], &[t(vec![1.0, 2.0])]),
            Ok(1.0)
        );
        assert_eq!(
            max_rel_err(&[t(vec![f32::NAN])], &[t(vec![0.0])]),
            Ok(f64::INFINITY)
        );
        assert!(max_rel_err(&[t(vec![1.0])], &[t(vec![1.0, 2.0])]).is_err());
    }
}
