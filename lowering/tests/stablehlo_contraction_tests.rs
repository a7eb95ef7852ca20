//! The accumulator pattern (zero a scratch on the first step of the last, `arbitrary` axis,
//! add `dot` blocks to it every step, write it out on the last) is emitted as one whole-array
//! `dot_general`, for any blocks and dtypes; kernels that only look like it take the batched
//! form or the grid loop. When a Python with jax is installed (see `tests/jaxlib_oracle`), the modules run on
//! random inputs against float64 references and the interpreter.

mod common;
mod jaxlib_oracle;

use common::kernels::matmul;
use common::{assert_close, random, ref_matmul, rng};
use jaxlib_oracle::run_with_jaxlib;
use tessera_lowering::interp;
use tessera_lowering::kernel::{Generic, Kernel, KernelInfo, ParamInfo, ParamRole};
use tessera_lowering::stablehlo::{emit_kernel, emit_kernel_as, Form};
use tessera_lowering::trace::*;
use tessera_lowering::{DType, HostTensor};
use DimensionSemantics::{Arbitrary, Parallel};

const fn p(name: &'static str, role: ParamRole) -> ParamInfo {
    ParamInfo {
        name,
        role,
        dtype: Some(DType::F32),
    }
}
use ParamRole::{Input as In, Output as Out, Scratch as Scr};
const PARAMS: [ParamInfo; 4] = [p("x", In), p("y", In), p("o", Out), p("acc", Scr)];

/// An f32 matmul-like kernel over (x, y, o, acc) whose body is `$body(k, x, y, o, acc)`,
/// `k` being `program_id(2)`.
macro_rules! kernel {
    ($name:ident, |$k:ident, $x:ident, $y:ident, $o:ident, $acc:ident| $body:block) => {
        struct $name;
        impl Kernel for $name {
            fn info(&self) -> &'static KernelInfo {
                static INFO: KernelInfo = KernelInfo {
                    name: stringify!($name), file: file!(), line: line!(), column: 1,
                    generic: Generic::None, params: &PARAMS,
                };
                &INFO
            }
            fn trace(&self, t: &mut KernelTracer, _: Option<DType>) -> Result<(), TraceError> {
                let ($x, $y, $o, $acc) = (
                    t.input::<f32>(0)?,
                    t.input::<f32>(1)?,
                    t.output::<f32>(0)?,
                    t.scratch::<f32>(0)?,
                );
                let $k = program_id(2);
                $body
                Ok(())
            }
        }
    };
}

/// `if cond { then() }`.
fn when(cond: Scalar<bool>, then: impl FnOnce()) {
    __if_else(
        cond,
        (),
        move |c| {
            then();
            (c, ())
        },
        |c| (c, ()),
    );
}

kernel!(TransposedK, |k, x, y, o, acc| {
    when(k.eq(0), || {
        acc.store(zeros::<f32>().broadcast_to(acc.shape()))
    });
    acc.store(acc.load() + dot_t(x.load(), y.load()));
    when(k.eq(num_programs(2) - 1), || o.store(acc.load()));
});

kernel!(NoInitK, |k, x, y, o, acc| {
    acc.store(acc.load() + dot(x.load(), y.load()));
    when(k.eq(num_programs(2) - 1), || o.store(acc.load()));
});

kernel!(StoresEveryStepK, |k, x, y, o, acc| {
    when(k.eq(0), || {
        acc.store(zeros::<f32>().broadcast_to(acc.shape()))
    });
    acc.store(acc.load() + dot(x.load(), y.load()));
    o.store(acc.load());
});

kernel!(DecaysK, |k, x, y, o, acc| {
    when(k.eq(0), || {
        acc.store(zeros::<f32>().broadcast_to(acc.shape()))
    });
    acc.store(acc.load() * 0.5 + dot(x.load(), y.load()));
    when(k.eq(num_programs(2) - 1), || o.store(acc.load()));
});

kernel!(SumsAcrossPointsK, |k, x, y, o, acc| {
    // Zeroed once for the whole grid: every output block gets the running total of all
    // blocks before it (a kernel breaking the promise `parallel` makes).
    let first = program_id(0).eq(0) & program_id(1).eq(0) & k.eq(0);
    when(first, || {
        acc.store(zeros::<f32>().broadcast_to(acc.shape()))
    });
    acc.store(acc.load() + dot(x.load(), y.load()));
    when(k.eq(num_programs(2) - 1), || o.store(acc.load()));
});

