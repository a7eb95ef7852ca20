//! Source locations in the emitted text: every Mosaic and StableHLO op of a kernel carries
//! the user's `loc("file":line:col)`, so a diagnostic from libtpu's compile or jaxlib's
//! verifier names the kernel's line. The rejected kernel below is a real libtpu rejection
//! (no mock): a lane-dim slice at a start read from SMEM. Tessera refuses it first
//! (`dynamic_index_tests.rs`), so it is handed to libtpu through the unchecked lowering.

mod support;

use tessera_kernels::shipped;
use tessera_lowering::mosaic::{
    lower_to_mosaic, lower_to_mosaic_unaligned, tpu_custom_call, TpuGeneration,
};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::emit_kernel;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::DType;
use tessera_macros::tpu_kernel;
use tessera_runtime::{CompileOptions, TpuTarget};

const ROWS: usize = 8;
const LANES: usize = 128;

/// Copies the 128 lanes of `x` starting at lane `start[0]`: libtpu cannot prove the start a
/// multiple of 128, so it refuses the load.
#[tpu_kernel]
fn lanes_from(start: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = start.load_scalar([0]);
    o.store(x.load_slice((0, s), [ROWS, LANES])); // REJECTED BY LIBTPU
}

fn lanes_from_program() -> KernelProgram {
    lanes_from::launch()
        .input(BlockSpec::new([ROWS, 4 * LANES], || [0, 0]))
        .output(BlockSpec::new([ROWS, LANES], || [0, 0]), [ROWS, LANES])
        .trace_program(&[(DType::I32, vec![1]), (DType::F32, vec![ROWS, 4 * LANES])])
        .expect("traces")
}

/// `file:line` of the line of this file that holds `marker`.
fn line_of(marker: &str) -> String {
    let line = include_str!("source_location_tests.rs")
        .lines()
        .position(|l| l.contains(marker) && !l.contains("line_of("))
        .expect("marker in this file")
        + 1;
    format!("kernels/tests/source_location_tests.rs:{line}")
}

#[test]
fn a_libtpu_rejection_names_the_kernels_line() {
    let program = lanes_from_program();
    let at = line_of("REJECTED BY LIBTPU");
    let target = TpuTarget::aot("v5e:2x2").expect("libtpu loads");
    let kernel = lower_to_mosaic_unaligned(&program, TpuGeneration::V5e).expect("lowers");
    let module = tpu_custom_call(&program, &kernel)
        .expect("wraps")
        .into_text();
    let err = target
        .compile(&module, &CompileOptions::default())
        .expect_err("libtpu refuses a lane slice at an unproven start")
        .to_string();
    // The error starts with the kernel's line, as Tessera's own errors do; libtpu's text
    // follows verbatim (its rule, then the location it quotes).
    assert!(
        err.starts_with(&format!("{at}:")) && err.contains("multiple of 128"),
        "libtpu's error should start with {at}:\n{err}"
    );
}

#[test]
fn every_op_of_a_shipped_kernel_carries_its_source_line() {
    for k in shipped() {
        let program = support::default_program(k);
        let mosaic = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        let hlo = emit_kernel(&program).expect("emits");
        for (what, text) in [("mosaic", &mosaic.serialized), ("stablehlo", &hlo)] {
            let at = format!("loc(\"kernels/src/{}.rs\":", k.name);
            assert!(text.contains(&at), "{} {what}: no {at}\n{text}", k.name);
        }
        // Locations are static strings: lowering again gives the same text (the executable
        // cache keys on it).
        let again = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        assert_eq!(again.serialized, mosaic.serialized, "{}", k.name);
        assert_eq!(emit_kernel(&program).expect("emits"), hlo, "{}", k.name);
    }
}

#[test]
fn the_rejected_kernels_mosaic_still_verifies_with_jaxlib() {
    // jaxlib's verifier accepts the module (the alignment is libtpu's rule): the locations
    // parse in the serialized form.
    let Some(py) = support::jax_python() else {
        return;
    };
    let kernel = lower_to_mosaic_unaligned(&lanes_from_program(), TpuGeneration::V5e).unwrap();
    support::verify_mosaic(&py, "lanes-from", "lanes_from.mlir", &kernel.serialized);
}
