//! Default vs tuned configs of matmul and softmax at several shapes on the CPU plugin, and
//! how many evaluations each search strategy needs on the matmul space.
//!
//! Tuning (exhaustive, so "tuned" is the best the space offers) happens once per case before
//! criterion times anything; results are cached under the temp dir like any tuning run.
//! The strategy comparison scores every config by its time in the exhaustive run, so noise
//! between runs does not decide whether a strategy "got within 5%".

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::Duration;
use tessera::lowering::stablehlo::Form;
use tessera::lowering::DType;
use tessera::runtime::autotune::{tune, Config, Strategy, TunableKernel, TuneOptions, TuneReport};
use tessera::runtime::{compile_program, Buffer, Device, Executable};
use tessera::tuning::{self, KernelTuning};

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

fn tuned(kernel: &KernelTuning, device: &Device, strategy: Strategy, retune: bool) -> TuneReport {
    let options = TuneOptions {
        strategy,
        retune,
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
    let report = tuned(&kernel, device, Strategy::Exhaustive, false);
    let inputs = kernel
        .inputs(0)
        .iter()
        .map(|t| client.upload(t).expect("upload"))
        .collect();
    let exe = |c: &Config| {
        compile_program(&kernel.program(c).expect("trace"), device, Form::Auto).expect("compile")
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
/// medians (>= 1 means tuned is at least as fast).
fn side_by_side(_: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin");
    println!("\ndefault vs tuned, interleaved medians of 200 runs each:");
    for (kernel_name, shape) in CASES {
        let Prepared {
            report,
            inputs,
            exes,
        } = prepare(&device, kernel_name, shape);
        let refs: Vec<&Buffer> = inputs.iter().collect();
        let mut times = [Vec::new(), Vec::new()];
        for _ in 0..200 {
            for (e, t) in exes.iter().zip(&mut times) {
                let start = std::time::Instant::now();
                e.execute_blocking(&refs).expect("run");
                t.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        let [d, t] = times.map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        });
        println!(
            "  {:<22} default {} {d:.3} ms, tuned {} {t:.3} ms: {:.2}x",
            name(kernel_name, shape),
            report.default_config,
            report.config,
            d / t
        );
    }
}

/// Measured evaluations (configs that passed the constraints and ran; the unit of "the
/// space" too) until a strategy first measured a config within 5% of the exhaustive best
/// (by the exhaustive run's times), or `None` if it never did.
fn evals_to_within_5pct(report: &TuneReport, exhaustive: &[(Config, f64)]) -> Option<usize> {
    let best = exhaustive
        .iter()
        .map(|(_, t)| *t)
        .fold(f64::INFINITY, f64::min);
    let time_of = |c: &Config| exhaustive.iter().find(|(e, _)| e == c).map(|(_, t)| *t);
    report
        .history
        .iter()
        .filter(|e| e.time().is_some())
        .position(|e| time_of(&e.config).is_some_and(|t| t <= best * 1.05))
        .map(|i| i + 1)
}

fn strategies(_: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin");
    println!("\nstrategies on the matmul space (evaluations to reach within 5% of the exhaustive best; feasible = configs passing the constraints that ran correctly):");
    for shape in [&[256, 256, 256][..], &[512, 512, 512], &[128, 1024, 256]] {
        let kernel = tuning::for_kernel("matmul", shape, DType::F32).expect("space");
        let exhaustive = tuned(&kernel, &device, Strategy::Exhaustive, true);
        let times: Vec<(Config, f64)> = exhaustive
            .history
            .iter()
            .filter_map(|e| Some((e.config.clone(), e.time()?.as_secs_f64())))
            .collect();
        let feasible = times.len();
        let best_ms = exhaustive
            .best_time
            .map_or(f64::NAN, |t| t.as_secs_f64() * 1e3);
        println!("  matmul {shape:?}: {} configs, {feasible} feasible, exhaustive best {} at {best_ms:.3} ms", exhaustive.space_size, exhaustive.config);
        for strategy in [Strategy::PatternSearch, Strategy::Random { seed: 1 }] {
            let report = tuned(&kernel, &device, strategy, true);
            let needed = evals_to_within_5pct(&report, &times);
            let reached = needed.map_or("never".to_string(), |n| {
                format!(
                    "{n} ({:.0}% of feasible)",
                    100.0 * n as f64 / feasible as f64
                )
            });
            println!(
                "    {strategy:<16} within 5% after {reached}; ran {} evaluations, picked {}",
                report.evaluated, report.config
            );
        }
    }
}

criterion_group!(benches, default_vs_tuned, side_by_side, strategies);
criterion_main!(benches);
