//! Default vs tuned configs of matmul and softmax at several shapes on the CPU plugin, and
//! how many evaluations each search strategy needs on the matmul space.
//!
//! Everything is compiled in the grid-loop form ([`FORM`]): one step per grid point, as a
//! TPU runs the kernel. In the `Auto` form the CPU plugin gets one contraction (matmul) or
//! one whole-array body (softmax) whatever the blocks, so every config is the same program
//! and there is nothing to tune there.
//!
//! Tuning (exhaustive, so "tuned" is the best the space offers) happens once per case before
//! criterion times anything; results are cached under the temp dir like any tuning run.
//! The strategy comparison judges each strategy's pick against the exhaustive search's
//! best configs timed side by side with it (interleaved runs), so noise between separate
//! measurements does not decide whether a strategy "got within 5%".

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::Duration;
use tessera::lowering::stablehlo::Form;
use tessera::lowering::DType;
use tessera::runtime::autotune::{tune, Config, Strategy, TunableKernel, TuneOptions, TuneReport};
use tessera::runtime::{compile_program, Buffer, Device, Executable};
use tessera::tuning::{self, KernelTuning};

/// The StableHLO form every candidate is compiled in (see the module docs).
const FORM: Form = Form::GridLoop;

const CASES: [(&str, &[usize]); 6] = [
    ("matmul", &[256, 256, 256]),
    ("matmul", &[512, 512, 512]),
    ("matmul", &[128, 1024, 256]),
    ("softmax", &[512, 1024]),
    ("softmax", &[1024, 1024]),
    ("softmax", &[256, 4096]),
];

fn cache_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("tessera-bench-autotune")
}

fn tuned(
    kernel: &KernelTuning,
    device: &Device,
    strategy: Strategy,
    max_evals: Option<usize>,
    retune: bool,
) -> TuneReport {
    let options = TuneOptions {
        strategy,
        max_evals,
        retune,
        form: FORM,
        ..TuneOptions::new(cache_dir())
    };
    tune(kernel, device, &options, &mut |_| {}).expect("tuning")
}

fn name(kernel: &str, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{kernel}/{}", dims.join("x"))
}

/// One bench case, tuned (a cache hit after the first time) and ready to run: inputs on the
/// device and the default and tuned programs compiled.
struct Prepared {
    report: TuneReport,
    inputs: Vec<Buffer>,
    /// [default, tuned]
    exes: [Arc<Executable>; 2],
}

fn prepare(device: &Device, kernel_name: &str, shape: &[usize]) -> Prepared {
    let client = device.client().expect("client");
    let kernel = tuning::for_kernel(kernel_name, shape, DType::F32).expect("space");
    let report = tuned(&kernel, device, Strategy::Exhaustive, None, false);
    let inputs = kernel
        .inputs(0)
        .iter()
        .map(|t| client.upload(t).expect("upload"))
        .collect();
    let exe = |c: &Config| {
        compile_program(&kernel.program(c).expect("trace"), device, FORM).expect("compile")
    };
    let exes = [exe(&report.default_config), exe(&report.config)];
    Prepared {
        report,
        inputs,
        exes,
    }
}

fn default_vs_tuned(c: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin");
    for (kernel_name, shape) in CASES {
        let p = prepare(&device, kernel_name, shape);
        let refs: Vec<&Buffer> = p.inputs.iter().collect();
        let mut group = c.benchmark_group(name(kernel_name, shape));
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        let labelled = [
            ("default", &p.report.default_config),
            ("tuned", &p.report.config),
        ];
        for ((label, config), exe) in labelled.into_iter().zip(&p.exes) {
            group.bench_function(format!("{label} {config}"), |b| {
                b.iter(|| exe.execute_blocking(&refs).expect("run"))
            });
        }
        group.finish();
    }
}

/// Criterion times default and tuned one after the other, so load on a shared machine can
/// favour either; this pass alternates them run by run and prints default/tuned of the
/// medians and of the fastest runs (>= 1 means tuned is at least as fast).
fn side_by_side(_: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin");
    println!("\ndefault vs tuned, {ROUNDS} interleaved runs each (median ms; default/tuned by median and by fastest run; {}):", load());
    for (kernel_name, shape) in CASES {
        let Prepared {
            report,
            inputs,
            exes,
        } = prepare(&device, kernel_name, shape);
        let times = interleaved(&exes, &inputs);
        let (d, t) = (&times[0], &times[1]);
        println!(
            "  {:<22} default {} {:.3} ms, tuned {} {:.3} ms: {:.2}x, {:.2}x",
            name(kernel_name, shape),
            report.default_config,
            d.median,
            report.config,
            t.median,
            d.median / t.median,
            d.fastest / t.fastest
        );
    }
}

/// The machine's load average: timings on a shared machine mean little without it.
fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let one_minute = avg.split_whitespace().next().unwrap_or("?");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("load average {one_minute} on {cores} cores")
}

/// Runs per executable in a side-by-side timing.
const ROUNDS: usize = 200;

/// Milliseconds of one executable's runs in a side-by-side timing.
struct Times {
    fastest: f64,
    median: f64,
}

/// Each of `exes` run in turn `ROUNDS` times, so every exe sees the same load. Both the
/// median and the fastest run: on a loaded machine, other work adds to many runs and pulls
/// medians towards each other, while the fastest runs are the undisturbed ones.
fn interleaved(exes: &[Arc<Executable>], inputs: &[Buffer]) -> Vec<Times> {
    let refs: Vec<&Buffer> = inputs.iter().collect();
    let mut times = vec![Vec::new(); exes.len()];
    for round in 0..ROUNDS {
        // Rotate who runs first: the run after another exe's is not free.
        for i in (0..exes.len()).map(|i| (i + round) % exes.len()) {
            let start = std::time::Instant::now();
            exes[i].execute_blocking(&refs).expect("run");
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    times
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            Times {
                fastest: v[0],
                median: v[v.len() / 2],
            }
        })
        .collect()
}

