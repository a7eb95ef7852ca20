//! The TPU rules (`trace::tpu::check_tpu`): tiling, 64-bit types, reduction axes, VMEM.

mod common;

use common::kernels::*;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::tpu::{check_tpu, TpuLimits};
use tessera_lowering::trace::KernelProgram;

fn matmul_program(semantics: [DimensionSemantics; 3], b: usize) -> KernelProgram {
    matmul::launch()
        .grid([2, 2, 2])
        .input(BlockSpec::new([b, b], |i, _j, k| [i, k]))
        .input(BlockSpec::new([b, b], |_i, j, k| [k, j]))
        .output(BlockSpec::new([b, b], |i, j, _k| [i, j]), [2 * b, 2 * b])
        .scratch(Vmem::<f32>::new([b, b]))
        .semantics(semantics)
        .trace_program(&[
            (DType::BF16, vec![2 * b, 2 * b]),
            (DType::BF16, vec![2 * b, 2 * b]),
        ])
        .unwrap()
}

#[test]
fn well_formed_matmul_passes() {
    check_tpu(
        &matmul_program([Parallel, Parallel, Arbitrary], 128),
        &TpuLimits::default(),
    )
    .unwrap();
}

#[test]
fn misaligned_block_is_reported_at_its_block_spec() {
    let (spec, line) = (BlockSpec::new([8, 64], |i| (i, 0)), line!());
    let p = silu::launch()
        .grid([2])
        .input(spec)
        .output(BlockSpec::new([8, 64], |i| (i, 0)), [16, 128])
        .trace_program(&[(DType::F32, vec![16, 128])])
        .unwrap();
    let msg = check_tpu(&p, &TpuLimits::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("tpu_rules_tests.rs:{line}:")),
        "{msg}"
    );
    assert!(
        msg.contains(
            "block dim 1 is 64; on TPU the last two block dims must be multiples of (8, 128)"
        ),
        "{msg}"
    );
}

#[test]
fn full_array_dims_need_no_alignment() {
    let p = softmax::launch()
        .grid([1])
        .input(BlockSpec::new([3, 100], |i| (i, 0)))
        .output(BlockSpec::new([3, 100], |i| (i, 0)), [3, 100])
        .trace_program(&[(DType::F32, vec![3, 100])])
        .unwrap();
    check_tpu(&p, &TpuLimits::default()).unwrap();
}

#[test]
fn reduction_axis_must_be_arbitrary_and_last() {
    let msg = check_tpu(
        &matmul_program([Parallel, Parallel, Parallel], 128),
        &TpuLimits::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains("output `o` is revisited along grid axis 2"),
        "{msg}"
    );
    assert!(msg.contains("tpu_rules_tests.rs:18:"), "{msg}");

    let p = matmul::launch()
        .grid([2, 2, 2])
        .input(BlockSpec::new([128, 128], |k, i, _j| [i, k]))
        .input(BlockSpec::new([128, 128], |k, _i, j| [k, j]))
        .output(BlockSpec::new([128, 128], |_k, i, j| [i, j]), [256, 256])
        .scratch(Vmem::<f32>::new([128, 128]))
        .semantics([Arbitrary, Parallel, Parallel])
        .trace_program(&[(DType::BF16, vec![256, 256]), (DType::BF16, vec![256, 256])])
        .unwrap();
    let msg = check_tpu(&p, &TpuLimits::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("reduction grid axis 0 of output `o` must come after the parallel axis 1"),
        "{msg}"
    );
}

#[test]
fn vmem_budget() {
    let p = matmul_program([Parallel, Parallel, Arbitrary], 1024);
    let msg = check_tpu(
        &p,
        &TpuLimits {
            vmem_bytes: 8 << 20,
        },
    )
    .unwrap_err()
    .to_string();
    let want = "needs 16.0 MiB of VMEM (12.0 MiB of double-buffered blocks, 4.0 MiB of scratch), the limit is 8.0 MiB";
    assert!(msg.contains(want), "{msg}");
    check_tpu(&p, &TpuLimits::default()).unwrap();
}

#[test]
fn sixty_four_bit_types_are_rejected() {
    let p = add::launch()
        .grid([1])
        .input(BlockSpec::new([8, 128], |_| [0, 0]))
        .input(BlockSpec::new([8, 128], |_| [0, 0]))
        .output(BlockSpec::new([8, 128], |_| [0, 0]), [8, 128])
        .trace_program(&[(DType::F64, vec![8, 128]), (DType::F64, vec![8, 128])])
        .unwrap();
    let msg = check_tpu(&p, &TpuLimits::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("operand `x` is f64: TPUs have no 64-bit types"),
        "{msg}"
    );
}