/// `[m, n, k]` in `[bm, bn, bk]` blocks on grid `(i, j, k)`; y is `[n, k]` when `y_t`.
fn program(
    launch: Launch,
    dims: [usize; 3],
    blocks: [usize; 3],
    dtype: DType,
    y_t: bool,
) -> KernelProgram {
    let ([m, n, k], [bm, bn, bk]) = (dims, blocks);
    let y = if y_t {
        (BlockSpec::new([bn, bk], |_i, j, k| [j, k]), vec![n, k])
    } else {
        (BlockSpec::new([bk, bn], |_i, j, k| [k, j]), vec![k, n])
    };
    launch
        .grid([m / bm, n / bn, k / bk])
        .input(BlockSpec::new([bm, bk], |i, _j, k| [i, k]))
        .input(y.0)
        .output(BlockSpec::new([bm, bn], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([bm, bn]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(dtype, vec![m, k]), (dtype, y.1)])
        .unwrap()
}

/// Runs `text` with jaxlib if installed (`None`: skipped).
fn run(text: &str, inputs: &[HostTensor], out: &BlockOperand) -> Option<HostTensor> {
    let outs = [(out.dtype, out.array_shape.clone())];
    run_with_jaxlib(text, inputs, &outs)
        .map(|r| r.unwrap_or_else(|e| panic!("{e}\n{text}")).remove(0))
}

fn transpose(v: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|e| v[e % rows * cols + e / rows])
        .collect()
}

