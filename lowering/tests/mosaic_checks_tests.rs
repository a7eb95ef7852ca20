//! The early TPU checks of `lower_to_mosaic`: each mistake is caught by Tessera, before
//! Mosaic or libtpu see it, at the user's own line (the `BlockSpec::new` call for block
//! shapes, the launch for dtypes, budgets and semantics).

mod common;
mod mosaic_support;

use common::kernels::{add, matmul};
use mosaic_support::*;
use tessera_lowering::ir::Loc;
use tessera_lowering::mosaic::{check_program, lower_to_mosaic, MosaicError, TpuGeneration};
use tessera_lowering::prelude::*;

fn here(line: u32) -> (&'static str, u32) {
    (file!(), line)
}

fn at(loc: Loc) -> (&'static str, u32) {
    (loc.file, loc.line)
}

#[test]
fn misaligned_f32_block_points_at_its_block_spec() {
    let spec_line = line!() + 3;
    let p = add::launch()
        .grid([2, 4])
        .input(BlockSpec::new([8, 64], |i, j| [i, j]))
        .input(BlockSpec::new([8, 64], |i, j| [i, j]))
        .output(BlockSpec::new([8, 64], |i, j| [i, j]), [16, 256])
        .trace_program(&[(DType::F32, vec![16, 256]), (DType::F32, vec![16, 256])])
        .expect("traces (the interpreter and StableHLO accept any dividing block)");
    let err = lower_to_mosaic(&p, TpuGeneration::V5e).unwrap_err();
    let MosaicError::Tiling {
        what,
        sublanes,
        block,
        loc,
        ..
    } = &err
    else {
        panic!("expected a tiling error, got {err}")
    };
    assert_eq!(
        (what.as_str(), *sublanes, block.clone()),
        ("input `x`", 8, vec![8, 64])
    );
    assert_eq!(at(*loc), here(spec_line), "{err}");
    assert!(err.to_string().contains("multiples of (8, 128)"), "{err}");
}

#[test]
fn bf16_needs_16_row_blocks_but_full_dims_are_fine() {
    let spec_line = line!() + 3;
    let p = add::launch()
        .grid([4, 1])
        .input(BlockSpec::new([8, 256], |i, j| [i, j]))
        .input(BlockSpec::new([8, 256], |i, j| [i, j]))
        .output(BlockSpec::new([8, 256], |i, j| [i, j]), [32, 256])
        .trace_program(&[(DType::BF16, vec![32, 256]), (DType::BF16, vec![32, 256])])
        .expect("traces");
    let err = lower_to_mosaic(&p, TpuGeneration::V6e).unwrap_err();
    let MosaicError::Tiling { sublanes, loc, .. } = &err else {
        panic!("expected a tiling error, got {err}")
    };
    assert_eq!(*sublanes, 16);
    assert_eq!(at(*loc), here(spec_line), "{err}");
    assert!(err.to_string().contains("(16, 128) for bf16"), "{err}");

    // The same 8 rows are fine in f32, and a block equal to the whole array always is.
    assert!(lower_to_mosaic(
        &add_program(DType::F32, 32, 256, 8, 256),
        TpuGeneration::V6e
    )
    .is_ok());
    assert!(lower_to_mosaic(
        &add_program(DType::BF16, 8, 200, 8, 200),
        TpuGeneration::V6e
    )
    .is_ok());
}

#[test]
fn sixty_four_bit_dtype_is_rejected_at_the_launch() {
    let launch_line = line!() + 6;
    let p = add::launch()
        .grid([2])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&[(DType::F64, vec![16, 128]), (DType::F64, vec![16, 128])])
        .expect("f64 traces (the interpreter and StableHLO support it)");
    let err = lower_to_mosaic(&p, TpuGeneration::V5e).unwrap_err();
    let MosaicError::SixtyFourBit { dtype, loc, .. } = &err else {
        panic!("expected a 64-bit error, got {err}")
    };
    assert_eq!(*dtype, DType::F64);
    assert_eq!(at(*loc), here(launch_line), "{err}");
    assert!(
        err.to_string().contains("TPUs have no 64-bit types"),
        "{err}"
    );
}

