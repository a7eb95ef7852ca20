//! One search's measuring side: constraints, budgets, memo, output checks, timing, and the
//! report's history, behind the [`Probe`] the strategies call.

use super::confirm::Rounds;
use super::measure::{max_rel_err, Bench};
use super::report::{Evaluation, Outcome, Progress, TuneReport};
use super::search::{Probe, Verdict};
use super::space::{Config, Space};
use super::tuner::{build, TunableKernel};
use crate::device::Device;
use crate::launch::compile_program;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tessera_lowering::stablehlo::Form;
use tessera_lowering::HostTensor;

/// One search's state: what is measured against what, and what was seen.
pub(crate) struct Session<'a> {
    pub kernel: &'a dyn TunableKernel,
    pub device: &'a Device,
    pub form: Form,
    pub space: &'a Space,
    pub bench: &'a Bench,
    /// The default config's outputs, which every candidate's must match.
    pub reference: &'a [HostTensor],
    pub report: &'a mut TuneReport,
    pub memo: HashMap<Vec<usize>, Verdict>,
    /// Most evaluations, most search time, and when tuning started.
    pub limits: (Option<usize>, Option<Duration>, Instant),
    /// Most configs this search can measure (for the progress callback).
    pub planned: usize,
    pub progress: &'a mut dyn FnMut(&Progress),
}

impl Probe for Session<'_> {
    fn eval(&mut self, at: &[usize]) -> Verdict {
        if let Some(v) = self.memo.get(at) {
            return *v;
        }
        let (max_evals, _, _) = self.limits;
        if max_evals.is_some_and(|m| self.report.evaluated >= m) || self.out_of_time() {
            return Verdict::Stop;
        }
        let config = self.space.config_at(at);
        if let Err(reason) = self.space.check(&config) {
            self.report.skipped.push((config, reason));
            self.memo.insert(at.to_vec(), Verdict::Invalid);
            return Verdict::Invalid;
        }
        let outcome = self.measure(&config);
        self.record(at.to_vec(), Evaluation { config, outcome })
    }

    /// The median of the undisturbed runs of each, from `3 * reps` interleaved rounds (as in
    /// the final confirmation). Not an evaluation: both configs were measured before, and
    /// their executables come from the compile cache.
    fn rematch(&mut self, incumbent: &[usize], challenger: &[usize]) -> Option<f64> {
        if self.out_of_time() {
            return None;
        }
        let exes = [incumbent, challenger]
            .iter()
            .map(|at| {
                let program = build(self.kernel, &self.space.config_at(at)).ok()?;
                compile_program(&program, self.device, self.form).ok()
            })
            .collect::<Option<Vec<_>>>()?;
        let [a, b] = &exes[..] else { return None };
        let rounds = self.bench.interleaved(&[a, b]).ok()?;
        let [a, b] = &rounds[..] else { return None };
        let [a, b] = [a, b].map(|r| Rounds::new(r.clone()).time().as_secs_f64());
        Some(b / a.max(f64::MIN_POSITIVE))
    }
}

impl Session<'_> {
    fn out_of_time(&self) -> bool {
        let (_, max_time, start) = self.limits;
        max_time.is_some_and(|t| start.elapsed() >= t)
    }

    /// Adds a measured config to the report and the memo; its verdict.
    pub fn record(&mut self, at: Vec<usize>, evaluation: Evaluation) -> Verdict {
        let verdict = evaluation
            .time()
            .map_or(Verdict::Invalid, |t| Verdict::Score(t.as_secs_f64()));
        self.memo.insert(at, verdict);
        self.report.evaluated += 1;
        (self.progress)(&Progress {
            evaluation: &evaluation,
            evaluated: self.report.evaluated,
            planned: self.planned,
        });
        self.report.history.push(evaluation);
        verdict
    }

    fn measure(&self, config: &Config) -> Outcome {
        let program = match build(self.kernel, config) {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(e),
        };
        let exe = match compile_program(&program, self.device, self.form) {
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