#[test]
fn accumulation_over_the_last_axis_is_one_dot_general() {
    // k steps: one (first == last), two (no middle), three and four.
    let cases = [
        ([16, 24, 8], [8, 8, 8]),
        ([16, 16, 16], [8, 8, 8]),
        ([8, 128, 384], [8, 128, 128]),
        ([32, 256, 512], [16, 128, 128]),
    ];
    for dtype in [DType::F32, DType::BF16] {
        for (dims, blocks) in cases {
            let [m, n, k] = dims;
            let p = program(matmul::launch(), dims, blocks, dtype, false);
            let text = emit_kernel(&p).unwrap();
            assert_eq!(
                text.matches("\"stablehlo.dot_general\"").count(),
                1,
                "{text}"
            );
            assert!(
                !text.contains("stablehlo.while") && !text.contains("dynamic_slice"),
                "{text}"
            );
            assert!(
                text.contains(&format!("-> tensor<{m}x{n}x{}>", dtype.name())),
                "{text}"
            );
            if dtype == DType::BF16 {
                // Accumulated in f32, rounded to the output once.
                assert_eq!(text.matches("\"stablehlo.convert\"").count(), 3, "{text}");
            }
            let mut r = rng(m as u64 + k as u64);
            let (x, y) = (
                random(&mut r, dtype, &[m, k]),
                random(&mut r, dtype, &[k, n]),
            );
            let want = ref_matmul(&x.to_f64_vec(), &y.to_f64_vec(), m, n, k);
            let looped = emit_kernel_as(&p, Form::GridLoop).unwrap();
            for (form, t) in [("contraction", &text), ("grid loop", &looped)] {
                if let Some(out) = run(t, &[x.clone(), y.clone()], &p.outputs[0]) {
                    assert_close(
                        &out,
                        &want,
                        &format!("{form} {dtype} {dims:?} in {blocks:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn transposed_operands_are_contracted_where_they_lie() {
    let (dims, blocks) = ([16, 256, 384], [8, 128, 128]);
    let [m, n, k] = dims;
    let p = program(Launch::new(&TransposedK), dims, blocks, DType::F32, true);
    let text = emit_kernel(&p).unwrap();
    assert!(
        text.contains("lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]"),
        "{text}"
    );
    assert!(
        !text.contains("stablehlo.while") && !text.contains("stablehlo.transpose"),
        "{text}"
    );
    let mut r = rng(21);
    let (x, y) = (
        random(&mut r, DType::F32, &[m, k]),
        random(&mut r, DType::F32, &[n, k]),
    );
    if let Some(out) = run(&text, &[x.clone(), y.clone()], &p.outputs[0]) {
        let want = ref_matmul(&x.to_f64_vec(), &transpose(&y.to_f64_vec(), n, k), m, n, k);
        assert_close(&out, &want, "x @ y^T");
    }
}

/// Bodies that differ from the pattern (no zeroing, a store on every step, an extra op on
/// the accumulator) and a launch whose output blocks are placed transposed are not
/// contracted, and compute what the interpreter does.
#[test]
fn look_alikes_are_not_contracted() {
    let (dims, blocks) = ([16, 16, 24], [8, 8, 8]);
    let [m, n, k] = dims;
    let transposed_out = matmul::launch()
        .grid([2, 2, 3])
        .input(BlockSpec::new([8, 8], |i, _j, k| [i, k]))
        .input(BlockSpec::new([8, 8], |_i, j, k| [k, j]))
        .output(BlockSpec::new([8, 8], |i, j, _k| [j, i]), [m, n])
        .scratch(Vmem::<f32>::new([8, 8]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(DType::F32, vec![m, k]), (DType::F32, vec![k, n])])
        .unwrap();
    // Not the contraction: the batched form (their scratch is zeroed on each parallel
    // point's first step), or the grid loop where the scratch carries from one parallel
    // point to the next (never zeroed).
    let programs = [
        (
            program(Launch::new(&NoInitK), dims, blocks, DType::F32, false),
            Form::GridLoop,
        ),
        (
            program(
                Launch::new(&StoresEveryStepK),
                dims,
                blocks,
                DType::F32,
                false,
            ),
            Form::Batched,
        ),
        (
            program(Launch::new(&DecaysK), dims, blocks, DType::F32, false),
            Form::Batched,
        ),
        (transposed_out, Form::Batched),
    ];
    let mut r = rng(22);
    let (x, y) = (
        random(&mut r, DType::F32, &[m, k]),
        random(&mut r, DType::F32, &[k, n]),
    );
    for (p, form) in &programs {
        let text = emit_kernel(p).unwrap();
        assert_eq!(text, emit_kernel_as(p, *form).unwrap(), "{}", p.name);
        if let Some(out) = run(&text, &[x.clone(), y.clone()], &p.outputs[0]) {
            let want = interp::run(p, &[x.clone(), y.clone()]).unwrap();
            assert_close(&out, &want[0].to_f64_vec(), &p.name);
        }
    }
}

/// A look-alike is batched only where keeping its scratch per parallel point gives the grid
/// loop's result: not when the scratch carries a total from one parallel point to the next,
/// nor when an `arbitrary` axis comes before a parallel one (a point's steps then do not run
/// back to back, so another point's step sits between them).
#[test]
fn scratch_shared_between_parallel_points_keeps_the_grid_loop() {
    let (dims, blocks) = ([16, 16, 24], [8, 8, 8]);
    let [m, n, k] = dims;
    let carries = program(
        Launch::new(&SumsAcrossPointsK),
        dims,
        blocks,
        DType::F32,
        false,
    );
    let arbitrary_first = Launch::new(&StoresEveryStepK)
        .grid([2, 2, 3])
        .input(BlockSpec::new([8, 8], |i, _j, k| [i, k]))
        .input(BlockSpec::new([8, 8], |_i, j, k| [k, j]))
        .output(BlockSpec::new([8, 8], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([8, 8]))
        .semantics([Arbitrary, Parallel, Arbitrary])
        .trace_program(&[(DType::F32, vec![m, k]), (DType::F32, vec![k, n])])
        .unwrap();
    let mut r = rng(23);
    let (x, y) = (
        random(&mut r, DType::F32, &[m, k]),
        random(&mut r, DType::F32, &[k, n]),
    );
    for p in [&carries, &arbitrary_first] {
        let text = emit_kernel(p).unwrap();
        assert_eq!(
            text,
            emit_kernel_as(p, Form::GridLoop).unwrap(),
            "{}",
            p.name
        );
        if let Some(out) = run(&text, &[x.clone(), y.clone()], &p.outputs[0]) {
            let want = interp::run(p, &[x.clone(), y.clone()]).unwrap();
            assert_close(&out, &want[0].to_f64_vec(), &p.name);
        }
    }
    // The batched form, asked for, keeps one total per parallel point: the last block
    // differs from the grid loop's running total.
    let batched = emit_kernel_as(&carries, Form::Batched).unwrap();
    if let Some(out) = run(&batched, &[x.clone(), y.clone()], &carries.outputs[0]) {
        let want = interp::run(&carries, &[x.clone(), y.clone()]).unwrap()[0].to_f64_vec();
        let got = out.to_f64_vec();
        assert!(got.iter().zip(&want).any(|(a, b)| (a - b).abs() > 1e-3));
    }
}
