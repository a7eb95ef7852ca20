//! `tessera bench eager [--json]`: the eager workloads (transformer block forward at three
//! sizes, a 50-op pointwise chain, an MLP training step) in Strict, Debug, DeferAndFuse and
//! Compiled, in one process, on the same inputs; medians after warm-up. Plus the host
//! overhead of one cached Strict op call (wall time less the time inside PJRT's execute).

use super::CliError;
use clap::{Args, Subcommand};
use std::time::Instant;
use tessera_eager::workloads::{pointwise_chain, random, Block, Mlp};
use tessera_eager::{compile, reset_stats, stats, sync, EagerMode, ModeGuard, Tensor};
use tessera_lowering::DType;

#[derive(Subcommand)]
pub enum BenchAction {
    /// The eager runtime's modes side by side.
    Eager(EagerArgs),
}

#[derive(Args)]
pub struct EagerArgs {
    /// One JSON object per line: {"case","strict_ms","debug_ms","defer_ms","compiled_ms","defer_speedup"}.
    #[arg(long)]
    json: bool,
    /// Timed runs per case and mode (after 3 warm-up runs).
    #[arg(long, default_value_t = 15)]
    iters: usize,
}

pub fn run(action: BenchAction) -> Result<(), CliError> {
    match action {
        BenchAction::Eager(a) => eager(&a).map_err(|e| CliError::Usage(e.to_string())),
    }
}

type Case<'a> = Box<dyn FnMut() -> tessera_eager::Result<Tensor> + 'a>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run_case(cell: &std::cell::RefCell<&mut Case>) -> tessera_eager::Result<Tensor> {
    let mut f = cell.borrow_mut();
    (*f)()
}

