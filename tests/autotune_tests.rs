//! The autotuner end to end on the CPU plugin: cache hits, corrupt and foreign cache files,
//! wrong and failing candidates, constraints, and `TESSERA_AUTOTUNE` modes.
//! Each test has its own cache folder, passed explicitly (no env races between tests).

use std::path::PathBuf;
use tessera::tuning;
use tessera_kernels::matmul::matmul;
use tessera_lowering::mosaic::TpuGeneration;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::autotune::{
    tune, AutotuneMode, Config, Measure, Outcome, Source, Space, Strategy, Tunable, TunableKernel,
    TuneOptions, TuneReport,
};
use tessera_runtime::Device;

/// A cache folder that does not exist yet, inside a temporary directory removed when the
/// returned [`tempfile::TempDir`] is dropped (also when the test fails).
fn cache_dir(test: &str) -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::Builder::new()
        .prefix(&format!("tessera-autotune-{test}-"))
        .tempdir()
        .expect("temp dir");
    let dir = temp.path().join("cache");
    (temp, dir)
}

/// Exhaustive with few, short runs: the spaces here are tiny and the machine small.
fn options(dir: &PathBuf) -> TuneOptions {
    TuneOptions {
        strategy: Strategy::Exhaustive,
        measure: Measure {
            warmup: 1,
            reps: 3,
            input_sets: 2,
            confirm: 2,
        },
        ..TuneOptions::new(dir)
    }
}

fn run(kernel: &dyn TunableKernel, options: &TuneOptions) -> TuneReport {
    tune(
        kernel,
        &Device::cpu().expect("CPU plugin"),
        options,
        &mut |_| {},
    )
    .expect("tune")
}

/// Matmul 128^3: bm in {8..128} is free, bn and bk can only be 128 (lanes).
fn small_matmul() -> tuning::KernelTuning {
    tuning::for_kernel("matmul", &[128, 128, 128], DType::F32).expect("matmul space")
}

#[test]
fn second_tune_is_a_cache_hit() {
    let (_temp, dir) = cache_dir("hit");
    let kernel = small_matmul();
    let first = run(&kernel, &options(&dir));
    assert_eq!(first.source, Source::Tuned);
    assert!(first.evaluated >= 2, "{first:?}");
    assert!(first.cache_path.as_ref().is_some_and(|p| p.is_file()));
    let second = run(&kernel, &options(&dir));
    assert!(second.cache_hit(), "{second:?}");
    assert_eq!(second.evaluated, 0);
    assert_eq!(second.config, first.config);
    assert_eq!(second.history.len(), first.history.len());
    eprintln!(
        "cache hit in {:?} (tuning took {:?})",
        second.elapsed, first.elapsed
    );
}

#[test]
fn corrupt_cache_file_is_rebuilt() {
    let (_temp, dir) = cache_dir("corrupt");
    let kernel = small_matmul();
    let path = run(&kernel, &options(&dir)).cache_path.expect("cache path");
    std::fs::write(&path, "{\"format\": 1, \"key\": tru").unwrap();
    let again = run(&kernel, &options(&dir));
    assert_eq!(again.source, Source::Tuned);
    assert!(
        run(&kernel, &options(&dir)).cache_hit(),
        "the rebuilt file is used"
    );
}

