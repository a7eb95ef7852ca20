//! Trace-time errors: each is an error value (no panic) whose message carries this file's
//! name and the line of the offending call.

mod common;

use common::kernels::*;
use common::FnKernel;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{Launch, TraceError};

fn f32s(shapes: &[&[usize]]) -> Vec<(DType, Vec<usize>)> {
    shapes.iter().map(|s| (DType::F32, s.to_vec())).collect()
}

fn assert_at(err: &TraceError, line: u32, needle: &str) {
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("launch_error_tests.rs:{line}:")),
        "wrong location: {msg}"
    );
    assert!(msg.contains(needle), "`{needle}` not in: {msg}");
}

#[test]
fn block_not_dividing_the_array() {
    let (spec, line) = (BlockSpec::new([8, 128], |i, j| [i, j]), line!());
    let err = add::launch()
        .grid([2, 1])
        .input(spec)
        .input(BlockSpec::new([8, 100], |i, j| [i, j]))
        .output(BlockSpec::new([8, 100], |i, j| [i, j]), [16, 100])
        .trace_program(&f32s(&[&[16, 100], &[16, 100]]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            TraceError::BlockNotDividing {
                dim: 1,
                block_dim: 128,
                array_dim: 100,
                ..
            }
        ),
        "{err}"
    );
    assert_at(
        &err,
        line,
        "input `x`: block dim 1 is 128, which does not divide the array's dim 100",
    );
}

#[test]
fn block_rank_differs_from_array_rank() {
    let (spec, line) = (BlockSpec::new([128], |i| [i]), line!());
    let err = silu::launch()
        .grid([1])
        .input(spec)
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [8, 128])
        .trace_program(&f32s(&[&[8, 128]]))
        .unwrap_err();
    assert_at(
        &err,
        line,
        "block shape [128] has rank 1, the array [8, 128] has rank 2",
    );
}

#[test]
fn index_map_arity_differs_from_grid_rank() {
    let (spec, line) = (BlockSpec::new([8, 128], |i| (i, 0)), line!());
    let err = add::launch()
        .grid([2, 1])
        .input(spec)
        .input(BlockSpec::new([8, 128], |i, j| [i, j]))
        .output(BlockSpec::new([8, 128], |i, j| [i, j]), [16, 128])
        .trace_program(&f32s(&[&[16, 128], &[16, 128]]))
        .unwrap_err();
    assert!(
        matches!(err, TraceError::IndexMapArity { arity: 1, .. }),
        "{err}"
    );
    assert_at(
        &err,
        line,
        "the index map takes 1 grid indices but the grid [2, 1] has rank 2",
    );
}

#[test]
fn index_map_result_count_differs_from_block_rank() {
    let (spec, line) = (BlockSpec::new([8, 128], |i| [i]), line!());
    let err = silu::launch()
        .grid([2])
        .input(spec)
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&f32s(&[&[16, 128]]))
        .unwrap_err();
    assert_at(
        &err,
        line,
        "the index map returns 1 block indices, the block has rank 2",
    );
}

#[test]
fn generic_inputs_disagree() {
    let launch = add::launch()
        .grid([1])
        .input(BlockSpec::new([8, 128], |_| [0, 0]))
        .input(BlockSpec::new([8, 128], |_| [0, 0]))
        .output(BlockSpec::new([8, 128], |_| [0, 0]), [8, 128]);
    let arrays = [(DType::F32, vec![8, 128]), (DType::BF16, vec![8, 128])];
    let (err, line) = (launch.trace_program(&arrays).unwrap_err(), line!());
    assert!(matches!(err, TraceError::GenericConflict { .. }), "{err}");
    assert_at(
        &err,
        line,
        "generic dtype is f32 (from input `x`) but input `y` is bf16",
    );
}

#[test]
fn concrete_param_dtype_mismatch() {
    let launch = chunk_mean::launch()
        .grid([1])
        .input(BlockSpec::new([8, 512], |_| [0, 0]))
        .output(BlockSpec::new([8, 128], |_| [0, 0]), [8, 128]);
    #[rustfmt::skip]
    let (err, line) = (launch.trace_program(&[(DType::BF16, vec![8, 512])]).unwrap_err(), line!());
    assert!(
        matches!(
            err,
            TraceError::DTypeMismatch {
                expected: DType::F32,
                got: DType::BF16,
                ..
            }
        ),
        "{err}"
    );
    assert_at(&err, line, "input `x` as declared is f32, got bf16");
}

#[test]
fn generic_float_kernel_rejects_integer_inputs() {
    let launch = silu::launch()
        .grid([1])
        .input(BlockSpec::new([8, 128], |_| [0, 0]))
        .output(BlockSpec::new([8, 128], |_| [0, 0]), [8, 128]);
    #[rustfmt::skip]
    let (err, line) = (launch.trace_program(&[(DType::I32, vec![8, 128])]).unwrap_err(), line!());
    assert_at(&err, line, "is generic over `Float` but input `x` is i32");
}

