//! The `tessera` binary end to end: every subcommand on the real plugins, and its errors.

use std::process::{Command, Output};

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("runs tessera")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn devices_lists_the_cpu_plugin_with_its_api_version() {
    let o = tessera(&["devices"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cpu = stdout(&o)
        .lines()
        .find(|l| l.starts_with("cpu "))
        .map(str::to_string)
        .expect("a cpu line");
    assert!(cpu.contains("0.81") || cpu.contains("0.1"), "{cpu}");
    assert!(cpu.contains(" 1 "), "one cpu device: {cpu}");
}

#[test]
fn kernels_lists_shipped_kernels_name_first() {
    let o = tessera(&["kernels"]);
    let names: Vec<String> = stdout(&o)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    for k in ["add", "layer_norm", "matmul", "silu", "softmax"] {
        assert!(names.iter().any(|n| n == k), "{k} missing from {names:?}");
    }
}

#[test]
fn check_passes_on_cpu_and_interp_and_reports_the_error() {
    for device in ["cpu", "interp"] {
        let o = tessera(&[
            "check", "softmax", "--device", device, "--shape", "64,256", "--dtype", "bf16",
        ]);
        assert!(o.status.success(), "{device}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("max rel err"), "{}", stdout(&o));
    }
}

#[test]
fn lower_prints_stablehlo_and_mosaic() {
    let o = tessera(&[
        "lower",
        "matmul",
        "--target",
        "stablehlo",
        "--shape",
        "128,256,256",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("stablehlo.dot_general"),
        "{}",
        stdout(&o)
    );
    let o = tessera(&["lower", "matmul", "--target", "mosaic", "--serialized"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("stable_mosaic.version") && text.contains("stable_mosaic.tpu.matmul"),
        "{text}"
    );
}

#[test]
fn aot_prints_one_json_object_per_kernel_and_topology() {
    let o = tessera(&[
        "aot",
        "add",
        "--topology",
        "v5e:2x2",
        "--topology",
        "v6e:2x2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    for v in &lines {
        for key in [
            "kernel",
            "topology",
            "ok",
            "compile_ms",
            "code_bytes",
            "error",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["ok"], true);
        assert!(v["code_bytes"].as_i64().unwrap() > 0);
    }
}

#[test]
fn run_mlir_runs_a_file_with_explicit_inputs() {
    let dir = tempfile::Builder::new()
        .prefix("tessera-cli-")
        .tempdir()
        .unwrap();
    let f = dir.path().join("scale.mlir");
    std::fs::write(
        &f,
        "module {\n  func.func public @main(%a: tensor<3xf32>, %b: tensor<f32>) -> tensor<3xf32> {\n    %bb = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<3xf32>\n    %0 = stablehlo.multiply %a, %bb : tensor<3xf32>\n    return %0 : tensor<3xf32>\n  }\n}\n",
    )
    .unwrap();
    let path = f.to_str().unwrap();
    let o = tessera(&[
        "run-mlir",
        path,
        "--input",
        "f32[3]=1,2,3",
        "--input",
        "f32[]=2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("output 0: f32[3] = [2, 4, 6]"),
        "{}",
        stdout(&o)
    );
    // Random inputs from the signature when none are given.
    assert!(tessera(&["run-mlir", path]).status.success());
    // --repeat times more runs of the same executable (outputs waited for each time).
    let o = tessera(&["run-mlir", path, "--repeat", "5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let timing = stdout(&o)
        .lines()
        .find(|l| l.starts_with("execute (inputs on the device"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no timing line: {}", stdout(&o)));
    assert!(timing.contains("5 runs: median "), "{timing}");
    // A count past the bound is refused by name, not attempted.
    let o = tessera(&["run-mlir", path, "--repeat", "10000000000"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--repeat"), "{}", stderr(&o));
    // Wrong inputs: our own check, a clean error and a non-zero exit.
    let o = tessera(&["run-mlir", path, "--input", "f32[4]=1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("takes 2 input(s), got 1"),
        "{}",
        stderr(&o)
    );
    let o = tessera(&["run-mlir", path, "--input", "f32[2=1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("missing closing ]"), "{}", stderr(&o));
}

#[test]
fn tune_json_counts_the_feasible_space() {
    // Matmul 128^3: of 125 block configs only bm varies (bn and bk must be 128).
    let o = tessera(&[
        "tune",
        "matmul",
        "--shape",
        "128,128,128",
        "--strategy",
        "exhaustive",
        "--retune",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON");
    for key in ["kernel", "default_ms", "best_ms", "speedup", "best_config"] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
    assert_eq!(json["space_size"], 5, "{json}");
    assert_eq!(json["evaluated"], 5, "{json}");
}

#[test]
fn a_second_tune_is_a_cache_hit() {
    let args = [
        "tune",
        "softmax",
        "--shape",
        "64,256",
        "--form",
        "grid-loop",
        "--budget",
        "3",
        "--json",
    ];
    let first = tessera(&[&args[..], &["--retune"]].concat());
    assert!(first.status.success(), "{}", stderr(&first));
    let first: serde_json::Value = serde_json::from_str(stdout(&first).trim()).expect("JSON");
    assert_eq!(first["cache_hit"], false, "{first}");
    let second = tessera(&args);
    assert!(second.status.success(), "{}", stderr(&second));
    let second: serde_json::Value = serde_json::from_str(stdout(&second).trim()).expect("JSON");
    assert_eq!(second["cache_hit"], true, "{second}");
    assert_eq!(second["evaluated"], 0, "{second}");
    assert_eq!(second["best_config"], first["best_config"]);
}

#[test]
fn errors_are_clean_and_non_zero() {
    for (args, want) in [
        (vec!["check", "nope"], "no kernel named `nope`"),
        (
            vec!["check", "matmul", "--shape", "64,64"],
            "takes a problem shape of 3 dims",
        ),
        (vec!["lower", "add", "--shape", "0,128"], "has an empty dim"),
        (
            vec!["lower", "add", "--dtype", "f65"],
            "unknown dtype `f65`",
        ),
        (
            vec!["run-mlir", "/nonexistent.mlir"],
            "reading /nonexistent.mlir",
        ),
        (
            vec!["aot", "add", "--topology", "v99:1x1"],
            "unknown TPU generation `v99`",
        ),
        (
            vec!["aot", "add", "--topology", "v5e:3x1"],
            "PJRT_TopologyDescription_Create",
        ),
    ] {
        let o = tessera(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = stderr(&o);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
