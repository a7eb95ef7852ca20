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

/// Median milliseconds of one run of `f` in `mode`, result computed (waited for).
fn time(mode: EagerMode, f: &mut Case, iters: usize) -> tessera_eager::Result<f64> {
    let mut samples = Vec::with_capacity(iters);
    if mode == EagerMode::Compiled {
        let mut c = compile(|_: &[Tensor]| Ok(vec![f()?]));
        for i in 0..iters + 3 {
            let start = Instant::now();
            let out = c.call(&[])?;
            out[0].wait()?;
            if i >= 3 {
                samples.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
    } else {
        let _g = ModeGuard::new(mode)?;
        for i in 0..iters + 3 {
            let start = Instant::now();
            let out = f()?;
            sync()?;
            out.wait()?;
            if i >= 3 {
                samples.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    Ok(median(samples))
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
        let mut ms = [0.0; 4];
        for (i, m) in EagerMode::ALL.into_iter().enumerate() {
            ms[i] = time(m, &mut case, a.iters)?;
        }
        let speedup = ms[0] / ms[2];
        if a.json {
            println!(
                "{{\"case\":\"{name}\",\"strict_ms\":{:.4},\"debug_ms\":{:.4},\"defer_ms\":{:.4},\"compiled_ms\":{:.4},\"defer_speedup\":{:.3}}}",
                ms[0], ms[1], ms[2], ms[3], speedup
            );
        } else {
            println!(
                "{name:<20} {:>10.3} {:>10.3} {:>10.3} {:>12.3} {:>7.2}x",
                ms[0], ms[1], ms[2], ms[3], speedup
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