#[test]
fn operand_counts_are_checked() {
    let launch = silu::launch().grid([1]);
    #[rustfmt::skip]
    let (err, line) = (launch.trace_program(&f32s(&[&[8, 128]])).unwrap_err(), line!());
    assert!(
        matches!(
            err,
            TraceError::OperandCount {
                role: "input",
                expected: 1,
                got: 0,
                ..
            }
        ),
        "{err}"
    );
    assert_at(
        &err,
        line,
        "kernel `silu` has 1 input parameter(s), the launch gives 0",
    );

    let launch = silu::launch()
        .grid([1])
        .input(BlockSpec::new([8, 128], |_| [0, 0]))
        .output(BlockSpec::new([8, 128], |_| [0, 0]), [8, 128]);
    let (err, line) = (launch.trace_program(&[]).unwrap_err(), line!());
    assert_at(&err, line, "1 input array parameter(s), the launch gives 0");
}

#[test]
fn semantics_must_match_the_grid() {
    #[rustfmt::skip]
    let (launch, line) = (silu::launch().grid([2]).semantics([Parallel, Arbitrary]), line!());
    let err = launch
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&f32s(&[&[16, 128]]))
        .unwrap_err();
    assert_at(&err, line, "2 dimension semantics for a grid of rank 1");
}

fn run_body(
    kernel: &'static FnKernel,
    block: [usize; 2],
) -> Result<tessera_lowering::trace::KernelProgram, TraceError> {
    Launch::new(kernel)
        .grid([1])
        .input(BlockSpec::new(block, |_| [0, 0]))
        .output(BlockSpec::new(block, |_| [0, 0]), block)
        .trace_program(&f32s(&[&block]))
}

#[test]
fn shape_errors_in_the_body_point_at_the_call() {
    let line = line!() + 1;
    let k = FnKernel::leak("bad_dot", 1, |x, o| o.store(dot(x[0].load(), x[0].load())));
    let err = run_body(k, [8, 128]).unwrap_err();
    assert!(matches!(err, TraceError::Op { op: "dot", .. }), "{err}");
    assert_at(
        &err,
        line,
        "contracting dims differ: lhs [8, 128] gives 128, rhs [8, 128] gives 8",
    );

    let line = line!() + 1;
    let k = FnKernel::leak("bad_add", 1, |x, o| o.store(x[0].load() + x[0].load().t()));
    assert_at(
        &run_body(k, [8, 128]).unwrap_err(),
        line,
        "shapes [8, 128] and [128, 8] do not broadcast together",
    );

    let line = line!() + 1;
    let k = FnKernel::leak("bad_axis", 1, |x, o| o.store(x[0].load().sum(2, true)));
    assert_at(
        &run_body(k, [8, 128]).unwrap_err(),
        line,
        "axis 2 is out of range for shape [8, 128]",
    );

    let line = line!() + 2;
    let k = FnKernel::leak("bad_slice", 1, |x, o| {
        o.store(x[0].load_slice((0, 64), [8, 128]))
    });
    assert_at(
        &run_body(k, [8, 128]).unwrap_err(),
        line,
        "dim 1: window 64..192 exceeds the ref's size 128",
    );

    let line = line!() + 2;
    let k = FnKernel::leak("bad_axis_pid", 1, |x, o| {
        o.store(x[0].load() * program_id(1).cast::<f32>())
    });
    assert_at(
        &run_body(k, [8, 128]).unwrap_err(),
        line,
        "axis 1 is out of range for a grid of rank 1",
    );

    let line = line!() + 2;
    let k = FnKernel::leak("bad_literal", 1, |x, o| {
        o.store(x[0].load() + (program_id(0) * 2.5).cast::<f32>())
    });
    assert_at(
        &run_body(k, [8, 128]).unwrap_err(),
        line,
        "constant 2.5 cannot be a i32",
    );

    let line = line!() + 2;
    let k = FnKernel::leak("bad_int", 1, |x, o| {
        o.store(x[0].load() + (iota::<i8>([8, 128], 0) + 300).cast::<f32>())
    });
    assert_at(
        &run_body(k, [8, 128]).unwrap_err(),
        line,
        "literal 300 does not fit in i8",
    );
}

#[test]
fn traced_if_cannot_change_a_rust_value() {
    let line = line!() + 3;
    let k = FnKernel::leak("bad_carry", 1, |x, o| {
        let mut scale = 1.0f64;
        (scale,) = tessera_lowering::trace::__if_else(
            program_id(0).eq(0),
            (scale,),
            |(_s,)| ((2.0,), ()),
            |(s,)| ((s,), ()),
        )
        .0;
        o.store(x[0].load() * scale);
    });
    let err = run_body(k, [8, 128]).unwrap_err();
    assert!(
        matches!(
            err,
            TraceError::NotTraced {
                construct: "if",
                ..
            }
        ),
        "{err}"
    );
    assert_at(&err, line, "is a Rust value that differs between them");
}

#[test]
fn a_value_escaping_its_branch_is_reported() {
    let line = line!() + 8;
    let k = FnKernel::leak("escape", 1, |x, o| {
        let leaked = std::cell::Cell::new(None);
        let set = |()| {
            leaked.set(Some(x[0].load()));
            ((), ())
        };
        tessera_lowering::trace::__if_else(program_id(0).eq(0), (), set, |()| ((), ()));
        o.store(leaked.get().unwrap());
    });
    assert_at(&run_body(k, [8, 128]).unwrap_err(), line, "outside of it");
}