/// One run of `f` in `mode`, its result computed (waited for); milliseconds.
fn once(
    mode: EagerMode,
    f: &mut Case,
    compiled: &mut Option<Box<dyn FnMut() -> tessera_eager::Result<Tensor> + '_>>,
) -> tessera_eager::Result<f64> {
    let start = Instant::now();
    if mode == EagerMode::Compiled {
        let c = compiled
            .as_mut()
            .expect("a compiled function for the Compiled mode");
        c()?.wait()?;
    } else {
        let _g = ModeGuard::new(mode)?;
        let out = f()?;
        sync()?;
        out.wait()?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// Per mode: the median and the fastest milliseconds of a run, and the programs launched and
/// compiled per timed run. The modes take turns run by run, so a change in the machine's load hits all
/// of them alike (this machine is shared).
fn time_modes(case: &mut Case, iters: usize) -> tessera_eager::Result<[(f64, f64, f64, u64); 4]> {
    let cell = std::cell::RefCell::new(case);
    let mut traced = compile(|_: &[Tensor]| Ok(vec![run_case(&cell)?]));
    let mut compiled: Option<Box<dyn FnMut() -> tessera_eager::Result<Tensor> + '_>> =
        Some(Box::new(move || Ok(traced.call(&[])?.remove(0))));
    let mut samples = [(); 4].map(|_| Vec::with_capacity(iters));
    let mut counts = [(0u64, 0u64); 4];
    for i in 0..iters + 3 {
        for (k, m) in EagerMode::ALL.into_iter().enumerate() {
            reset_stats();
            let mut plain: Case = Box::new(|| run_case(&cell));
            let ms = once(m, &mut plain, &mut compiled)?;
            if i >= 3 {
                samples[k].push(ms);
                let s = stats().mode(m).clone();
                counts[k].0 += s.launches;
                counts[k].1 += s.compiles;
            }
        }
    }
    let mut out = [(0.0, 0.0, 0.0, 0); 4];
    for k in 0..4 {
        let fastest = samples[k].iter().copied().fold(f64::INFINITY, f64::min);
        out[k] = (
            median(std::mem::take(&mut samples[k])),
            fastest,
            counts[k].0 as f64 / iters as f64,
            counts[k].1,
        );
    }
    Ok(out)
}

fn eager(a: &EagerArgs) -> tessera_eager::Result<()> {
    let f = DType::F32;
    let mut cases: Vec<(String, Case)> = Vec::new();
    for (s, d) in [(64usize, 128usize), (128, 256), (256, 512)] {
        let block = Block::new(d, 4, 7, f)?;
        let x = random(f, 11, &[s, d], 1.0)?;
        cases.push((
            format!("block_s{s}_d{d}"),
            Box::new(move || block.forward(&x)),
        ));
    }
    let (x, y) = (
        random(f, 21, &[256, 256], 1.0)?,
        random(f, 22, &[256, 256], 1.0)?,
    );
    cases.push((
        "pointwise_chain_50".into(),
        Box::new(move || pointwise_chain(&x, &y, 50)),
    ));
    let mlp = Mlp::new(256, 512, 64, 31, f)?;
    let (x, t) = (
        random(f, 32, &[128, 256], 1.0)?,
        random(f, 33, &[128, 64], 1.0)?,
    );
    let mut step = 0usize;
    cases.push((
        "mlp_train_step".into(),
        Box::new(move || {
            step += 1;
            // A learning rate that changes every step, as a schedule would.
            mlp.step(&x, &t, 1e-3 / (1.0 + 1e-3 * step as f64))
        }),
    ));
    if !a.json {
        println!(
            "{:<20} {:>10} {:>10} {:>10} {:>12} {:>8}",
            "case", "strict_ms", "debug_ms", "defer_ms", "compiled_ms", "defer_x"
        );
    }
    for (name, mut case) in cases {
        let timed = time_modes(&mut case, a.iters)?;
        let ms = timed.map(|t| t.0);
        let min = timed.map(|t| t.1);
        let programs = timed.map(|t| t.2);
        let compiles: u64 = timed.iter().map(|t| t.3).sum();
        let speedup = ms[0] / ms[2];
        if a.json {
            println!(
                "{{\"case\":\"{name}\",\"strict_ms\":{:.4},\"debug_ms\":{:.4},\"defer_ms\":{:.4},\"compiled_ms\":{:.4},\"defer_speedup\":{:.3},\"strict_min_ms\":{:.4},\"defer_min_ms\":{:.4},\"compiled_min_ms\":{:.4},\"strict_programs\":{},\"defer_programs\":{},\"compiles_after_warmup\":{compiles}}}",
                ms[0], ms[1], ms[2], ms[3], speedup, min[0], min[2], min[3], programs[0], programs[2]
            );
        } else {
            println!(
                "{name:<20} {:>10.3} {:>10.3} {:>10.3} {:>12.3} {:>7.2}x  (fastest strict {:.3}, defer {:.3}; {} vs {} program(s) per run, {compiles} compile(s) after warm-up)",
                ms[0], ms[1], ms[2], ms[3], speedup, min[0], min[2], programs[0], programs[2]
            );
        }
    }
    op_overhead(a.json)
}

/// Host cost of a cached Strict op call: 20,000 adds of 4 elements, wall time less the time
/// inside PJRT's execute.
fn op_overhead(json: bool) -> tessera_eager::Result<()> {
    let _g = ModeGuard::new(EagerMode::Strict)?;
    let a = Tensor::from_f64(DType::F32, &[4], &[1., 2., 3., 4.])?;
    for _ in 0..100 {
        a.add(&a)?;
    }
    let n = 20_000;
    reset_stats();
    let start = Instant::now();
    let mut last = a.clone();
    for _ in 0..n {
        last = a.add(&a)?;
    }
    let wall = start.elapsed().as_secs_f64();
    last.wait()?;
    let exec = stats().mode(EagerMode::Strict).execute_nanos as f64 * 1e-9;
    let per = |s: f64| s / n as f64 * 1e6;
    if json {
        println!(
            "{{\"case\":\"strict_op_call\",\"call_us\":{:.3},\"execute_us\":{:.3},\"host_overhead_us\":{:.3}}}",
            per(wall),
            per(exec),
            per(wall - exec)
        );
    } else {
        println!(
            "strict op call: {:.2} us per call, {:.2} us in PJRT execute, {:.2} us host overhead",
            per(wall),
            per(exec),
            per(wall - exec)
        );
    }
    Ok(())
}