#[test]
fn foreign_version_cache_file_is_ignored() {
    let (_temp, dir) = cache_dir("foreign");
    let kernel = small_matmul();
    let path = run(&kernel, &options(&dir)).cache_path.expect("cache path");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["key"]["tessera_version"] = "0.0.0-elsewhere".into();
    json["best_config"] = "bm=8,bn=128,bk=128".into();
    std::fs::write(&path, json.to_string()).unwrap();
    let again = run(&kernel, &options(&dir));
    assert_eq!(again.source, Source::Tuned, "a foreign file is not a hit");
    let rewritten: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        rewritten["key"]["tessera_version"],
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn constraint_violating_configs_are_skipped_before_measuring() {
    let (_temp, dir) = cache_dir("skip");
    let report = run(&small_matmul(), &options(&dir));
    // bn and bk below 128 break the lane rule: of 5 * 5 * 5 = 125 configs, 5 are feasible,
    // and the space's size counts those (what evaluations are counted against).
    assert_eq!(report.space_size, 5);
    assert_eq!(report.evaluated, 5, "{:?}", report.history);
    assert_eq!(report.skipped.len(), 120);
    assert!(
        report
            .skipped
            .iter()
            .all(|(_, why)| why.contains("not a multiple of 128")),
        "{:?}",
        report.skipped[0]
    );
    assert!(report
        .history
        .iter()
        .all(|e| e.config.get("bn") == Some(128) && e.config.get("bk") == Some(128)));
}

#[test]
fn vmem_budget_of_the_target_is_a_constraint() {
    // Softmax on [512, 8192] f32 for a v4 (16 MiB of VMEM): a block of 8 rows needs 1 MiB
    // (input and output windows, double-buffered), 512 rows need 64 MiB.
    let kernel = tuning::KernelTuning::for_generation(
        "softmax",
        &[512, 8192],
        DType::F32,
        TpuGeneration::V4,
    )
    .unwrap();
    let space = kernel.space();
    assert_eq!(space.check(&Config::new([("br", 8)])), Ok(()));
    let too_big = space.check(&Config::new([("br", 512)])).unwrap_err();
    assert!(too_big.contains("VMEM"), "{too_big}");
    // Candidates start at 8 rows: fewer would break the sublane rule anyway.
    assert_eq!(space.tunables[0].candidates.first(), Some(&8));
}

#[test]
fn autotune_off_returns_the_default_and_cached_mode_never_measures() {
    let (_temp, dir) = cache_dir("modes");
    let kernel = small_matmul();
    let off = TuneOptions {
        mode: "off".parse().unwrap(),
        ..options(&dir)
    };
    let report = run(&kernel, &off);
    assert_eq!(report.source, Source::Default);
    assert_eq!(report.config, kernel.default_config());
    assert_eq!((report.evaluated, report.cache_path.clone()), (0, None));

    let cached = TuneOptions {
        mode: AutotuneMode::Cached,
        ..options(&dir)
    };
    let report = run(&kernel, &cached);
    assert_eq!((report.source, report.evaluated), (Source::Default, 0));
    assert!(
        !report.cache_path.unwrap().exists(),
        "cached mode writes nothing"
    );
    assert!("sometimes".parse::<AutotuneMode>().is_err());
}

/// Matmul 256x256x128 with one honest config and two broken ones: `variant=1` writes each
/// output block to the transposed block position (runs fine, wrong answer), `variant=2`
/// does not trace.
struct BrokenCandidates;

impl TunableKernel for BrokenCandidates {
    fn name(&self) -> String {
        "matmul_broken_candidates".into()
    }
    fn space(&self) -> Space {
        Space::new(vec![Tunable::new("variant", [0, 1, 2])])
    }
    fn default_config(&self) -> Config {
        Config::new([("variant", 0)])
    }
    fn program(&self, config: &Config) -> Result<KernelProgram, String> {
        let out = match config.get("variant") {
            Some(0) => BlockSpec::new([128, 128], |i, j, _k| [i, j]),
            Some(1) => BlockSpec::new([128, 128], |i, j, _k| [j, i]),
            _ => return Err("variant 2 is not a launch".into()),
        };
        let launch: Launch = matmul::launch()
            .grid([2, 2, 1])
            .input(BlockSpec::new([128, 128], |i, _j, k| [i, k]))
            .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
            .output(out, [256, 256])
            .scratch(Vmem::<f32>::new([128, 128]))
            .semantics([Parallel, Parallel, Arbitrary]);
        launch
            .trace_program(&[(DType::F32, vec![256, 128]), (DType::F32, vec![128, 256])])
            .map_err(|e| e.to_string())
    }
    fn inputs(&self, index: usize) -> Vec<HostTensor> {
        let kernel = tessera_kernels::find("matmul").unwrap();
        tessera_kernels::random_inputs(kernel, DType::F32, &[256, 256, 128], index as u64)
    }
}

#[test]
fn wrong_and_failing_candidates_are_rejected_not_chosen() {
    let (_temp, dir) = cache_dir("broken");
    let report = run(&BrokenCandidates, &options(&dir));
    assert_eq!(report.evaluated, 3);
    let outcome = |v| {
        &report
            .history
            .iter()
            .find(|e| e.config.get("variant") == Some(v))
            .unwrap()
            .outcome
    };
    assert!(matches!(outcome(0), Outcome::Measured(_)));
    assert!(
        matches!(outcome(1), Outcome::Rejected(why) if why.contains("max rel err")),
        "{:?}",
        outcome(1)
    );
    assert!(
        matches!(outcome(2), Outcome::Failed(why) if why.contains("not a launch")),
        "{:?}",
        outcome(2)
    );
    assert_eq!(report.config, Config::new([("variant", 0)]));
}

#[test]
fn every_shipped_kernel_has_a_space_containing_its_default() {
    for name in tuning::tunable_kernels() {
        let k = tessera_kernels::find(name).unwrap();
        let t = tuning::for_kernel(name, k.default_shape, DType::F32).unwrap();
        let space = t.space();
        assert!(
            space.indices_of(&t.default_config()).is_some(),
            "{name}: {} not in {space:?}",
            t.default_config()
        );
        assert_eq!(space.check(&t.default_config()), Ok(()), "{name}");
    }
    assert!(tuning::for_kernel("nope", &[1], DType::F32).is_err());
    assert!(tuning::for_kernel("matmul", &[1, 2], DType::F32).is_err());
}

/// Small matmul with a tunable that changes nothing: every config is the same program, so
/// none can beat the default beyond noise and the tuner must keep the default.
struct NoOpTunable(tuning::KernelTuning);

impl TunableKernel for NoOpTunable {
    fn name(&self) -> String {
        "matmul_noop_tunable".into()
    }
    fn space(&self) -> Space {
        Space::new(vec![Tunable::new("copy", [0, 1, 2, 3])])
    }
    fn default_config(&self) -> Config {
        Config::new([("copy", 0)])
    }
    fn program(&self, _: &Config) -> Result<KernelProgram, String> {
        self.0.program(&self.0.default_config())
    }
    fn inputs(&self, index: usize) -> Vec<HostTensor> {
        self.0.inputs(index)
    }
}

#[test]
fn configs_tied_with_the_default_do_not_replace_it() {
    let (_temp, dir) = cache_dir("ties");
    // 30 paired confirmation rounds: enough that a fluke majority of 3 in 4 is rare.
    let options = TuneOptions {
        measure: Measure {
            reps: 10,
            ..options(&dir).measure
        },
        ..options(&dir)
    };
    let report = run(&NoOpTunable(small_matmul()), &options);
    assert_eq!(report.evaluated, 4);
    assert_eq!(report.config, Config::new([("copy", 0)]), "{report:?}");
    assert_eq!(report.best_time, report.default_time);
}

#[test]
fn tuned_is_never_slower_than_the_default_by_the_confirmation() {
    for strategy in [Strategy::Exhaustive, Strategy::PatternSearch] {
        let (_temp, dir) = cache_dir(&format!("never-slower-{strategy}"));
        let report = run(
            &small_matmul(),
            &TuneOptions {
                strategy,
                ..options(&dir)
            },
        );
        let (tuned, default) = (report.best_time.unwrap(), report.default_time.unwrap());
        assert!(
            report.config == report.default_config
                || tuned.as_secs_f64() < default.as_secs_f64() * 0.98,
            "{strategy}: {} at {tuned:?} vs default {} at {default:?}",
            report.config,
            report.default_config
        );
        assert!(tuned <= default);
    }
}

#[test]
fn the_form_is_part_of_the_cache_key() {
    let (_temp, dir) = cache_dir("form");
    let kernel = small_matmul();
    let auto = run(&kernel, &options(&dir));
    let grid_loop = TuneOptions {
        form: tessera_lowering::stablehlo::Form::GridLoop,
        ..options(&dir)
    };
    let first = run(&kernel, &grid_loop);
    assert_eq!(first.source, Source::Tuned, "another form is not a hit");
    assert_ne!(first.cache_path, auto.cache_path);
    assert!(run(&kernel, &grid_loop).cache_hit());
    assert!(
        run(&kernel, &options(&dir)).cache_hit(),
        "the Auto entry is kept"
    );
}
