//! After the search: the finalists and the default timed again side by side, and the winner
//! picked from those times only if it beats the default beyond noise.

use super::measure::{clean_runs, median, undisturbed, Bench};
use super::report::TuneReport;
use super::space::Config;
use super::tuner::{build, TunableKernel};
use super::TuneError;
use crate::device::Device;
use crate::executable::Executable;
use crate::launch::compile_program;
use std::time::Duration;
use tessera_lowering::stablehlo::Form;

/// How much faster than the default (as a fraction of its time) a finalist's confirmed
/// median must be to replace it: closer than this is within run-to-run noise on a CPU.
const CONFIRM_MARGIN: f64 = 0.02;
/// The fraction of paired undisturbed rounds a finalist must win against the default.
const CONFIRM_WINS: f64 = 0.75;
/// The fraction of the rounds that must pair two undisturbed runs for a verdict: on a
/// machine busier than that the comparison says nothing, and the default stays.
const MIN_CLEAN: f64 = 1.0 / 3.0;

/// Re-times the fastest `top` configs and the default, interleaved, and sets the report's
/// winner and both times from that (see `Measure::confirm`, `beats`).
pub(crate) fn confirm(
    kernel: &dyn TunableKernel,
    device: &Device,
    form: Form,
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
            Ok(compile_program(&program, device, form)?)
        })
        .collect::<Result<Vec<_>, TuneError>>()?;
    let rounds: Vec<Rounds> = bench
        .interleaved(&exes.iter().map(|e| e.as_ref()).collect::<Vec<_>>())?
        .into_iter()
        .map(Rounds::new)
        .collect();
    let Some(default) = rounds.first() else {
        return Ok(());
    };
    report.default_time = Some(default.time());
    report.best_time = Some(default.time());
    // The fastest challenger wins only if it clearly beats the default in this same
    // interleaved measurement and again in a rematch of the two alone; otherwise the default
    // stays, so the tuned config is never slower than the default by the tuner's own
    // confirmation. The rematch is for loaded machines: a burst of load there once let one
    // of three copies of the default's own program beat it by 11% in 23 of 30 rounds (the
    // best of three challengers is a fluke's best chance); a real gain wins both.
    let challenger = finalists
        .into_iter()
        .zip(&rounds)
        .enumerate()
        .skip(1)
        .min_by_key(|(_, (_, r))| r.time());
    if let Some((i, (config, times))) = challenger {
        if beats(times, default) && rematch(bench, exes[0].as_ref(), exes[i].as_ref())? {
            report.config = config;
            report.best_time = Some(times.time());
        }
    }
    Ok(())
}

/// Whether `challenger` beats `default` again, timed interleaved with it alone.
fn rematch(
    bench: &Bench,
    default: &Executable,
    challenger: &Executable,
) -> Result<bool, TuneError> {
    let mut rounds = bench
        .interleaved(&[default, challenger])?
        .into_iter()
        .map(Rounds::new);
    Ok(match (rounds.next(), rounds.next()) {
        (Some(d), Some(c)) => beats(&c, &d),
        _ => false,
    })
}

/// One config's times in interleaved rounds, in round order, and which runs were undisturbed.
pub(crate) struct Rounds {
    times: Vec<Duration>,
    clean: Vec<bool>,
}

impl Rounds {
    pub(crate) fn new(times: Vec<Duration>) -> Rounds {
        // Disturbed runs fall on either config at random, so on a loaded machine they would
        // turn the paired wins of a config twice as fast as the default into a coin toss.
        let clean = clean_runs(&times);
        Rounds { times, clean }
    }

    /// The median of the undisturbed runs.
    pub(crate) fn time(&self) -> Duration {
        median(undisturbed(&self.times))
    }
}

/// Whether a challenger beats the default beyond noise: its median is `CONFIRM_MARGIN`
/// lower, and it was faster in `CONFIRM_WINS` of the rounds where neither run was disturbed
/// (at least `MIN_CLEAN` of them). On a loaded machine identical programs differ by tens
/// of percent between medians; the paired rounds share the load, so the majority test
/// rejects such flukes, and dropping disturbed runs keeps it from rejecting real gains.
fn beats(challenger: &Rounds, default: &Rounds) -> bool {
    let paired: Vec<bool> = (0..challenger.times.len().min(default.times.len()))
        .filter(|&r| challenger.clean[r] && default.clean[r])
        .map(|r| challenger.times[r] < default.times[r])
        .collect();
    let wins = paired.iter().filter(|w| **w).count();
    let enough = paired.len() as f64 >= MIN_CLEAN * default.times.len() as f64;
    challenger.time().as_secs_f64() < default.time().as_secs_f64() * (1.0 - CONFIRM_MARGIN)
        && enough
        && wins as f64 >= CONFIRM_WINS * paired.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(ms: &[u64]) -> Rounds {
        Rounds::new(ms.iter().map(|&t| Duration::from_millis(t)).collect())
    }

    #[test]
    fn a_finalist_must_beat_the_default_by_median_and_in_most_rounds() {
        let default = rounds(&[10, 10, 10, 10]);
        assert!(beats(&rounds(&[8, 8, 8, 11]), &default));
        // Faster by median but in only 3 of 5 rounds: noise.
        let lucky = rounds(&[70, 70, 70, 100, 100]);
        assert!(!beats(&lucky, &rounds(&[90, 90, 90, 90, 90])));
        // Faster in every round but by less than the margin.
        let close = rounds(&[9990, 9990, 9990, 9990]);
        assert!(!beats(&close, &rounds(&[10000, 10000, 10000, 10000])));
    }

    #[test]
    fn disturbed_runs_neither_hide_a_real_gain_nor_decide_alone() {
        // Twice as fast in every undisturbed round; the default's fast rounds are the ones
        // where the challenger was preempted (30 ms), and the other way round.
        let default = rounds(&[10, 40, 10, 10, 40, 10, 10, 10]);
        let challenger = rounds(&[30, 5, 30, 5, 5, 30, 5, 5]);
        assert!(beats(&challenger, &default));
        // Undisturbed in too few rounds to tell: the default stays.
        let busy = rounds(&[5, 30, 30, 30, 30, 30, 30, 5]);
        assert!(!beats(&busy, &rounds(&[10, 10, 40, 40, 40, 40, 40, 40])));
    }
}
