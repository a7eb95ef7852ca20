//! A kernel's launch comes from the autotune cache where a tuning run stored a winner for the
//! problem (what kernel ops run with), else from the shipped launch rule.

use tessera_kernels::tuning::{self, launch_for};
use tessera_lowering::stablehlo::Form;
use tessera_lowering::DType;
use tessera_runtime::autotune::{tune, AutotuneMode, Source, Strategy, TuneOptions};
use tessera_runtime::Device;

#[test]
fn the_launch_is_the_cached_winner_once_one_is_stored() {
    // A cache folder not there yet, in a temporary directory removed when `temp` is dropped.
    let temp = tempfile::Builder::new()
        .prefix("tessera-tuned-launch-")
        .tempdir()
        .unwrap();
    let dir = temp.path().join("cache");
    let dev = Device::cpu().expect("CPU plugin");
    let kernel = tessera_kernels::find("matmul").unwrap();
    let shape = [64, 256, 128];
    // Nothing cached: the shipped launch's own blocks.
    let (_, before) = launch_for(kernel, &shape, DType::F32, &dev, Form::Auto, &dir).unwrap();
    let (default, source) = before.expect("matmul has tunables");
    assert_eq!(source, Source::Default);
    // A (small) tuning run stores a winner; the launch now uses it.
    let options = TuneOptions {
        strategy: Strategy::Exhaustive,
        max_evals: Some(4),
        mode: AutotuneMode::Full,
        ..TuneOptions::new(&dir)
    };
    let t = tuning::for_kernel("matmul", &shape, DType::F32).unwrap();
    let report = tune(&t, &dev, &options, &mut |_| {}).unwrap();
    assert_eq!(report.source, Source::Tuned);
    let (launch, after) = launch_for(kernel, &shape, DType::F32, &dev, Form::Auto, &dir).unwrap();
    let (config, source) = after.unwrap();
    assert_eq!(source, Source::Cache);
    assert_eq!(config, report.config);
    eprintln!("default {default}, tuned {config}");
    // The launch is the one of that config: it traces for the problem's inputs.
    let sig = vec![(DType::F32, vec![64, 128]), (DType::F32, vec![128, 256])];
    launch.trace_program(&sig).expect("traces");
}
