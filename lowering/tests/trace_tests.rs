//! Tracing kernels into programs: IR shape, hashes, dumps, registry.

mod common;

use common::kernels::*;
use tessera_lowering::prelude::*;

fn matmul_program(
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
) -> tessera_lowering::trace::KernelProgram {
    matmul::launch()
        .grid([m / 128, n / 128, k / 128])
        .input(BlockSpec::new([128, 128], |i, _j, k| [i, k]))
        .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
        .output(BlockSpec::new([128, 128], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([128, 128]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(dtype, vec![m, k]), (dtype, vec![k, n])])
        .unwrap()
}

#[test]
fn matmul_traces_with_if_regions() {
    let p = matmul_program(DType::BF16, 256, 256, 384);
    println!("{p}");
    assert_eq!(p.grid, vec![2, 2, 3]);
    assert_eq!(p.dtype, Some(DType::BF16));
    assert_eq!(p.inputs[1].name, "y");
    let text = p.body.to_string();
    assert!(text.contains("dot"), "{text}");
    assert_eq!(
        text.matches(" if ").count() + text.matches("= if").count(),
        2,
        "{text}"
    );
}

#[test]
fn registry_lists_kernels_sorted_by_name() {
    let names: Vec<&str> = tessera_lowering::kernel::registered_kernels()
        .iter()
        .map(|k| k.info().name)
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for k in [
        "add",
        "chunk_mean",
        "layer_norm",
        "matmul",
        "silu",
        "softmax",
    ] {
        assert!(names.contains(&k), "{k} not in {names:?}");
    }
    let mm = tessera_lowering::kernel::find_kernel("matmul")
        .unwrap()
        .info();
    assert_eq!(
        (mm.file, mm.params.len()),
        ("lowering/tests/common/kernels.rs", 4)
    );
    assert_eq!(mm.generic, tessera_lowering::kernel::Generic::Float);
}

#[test]
fn generic_dtype_can_be_given_explicitly() {
    // Every operand generic and no input: `.dtype()` decides; disagreeing inputs are caught.
    let p = matmul::launch()
        .dtype(DType::F16)
        .grid([1, 1, 1])
        .input(BlockSpec::new([8, 128], |i, _j, k| [i, k]))
        .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
        .output(BlockSpec::new([8, 128], |i, j, _k| [i, j]), [8, 128])
        .scratch(Vmem::<f32>::new([8, 128]))
        .trace_program(&[(DType::F16, vec![8, 128]), (DType::F16, vec![128, 128])])
        .unwrap();
    assert_eq!(p.dtype, Some(DType::F16));
    assert_eq!(p.outputs[0].dtype, DType::F16);
    assert_eq!(p.semantics, vec![Parallel; 3]);
}