/// Evaluations (measured configs, the default included) until a strategy first measured a
/// config within 5% of the exhaustive best by the exhaustive run's scores, or `None`.
fn evals_to_within_5pct(report: &TuneReport, exhaustive: &TuneReport) -> Option<usize> {
    let ranked = exhaustive.ranked();
    let best = ranked.first()?.1.as_secs_f64();
    let score = |c: &Config| {
        ranked
            .iter()
            .find(|(e, _)| *e == c)
            .map(|(_, t)| t.as_secs_f64())
    };
    report
        .history
        .iter()
        .filter(|e| e.time().is_some())
        .position(|e| score(&e.config).is_some_and(|t| t <= best * 1.05))
        .map(|i| i + 1)
}

/// For each matmul shape: the exhaustive search's table, then pattern search (unbounded,
/// and with a budget of a quarter of the feasible configs) and random search (same budget).
/// A strategy's quality is its pick's time over the fastest of the exhaustive search's top
/// three, all timed side by side in one interleaved run.
fn strategies(_: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin");
    let client = device.client().expect("client");
    println!("\nstrategies on the matmul space (evals: configs measured, default included; feasible: configs passing the constraints; picked/best: the pick against the best of the exhaustive top 3, timed side by side, {ROUNDS} interleaved runs each; {}):", load());
    for shape in [&[256, 256, 256][..], &[512, 512, 512], &[128, 1024, 256]] {
        let kernel = tuning::for_kernel("matmul", shape, DType::F32).expect("space");
        let exhaustive = tuned(&kernel, &device, Strategy::Exhaustive, None, true);
        let feasible = exhaustive.space_size;
        print_table(shape, &exhaustive);
        let quarter = feasible / 4;
        let runs: Vec<(String, TuneReport)> = [
            (Strategy::PatternSearch, None),
            (Strategy::PatternSearch, Some(quarter)),
            (Strategy::Random { seed: 1 }, Some(quarter)),
        ]
        .into_iter()
        .map(|(strategy, budget)| {
            let label = budget.map_or(format!("{strategy}"), |b| format!("{strategy}, budget {b}"));
            (label, tuned(&kernel, &device, strategy, budget, true))
        })
        .collect();
        // The exhaustive top three, then each strategy's pick.
        let mut configs: Vec<Config> = exhaustive
            .ranked()
            .into_iter()
            .take(3)
            .map(|(c, _)| c.clone())
            .collect();
        let top = configs.len();
        configs.extend(runs.iter().map(|(_, r)| r.config.clone()));
        let exes: Vec<Arc<Executable>> = configs
            .iter()
            .map(|c| {
                compile_program(&kernel.program(c).expect("trace"), &device, FORM).expect("compile")
            })
            .collect();
        let inputs: Vec<Buffer> = kernel
            .inputs(0)
            .iter()
            .map(|t| client.upload(t).expect("upload"))
            .collect();
        let times = interleaved(&exes, &inputs);
        let best = |f: fn(&Times) -> f64| times[..top].iter().map(f).fold(f64::INFINITY, f64::min);
        let (best_fastest, best_median) = (best(|t| t.fastest), best(|t| t.median));
        for ((label, report), t) in runs.iter().zip(&times[top..]) {
            let pct = |n: usize| 100.0 * n as f64 / feasible as f64;
            let reached = evals_to_within_5pct(report, &exhaustive)
                .map_or("never".to_string(), |n| format!("{n} ({:.0}%)", pct(n)));
            println!(
                "    {label:<26} {} evals ({:.0}% of {feasible}); within 5% by exhaustive scores after {reached}; picked {}: picked/best {:.3} by fastest run, {:.3} by median",
                report.evaluated,
                pct(report.evaluated),
                report.config,
                t.fastest / best_fastest,
                t.median / best_median
            );
        }
    }
}

/// The exhaustive search's scores (median undisturbed run per config), best first; the default marked.
fn print_table(shape: &[usize], exhaustive: &TuneReport) {
    let ranked = exhaustive.ranked();
    let best = ranked.first().map_or(f64::NAN, |(_, t)| t.as_secs_f64());
    println!(
        "  matmul {shape:?}: {} feasible configs, exhaustive picked {}; its scores:",
        exhaustive.space_size, exhaustive.config
    );
    for (i, (config, t)) in ranked.iter().enumerate() {
        let t = t.as_secs_f64();
        let default = *config == &exhaustive.default_config;
        if i < 8 || default {
            println!(
                "    {:>3}. {:<22} {:.3} ms  {:.2}x best{}",
                i + 1,
                config.to_string(),
                t * 1e3,
                t / best,
                if default { "  (default)" } else { "" }
            );
        }
    }
}

/// A repeated `tune` of a cached kernel/shape: the whole call (space, default trace, key,
/// file read), which is all the tuning work a cached launch pays.
fn cache_hit(c: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin");
    let kernel = tuning::for_kernel("matmul", &[512, 512, 512], DType::F32).expect("space");
    let first = tuned(&kernel, &device, Strategy::PatternSearch, None, false);
    let options = TuneOptions {
        form: FORM,
        ..TuneOptions::new(cache_dir())
    };
    c.bench_function("cache hit/matmul 512x512x512", |b| {
        b.iter(|| {
            let report = tune(&kernel, &device, &options, &mut |_| {}).expect("tune");
            assert!(report.cache_hit() && report.config == first.config);
        })
    });
}

criterion_group!(
    benches,
    default_vs_tuned,
    side_by_side,
    strategies,
    cache_hit
);
criterion_main!(benches);
