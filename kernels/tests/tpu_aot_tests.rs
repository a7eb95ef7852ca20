//! Every shipped kernel, lowered to Mosaic, compiles through libtpu for three TPU
//! generations at two problem shapes each, with no TPU attached; and its Mosaic verifies with
//! jaxlib's tpu dialect (`tools/check_mosaic.py`). Needs libtpu (`make test` installs it) and,
//! for the verifier, `$TESSERA_JAX_PYTHON`.

mod support;

use std::process::Command;
use tessera_kernels::{shipped, ShippedKernel};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::DType;
use tessera_runtime::TpuTarget;

const TOPOLOGIES: [&str; 3] = ["v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"];

/// Two problem shapes per kernel: the default and a larger, non-square one.
fn shapes(k: &ShippedKernel) -> Vec<Vec<usize>> {
    let second = match k.problem_dims.len() {
        3 => vec![512, 256, 384],
        _ => vec![256, 2048],
    };
    vec![k.default_shape.to_vec(), second]
}

fn trace(k: &ShippedKernel, shape: &[usize], dtype: DType) -> KernelProgram {
    let sig: Vec<(DType, Vec<usize>)> = (k.input_shapes)(shape)
        .into_iter()
        .map(|s| (dtype, s))
        .collect();
    (k.launch)(shape)
        .expect("launch")
        .trace_program(&sig)
        .unwrap_or_else(|e| panic!("{}: {e}", k.name))
}

#[test]
fn every_kernel_compiles_for_three_generations_at_two_shapes() {
    for topology in TOPOLOGIES {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        for k in shipped() {
            for shape in shapes(k) {
                for dtype in [DType::F32, DType::BF16] {
                    let program = trace(k, &shape, dtype);
                    let out = target.compile_program(&program).unwrap_or_else(|e| {
                        panic!("{} {dtype} {shape:?} on {topology}: {e}", k.name)
                    });
                    assert!(out.code_bytes > 0);
                    println!(
                        "{topology:<12} {:<11} {dtype:<5} {shape:?}: {:.0} ms, {} code bytes",
                        k.name,
                        out.compile_time.as_secs_f64() * 1e3,
                        out.code_bytes
                    );
                }
            }
        }
    }
}

/// A launch without a grid (whole arrays as one block) compiles: Mosaic gets a grid of one
/// step (libtpu refuses window params without iteration bounds).
#[test]
fn a_kernel_launched_without_a_grid_compiles_for_three_generations() {
    use tessera_lowering::trace::BlockSpec;
    let whole = || BlockSpec::new([16, 256], || [0, 0]);
    let sig = vec![(DType::F32, vec![16, 256]); 2];
    let program = tessera_kernels::add::add::launch()
        .input(whole())
        .input(whole())
        .output(whole(), [16, 256])
        .trace_program(&sig)
        .unwrap();
    assert!(program.grid.is_empty());
    support::compiles_for_every_topology(&program);
    support::check_mosaic_of("gridless", &program);
}

#[test]
fn every_kernels_mosaic_verifies_with_jaxlib() {
    let py = match std::env::var_os("TESSERA_JAX_PYTHON").filter(|p| !p.is_empty()) {
        Some(p) => p,
        None if std::env::var_os("CI").is_some() => {
            panic!("CI runs the jaxlib checks: set TESSERA_JAX_PYTHON")
        }
        None => {
            return eprintln!(
                "skipped: set TESSERA_JAX_PYTHON to a Python with jax (`make test` sets it)"
            )
        }
    };
    let dir = support::temp_dir("kernels-mosaic");
    let mut files = Vec::new();
    for k in shipped() {
        for dtype in [DType::F32, DType::BF16] {
            let m = lower_to_mosaic(&trace(k, k.default_shape, dtype), TpuGeneration::V6e).unwrap();
            let f = dir.path().join(format!("{}_{dtype}.mlir", k.name));
            std::fs::write(&f, &m.serialized).unwrap();
            files.push(f);
        }
    }
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/check_mosaic.py");
    let out = support::output(Command::new(py).arg(tool).args(&files));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "jaxlib rejects emitted Mosaic:\n{text}"
    );
    assert_eq!(text.matches(": OK").count(), files.len(), "{text}");
}