#[test]
fn vmem_over_budget_is_caught_per_generation() {
    // 4 MiB f32 windows x 3 operands x 2 buffers = 24 MiB: too much for v4's 16 MiB, fine
    // on v5e's 128 MiB (with a raised scoped limit).
    let launch_line = line!() + 6;
    let p = add::launch()
        .grid([2, 2])
        .input(BlockSpec::new([1024, 1024], |i, j| [i, j]))
        .input(BlockSpec::new([1024, 1024], |i, j| [i, j]))
        .output(BlockSpec::new([1024, 1024], |i, j| [i, j]), [2048, 2048])
        .trace_program(&[
            (DType::F32, vec![2048, 2048]),
            (DType::F32, vec![2048, 2048]),
        ])
        .expect("traces");
    let err = lower_to_mosaic(&p, TpuGeneration::V4).unwrap_err();
    let MosaicError::VmemBudget {
        needed,
        windows,
        scratch,
        limit,
        generation,
        loc,
    } = &err
    else {
        panic!("expected a VMEM error, got {err}")
    };
    assert_eq!((*needed, *windows, *scratch), (24 << 20, 24 << 20, 0));
    assert_eq!((*limit, *generation), (16 << 20, "v4"));
    assert_eq!(at(*loc), here(launch_line), "{err}");
    let ok = lower_to_mosaic(&p, TpuGeneration::V5e).expect("fits v5e");
    assert_eq!(ok.vmem.total(), 24 << 20);
    assert_eq!(
        ok.vmem_limit_bytes(),
        Some(30 << 20),
        "footprint + 25%, rounded to MiB"
    );
    let small = lower_to_mosaic(
        &add_program(DType::F32, 256, 512, 128, 256),
        TpuGeneration::V5e,
    )
    .expect("fits");
    assert_eq!(
        small.vmem_limit_bytes(),
        None,
        "the default scoped limit is enough"
    );
    // v6e's default scoped limit (32 MiB) already covers 24 MiB.
    assert_eq!(
        lower_to_mosaic(&p, TpuGeneration::V6e)
            .expect("fits")
            .vmem_limit_bytes(),
        None
    );
}

#[test]
fn scratch_counts_toward_vmem() {
    let p = matmul_program(DType::F32, 1024, 1024, 1024, 512);
    let usage = check_program(&p, TpuGeneration::V5e).expect("fits");
    assert_eq!(usage.windows, 3 * 2 * 512 * 512 * 4);
    assert_eq!(usage.scratch, 512 * 512 * 4);
}

#[test]
fn reduction_axis_marked_parallel_is_an_error_at_the_semantics_call() {
    let semantics_line = line!() + 7;
    let p = matmul::launch()
        .grid([2, 2, 3])
        .input(BlockSpec::new([128, 128], |i, _j, k| [i, k]))
        .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
        .output(BlockSpec::new([128, 128], |i, j, _k| [i, j]), [256, 256])
        .scratch(Vmem::<f32>::new([128, 128]))
        .semantics([Parallel, Parallel, Parallel])
        .trace_program(&[(DType::F32, vec![256, 384]), (DType::F32, vec![384, 256])])
        .expect("traces");
    let err = lower_to_mosaic(&p, TpuGeneration::V5e).unwrap_err();
    let MosaicError::ReductionAxis {
        output, axis, loc, ..
    } = &err
    else {
        panic!("expected a reduction-axis error, got {err}")
    };
    assert_eq!((output.as_str(), *axis), ("o", 2));
    assert_eq!(at(*loc), here(semantics_line), "{err}");
    assert!(err.to_string().contains("must be `Arbitrary`"), "{err}");
}

#[test]
fn reduction_axis_must_come_last() {
    let p = matmul::launch()
        .grid([3, 2, 2])
        .input(BlockSpec::new([128, 128], |k, i, _j| [i, k]))
        .input(BlockSpec::new([128, 128], |k, _i, j| [k, j]))
        .output(BlockSpec::new([128, 128], |_k, i, j| [i, j]), [256, 256])
        .scratch(Vmem::<f32>::new([128, 128]))
        .semantics([Arbitrary, Parallel, Parallel])
        .trace_program(&[(DType::F32, vec![256, 384]), (DType::F32, vec![384, 256])])
        .expect("traces");
    let err = lower_to_mosaic(&p, TpuGeneration::V5e).unwrap_err();
    assert!(
        matches!(&err, MosaicError::ReductionAxis { axis: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("put reduction axes last"), "{err}");
}

#[test]
fn topologies_parse_to_generations() {
    for (t, g) in [
        ("v4:2x2x1", TpuGeneration::V4),
        ("v5e:2x2", TpuGeneration::V5e),
        ("v5p:2x2x1", TpuGeneration::V5p),
        ("v6e:2x2", TpuGeneration::V6e),
        ("tpu7x:2x2x1", TpuGeneration::Tpu7x),
        ("V6E", TpuGeneration::V6e),
    ] {
        assert_eq!(TpuGeneration::from_topology(t).expect(t), g);
        assert_eq!(t.parse::<TpuGeneration>().expect(t), g);
    }
    let err = TpuGeneration::from_topology("v9q:1x1").unwrap_err();
    assert!(
        matches!(&err, MosaicError::UnknownTopology(t) if t == "v9q:1x1"),
        "{err}"
    );
    for g in TpuGeneration::ALL {
        assert!(
            g.default_scoped_vmem_bytes() <= g.vmem_capacity_bytes(),
            "{g}"
        );
        assert_eq!(TpuGeneration::from_topology(g.name()).expect("own name"), g);
    }
}
