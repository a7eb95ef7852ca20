//! Oracles no one here wrote: jaxlib's own Mosaic dialect verifies every emitted module
//! (`tools/check_mosaic.py`), and Pallas' lowering of the same add / matmul / softmax gives
//! the same grid, windows, index maps and semantics (`tools/pallas_structure.py`).
//! Needs `$TESSERA_JAX_PYTHON` (a Python with jax); without it each test prints a notice
//! and passes.

mod common;
mod mosaic_support;

use mosaic_support::*;
use std::path::PathBuf;
use tessera_lowering::mosaic::{lower_to_mosaic, tpu_custom_call, TpuGeneration};
use tessera_lowering::prelude::*;

/// A new empty directory, removed when the returned [`tempfile::TempDir`] is dropped (also
/// when the test panics).
fn scratch_dir(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tessera-mosaic-{test}-"))
        .tempdir()
        .expect("temp dir")
}

#[test]
fn every_kernel_verifies_with_jaxlibs_tpu_dialect() {
    let Some(py) = jax_python("every_kernel_verifies_with_jaxlibs_tpu_dialect") else {
        return;
    };
    let dir = scratch_dir("verify");
    let mut files = Vec::new();
    for (name, p) in all_programs() {
        let k = lower_to_mosaic(&p, TpuGeneration::V6e).unwrap_or_else(|e| panic!("{name}: {e}"));
        let wrapper = tpu_custom_call(&p, &k).unwrap_or_else(|e| panic!("{name}: {e}"));
        let stem = name.replace('/', "_");
        for (suffix, text) in [
            ("serialized", k.serialized.as_str()),
            ("readable", k.readable.as_str()),
            ("wrapper", wrapper.text()),
        ] {
            let f = dir.path().join(format!("{stem}.{suffix}.mlir"));
            std::fs::write(&f, text).expect("write module");
            files.push(f.to_string_lossy().to_string());
        }
    }
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let (ok, out) = run_tool(&py, "check_mosaic.py", &args, "");
    assert!(ok, "jaxlib rejects emitted Mosaic:\n{out}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with(": OK")).count(),
        files.len(),
        "{out}"
    );
}

#[test]
fn checker_reports_line_and_column_and_fails() {
    let Some(py) = jax_python("checker_reports_line_and_column_and_fails") else {
        return;
    };
    let k = lower_to_mosaic(
        &add_program(DType::F32, 256, 512, 128, 256),
        TpuGeneration::V5e,
    )
    .expect("lowers");
    let (ok, out) = run_tool(&py, "check_mosaic.py", &[], &k.serialized);
    assert!(ok && out.contains("<stdin>: OK"), "{out}");
    // An f32 add fed i32 operands: the verifier of the real op must complain.
    let broken = k.serialized.replacen(
        "\"stable_mosaic.arith.addf\"",
        "\"stable_mosaic.arith.addi\"",
        1,
    );
    // The op carries the kernel's source line (`loc("lowering/tests/common/kernels.rs":L:C)`), and the
    // checker reports the error there, not at a line of the generated text.
    let op_line = broken
        .lines()
        .find(|l| l.contains("arith.addi"))
        .expect("the edited op");
    let loc = op_line
        .rsplit_once(" loc(\"")
        .and_then(|(_, l)| l.strip_suffix(')'))
        .expect("the op has a source location")
        .replacen("\":", ":", 1);
    assert!(
        loc.starts_with("lowering/tests/common/kernels.rs:"),
        "{op_line}"
    );
    let (ok, out) = run_tool(&py, "check_mosaic.py", &[], &broken);
    assert!(!ok, "a broken module must fail:\n{out}");
    assert!(
        out.contains(&format!("{loc}: error")),
        "expected an error at the kernel's line {loc}:\n{out}"
    );
    // Without locations (hand-written text), positions are in the text itself.
    let bare: String = broken
        .lines()
        .map(|l| l.split(" loc(\"").next().unwrap_or(l).to_string() + "\n")
        .collect();
    let line = bare
        .lines()
        .position(|l| l.contains("arith.addi"))
        .expect("the edited op")
        + 1;
    let (ok, out) = run_tool(&py, "check_mosaic.py", &[], &bare);
    assert!(
        !ok && out.contains(&format!("<stdin>:{line}:")),
        "expected an error at line {line}:\n{out}"
    );
}

/// Our structure of `programs` (name -> program) as the script reports it.
fn our_structure(
    py: &PathBuf,
    test: &str,
    programs: &[(&str, tessera_lowering::trace::KernelProgram)],
) -> serde_json::Value {
    let dir = scratch_dir(test);
    let mut files = Vec::new();
    for (name, p) in programs {
        let f = dir.path().join(format!("{name}.mlir"));
        std::fs::write(
            &f,
            lower_to_mosaic(p, TpuGeneration::V5e)
                .expect("lowers")
                .serialized,
        )
        .expect("write");
        files.push(f.to_string_lossy().to_string());
    }
    let mut args = vec!["--module"];
    args.extend(files.iter().map(String::as_str));
    let (ok, out) = run_tool(py, "pallas_structure.py", &args, "");
    assert!(ok, "{out}");
    let by_file: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let mut by_name = serde_json::Map::new();
    for ((name, _), f) in programs.iter().zip(&files) {
        by_name.insert(name.to_string(), by_file[f].clone());
    }
    serde_json::Value::Object(by_name)
}

fn compare_with_pallas(
    test: &str,
    dtype: DType,
    add: [usize; 4],
    matmul: [usize; 4],
    softmax: [usize; 3],
) {
    let Some(py) = jax_python(test) else { return };
    let s = |v: &[usize]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>();
    let (a, m, x) = (s(&add), s(&matmul), s(&softmax));
    let dt = if dtype == DType::BF16 {
        "bfloat16"
    } else {
        "float32"
    };
    let mut args = vec!["--dtype", dt, "--add"];
    args.extend(a.iter().map(String::as_str));
    args.push("--matmul");
    args.extend(m.iter().map(String::as_str));
    args.push("--softmax");
    args.extend(x.iter().map(String::as_str));
    let (ok, out) = run_tool(&py, "pallas_structure.py", &args, "");
    assert!(ok, "{out}");
    let pallas: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let ours = our_structure(
        &py,
        test,
        &[
            ("add", add_program(dtype, add[0], add[1], add[2], add[3])),
            (
                "matmul",
                matmul_program(dtype, matmul[0], matmul[1], matmul[2], matmul[3]),
            ),
            (
                "softmax",
                softmax_program(dtype, softmax[0], softmax[1], softmax[2]),
            ),
        ],
    );
    for kernel in ["add", "matmul", "softmax"] {
        assert_eq!(
            ours[kernel], pallas[kernel],
            "{kernel} ({dtype}): Tessera (left) vs Pallas (right)"
        );
        assert!(
            pallas[kernel]["window_params"]
                .as_array()
                .is_some_and(|w| !w.is_empty()),
            "{pallas}"
        );
    }
}

#[test]
fn structure_matches_pallas_f32() {
    compare_with_pallas(
        "structure_matches_pallas_f32",
        DType::F32,
        [256, 512, 128, 256],
        [256, 256, 384, 128],
        [64, 256, 16],
    );
}

#[test]
fn structure_matches_pallas_bf16_other_shapes() {
    compare_with_pallas(
        "structure_matches_pallas_bf16",
        DType::BF16,
        [64, 128, 32, 128],
        [512, 256, 256, 256],
        [128, 1024, 32],
    );
}
