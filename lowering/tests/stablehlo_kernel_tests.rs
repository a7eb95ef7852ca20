//! Kernel -> StableHLO: both forms of real traced kernels. Structure is checked always; when
//! a Python with jax is installed (see `tests/jaxlib_oracle`), the modules are verified and run
//! on XLA's CPU client: grid loop == batched form, and both == a float64 reference.

mod jaxlib_oracle;

use half::bf16;
use jaxlib_oracle::run_with_jaxlib;
use rand::{Rng, SeedableRng};
use tessera_lowering::ir::MemorySpace;
use tessera_lowering::kernel::{Generic, Kernel, KernelInfo, ParamInfo, ParamRole};
use tessera_lowering::stablehlo::{
    batched_form_applies, emit_kernel, emit_kernel_as, EmitError, Form,
};
use tessera_lowering::trace::*;
use tessera_lowering::{DType, HostTensor};

const fn p(name: &'static str, role: ParamRole, dtype: DType) -> ParamInfo {
    ParamInfo {
        name,
        role,
        dtype: Some(dtype),
    }
}
use ParamRole::{Input as In, Output as Out, Scratch as Scr};

/// A hand-written `#[tpu_kernel]` expansion (the macro crate is not a dependency here).
macro_rules! kernel {
    ($name:ident, [$($param:expr),*], |$t:ident| $body:block) => {
        struct $name;
        impl Kernel for $name {
            fn info(&self) -> &'static KernelInfo {
                static INFO: KernelInfo = KernelInfo {
                    name: stringify!($name), file: file!(), line: line!(), column: 1,
                    generic: Generic::None, params: &[$($param),*],
                };
                &INFO
            }
            fn trace(&self, $t: &mut KernelTracer, _: Option<DType>) -> Result<(), TraceError> {
                $body
                Ok(())
            }
        }
    };
}

kernel!(
    AddK,
    [
        p("x", In, DType::F32),
        p("y", In, DType::F32),
        p("o", Out, DType::F32)
    ],
    |t| {
        let (x, y, o) = (t.input::<f32>(0)?, t.input::<f32>(1)?, t.output::<f32>(0)?);
        o.store(x.load() + y.load());
    }
);

kernel!(
    SwishK,
    [p("x", In, DType::BF16), p("o", Out, DType::BF16)],
    |t| {
        let (x, o) = (t.input::<bf16>(0)?, t.output::<bf16>(0)?);
        let v = x.load();
        o.store(v * sigmoid(v));
    }
);

kernel!(
    MatmulK,
    [
        p("x", In, DType::F32),
        p("y", In, DType::F32),
        p("o", Out, DType::F32),
        p("acc", Scr, DType::F32)
    ],
    |t| {
        let (x, y, o, acc) = (
            t.input::<f32>(0)?,
            t.input::<f32>(1)?,
            t.output::<f32>(0)?,
            t.scratch::<f32>(0)?,
        );
        let k = program_id(2);
        __if_else(
            k.eq(0),
            (),
            |c| {
                acc.store(zeros::<f32>().broadcast_to(acc.shape()));
                (c, ())
            },
            |c| (c, ()),
        );
        acc.store(acc.load() + dot(x.load(), y.load()));
        __if_else(
            k.eq(num_programs(2) - 1),
            (),
            |c| {
                o.store(acc.load());
                (c, ())
            },
            |c| (c, ()),
        );
    }
);

kernel!(
    SoftmaxK,
    [p("x", In, DType::F32), p("o", Out, DType::F32)],
    |t| {
        let (x, o) = (t.input::<f32>(0)?, t.output::<f32>(0)?);
        let v = x.load();
        let shape = x.shape();
        let e = exp(v - v.max(1, true).broadcast_to(shape.clone()));
        o.store(e / e.sum(1, true).broadcast_to(shape));
    }
);

kernel!(
    ChunkSumK,
    [p("x", In, DType::F32), p("o", Out, DType::F32)],
    |t| {
        let (x, o) = (t.input::<f32>(0)?, t.output::<f32>(0)?);
        let acc0 = zeros::<f32>().broadcast_to([8, 64]);
        let acc = __fori(0, 4, acc0, |j, acc| {
            acc + x.load_slice((0, j * 64), [8, 64])
        });
        o.store(acc);
    }
);

kernel!(
    BiasPidK,
    [
        p("x", In, DType::F32),
        p("b", In, DType::F32),
        p("o", Out, DType::F32)
    ],
    |t| {
        let (x, b, o) = (t.input::<f32>(0)?, t.input::<f32>(1)?, t.output::<f32>(0)?);
        let pid = program_id(0).cast::<f32>();
        o.store(x.load() + b.load().broadcast_to([8, 128]) + pid);
    }
);

kernel!(
    FlipFirstK,
    [p("x", In, DType::F32), p("o", Out, DType::F32)],
    |t| {
        let (x, o) = (t.input::<f32>(0)?, t.output::<f32>(0)?);
        __if_else(
            program_id(0).eq(0),
            (),
            |c| {
                o.store(-x.load());
                (c, ())
            },
            |c| {
                o.store(x.load());
                (c, ())
            },
        );
    }
);

kernel!(
    HalveWhileOverK,
    [p("x", In, DType::F32), p("o", Out, DType::F32)],
    |t| {
        let (x, o) = (t.input::<f32>(0)?, t.output::<f32>(0)?);
        let v = x.load();
        // A data-dependent loop in a per-step branch: batched, every step would run it.
        let ((), y) = __if_else(
            program_id(0).eq(0),
            (),
            |c| {
                let y = while_loop(v, |y| y.sum([0, 1], false).to_scalar().gt(1.0), |y| y * 0.5);
                (c, y)
            },
            |c| (c, v),
        );
        o.store(y);
    }
);

kernel!(
    RunningSumK,
    [
        p("x", In, DType::F32),
        p("o", Out, DType::F32),
        p("s", Scr, DType::F32)
    ],
    |t| {
        let (x, o, s) = (
            t.input::<f32>(0)?,
            t.output::<f32>(0)?,
            t.scratch::<f32>(0)?,
        );
        // Zeroed on the first step only: each block's output is the sum of the blocks up to
        // it, carried in scratch across parallel steps (breaking the promise `parallel` makes).
        __if_else(
            program_id(0).eq(0),
            (),
            |c| {
                s.store(zeros::<f32>().broadcast_to(s.shape()));
                (c, ())
            },
            |c| (c, ()),
        );
        s.store(s.load() + x.load());
        o.store(s.load());
    }
);

kernel!(
    UniformDotIfK,
    [
        p("x", In, DType::F32),
        p("w", In, DType::F32),
        p("o", Out, DType::F32)
    ],
    |t| {
        let (x, w, o) = (t.input::<f32>(0)?, t.input::<f32>(1)?, t.output::<f32>(0)?);
        let v = x.load();
        let ((), y) = __if_else(
            num_programs(0).gt(1),
            (),
            |c| (c, dot(v, w.load())),
            |c| (c, v),
        );
        o.store(y);
    }
);

kernel!(
    UniformIfK,
    [p("x", In, DType::F32), p("o", Out, DType::F32)],
    |t| {
        let (x, o) = (t.input::<f32>(0)?, t.output::<f32>(0)?);
        let v = x.load();
        let ((), y) = __if_else(num_programs(0).gt(1), (), |c| (c, v * 2.0), |c| (c, v));
        o.store(y);
    }
);

kernel!(
    MatmulFullKK,
    [
        p("x", In, DType::BF16),
        p("y", In, DType::BF16),
        p("o", Out, DType::F32)
    ],
    |t| {
        let (x, y, o) = (
            t.input::<bf16>(0)?,
            t.input::<bf16>(1)?,
            t.output::<f32>(0)?,
        );
        o.store(dot_t(x.load(), y.load()));
    }
);

kernel!(
    CopyK,
    [p("x", In, DType::F32), p("o", Out, DType::F32)],
    |t| {
        let (x, o) = (t.input::<f32>(0)?, t.output::<f32>(0)?);
        o.store(x.load());
    }
);

fn add_program(m: usize, n: usize, bm: usize, bn: usize) -> KernelProgram {
    Launch::new(&AddK)
        .grid([m / bm, n / bn])
        .input(BlockSpec::new([bm, bn], |i, j| [i, j]))
        .input(BlockSpec::new([bm, bn], |i, j| [i, j]))
        .output(BlockSpec::new([bm, bn], |i, j| [i, j]), [m, n])
        .trace_program(&[(DType::F32, vec![m, n]), (DType::F32, vec![m, n])])
        .unwrap()
}

fn matmul_program(m: usize, n: usize, k: usize, b: usize) -> KernelProgram {
    use DimensionSemantics::{Arbitrary, Parallel};
    Launch::new(&MatmulK)
        .grid([m / b, n / b, k / b])
        .input(BlockSpec::new([b, b], |i, _j, k| [i, k]))
        .input(BlockSpec::new([b, b], |_i, j, k| [k, j]))
        .output(BlockSpec::new([b, b], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([b, b]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(DType::F32, vec![m, k]), (DType::F32, vec![k, n])])
        .unwrap()
}

fn softmax_program(m: usize, n: usize, bm: usize) -> KernelProgram {
    Launch::new(&SoftmaxK)
        .grid([m / bm])
        .input(BlockSpec::new([bm, n], |i| (i, 0)))
        .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
        .trace_program(&[(DType::F32, vec![m, n])])
        .unwrap()
}

/// Grid axes in the "wrong" order (column blocks outer), a bias broadcast over one grid axis,
/// and `program_id` in the body.
fn bias_program() -> KernelProgram {
    Launch::new(&BiasPidK)
        .grid([2, 3])
        .input(BlockSpec::new([8, 128], |j, i| [i, j]))
        .input(BlockSpec::new([1, 128], |j, _i| (0, j)))
        .output(BlockSpec::new([8, 128], |j, i| [i, j]), [24, 256])
        .trace_program(&[(DType::F32, vec![24, 256]), (DType::F32, vec![1, 256])])
        .unwrap()
}

fn random(dtype: DType, shape: &[usize], seed: u64) -> HostTensor {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let vals: Vec<f64> = (0..shape.iter().product::<usize>())
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    HostTensor::from_f64(dtype, shape.to_vec(), &vals)
}

/// Parses, verifies and runs `text` if jax is installed (`None`: skipped).
fn run(text: &str, inputs: &[HostTensor], outs: &[(DType, Vec<usize>)]) -> Option<Vec<HostTensor>> {
    run_with_jaxlib(text, inputs, outs).map(|r| r.unwrap_or_else(|e| panic!("{e}\n{text}")))
}

fn max_rel_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// Emits both forms, checks their structure, runs both, and returns the loop form's outputs
/// after checking the batched form agrees within `tol`.
fn both_forms_agree(p: &KernelProgram, inputs: &[HostTensor], tol: f64) -> Option<Vec<HostTensor>> {
    let looped = emit_kernel_as(p, Form::GridLoop).unwrap();
    let batched = emit_kernel_as(p, Form::Batched).unwrap();
    if p.semantics
        .iter()
        .all(|s| *s == DimensionSemantics::Parallel)
    {
        assert_eq!(
            emit_kernel(p).unwrap(),
            batched,
            "Auto picks the batched form where legal"
        );
        assert!(!batched.contains("stablehlo.while") && !batched.contains("dynamic_slice"));
    }
    assert_eq!(looped.matches("\"stablehlo.while\"").count(), 1);
    let outs: Vec<(DType, Vec<usize>)> = p
        .outputs
        .iter()
        .map(|o| (o.dtype, o.array_shape.clone()))
        .collect();
    let a = run(&looped, inputs, &outs)?;
    let b = run(&batched, inputs, &outs)?;
    for (x, y) in a.iter().zip(&b) {
        let err = max_rel_err(&x.to_f64_vec(), &y.to_f64_vec());
        assert!(err <= tol, "forms differ by {err} for {}", p.name);
    }
    Some(a)
}

#[test]
fn elementwise_add_both_forms() {
    for (m, n, bm, bn) in [(16, 256, 8, 128), (8, 128, 8, 128), (32, 384, 16, 128)] {
        let p = add_program(m, n, bm, bn);
        let (x, y) = (
            random(DType::F32, &[m, n], 1),
            random(DType::F32, &[m, n], 2),
        );
        if let Some(out) = both_forms_agree(&p, &[x.clone(), y.clone()], 0.0) {
            let want: Vec<f64> = x
                .to_f64_vec()
                .iter()
                .zip(y.to_f64_vec())
                .map(|(a, b)| ((*a as f32) + (b as f32)) as f64)
                .collect();
            assert_eq!(out[0].to_f64_vec(), want);
        }
    }
}

#[test]
fn bf16_swish_computes_in_bf16() {
    let p = Launch::new(&SwishK)
        .grid([2])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&[(DType::BF16, vec![16, 128])])
        .unwrap();
    let text = emit_kernel(&p).unwrap();
    assert!(text.contains("\"stablehlo.logistic\"") && text.contains("tensor<16x128xbf16>"));
    assert!(!text.contains("xf32>"), "bf16 math stays in bf16");
    let x = random(DType::BF16, &[16, 128], 3);
    if let Some(out) = both_forms_agree(&p, std::slice::from_ref(&x), 0.0) {
        let want: Vec<f64> = x
            .to_f64_vec()
            .iter()
            .map(|v| v / (1.0 + (-v).exp()))
            .collect();
        assert!(max_rel_err(&out[0].to_f64_vec(), &want) < 1e-2);
    }
}

#[test]
fn softmax_rows_both_forms() {
    for (m, n, bm) in [(16, 128, 8), (24, 256, 8), (8, 128, 8)] {
        let p = softmax_program(m, n, bm);
        let x = random(DType::F32, &[m, n], 4);
        if let Some(out) = both_forms_agree(&p, std::slice::from_ref(&x), 1e-6) {
            let xv = x.to_f64_vec();
            let mut want = Vec::new();
            for r in xv.chunks(n) {
                let mx = r.iter().cloned().fold(f64::MIN, f64::max);
                let s: f64 = r.iter().map(|v| (v - mx).exp()).sum();
                want.extend(r.iter().map(|v| (v - mx).exp() / s));
            }
            // f32 sums of 128 products of magnitude <= 4: rounding <= 128 * 4 * 2^-24 ~ 3e-5.
            let err = max_rel_err(&out[0].to_f64_vec(), &want);
            assert!(err < 1e-4, "{err}");
        }
    }
}

#[test]
fn permuted_grid_broadcast_operand_and_program_id() {
    let p = bias_program();
    assert_eq!(batched_form_applies(&p), Ok(()));
    let (x, b) = (
        random(DType::F32, &[24, 256], 5),
        random(DType::F32, &[1, 256], 6),
    );
    if let Some(out) = both_forms_agree(&p, &[x.clone(), b.clone()], 0.0) {
        let (xv, bv) = (x.to_f64_vec(), b.to_f64_vec());
        let want: Vec<f64> = (0..24 * 256)
            .map(|e| ((xv[e] as f32 + bv[e % 256] as f32) + (e % 256 / 128) as f32) as f64)
            .collect();
        assert_eq!(out[0].to_f64_vec(), want);
    }
}

#[test]
fn matmul_with_scratch_loops_only_over_the_reduction_axis() {
    for (m, n, k, b) in [(16, 16, 32, 8), (8, 24, 16, 8), (128, 128, 256, 128)] {
        let p = matmul_program(m, n, k, b);
        assert_eq!(batched_form_applies(&p), Ok(()));
        let looped = emit_kernel_as(&p, Form::GridLoop).unwrap();
        // The grid loop, plus `if`s for the program_id conditions, f32 dot at full precision.
        assert!(
            looped.contains("\"stablehlo.if\"") && looped.contains("#stablehlo<precision HIGHEST>")
        );
        // Blocks are sliced in and out, except blocks that cover their whole array.
        let sliced = |o: &BlockOperand| usize::from(o.block_shape != o.array_shape);
        let reads: usize = p.inputs.iter().chain(&p.outputs).map(sliced).sum();
        assert_eq!(looped.matches("\"stablehlo.dynamic_slice\"").count(), reads);
        assert_eq!(
            looped.matches("\"stablehlo.dynamic_update_slice\"").count(),
            sliced(&p.outputs[0])
        );
        // Auto recognizes the accumulator: one matmul of the whole arrays, no loop.
        let auto = emit_kernel(&p).unwrap();
        assert_eq!(auto.matches("\"stablehlo.dot_general\"").count(), 1);
        assert!(!auto.contains("stablehlo.while"), "{auto}");
        // Batched over the parallel (i, j) axes, looping over k: one matmul of x[:, k-block]
        // by y[k-block, :] per k step, the accumulator one per (i, j) block.
        let batched = emit_kernel_as(&p, Form::Batched).unwrap();
        assert_eq!(batched.matches("\"stablehlo.while\"").count(), 1);
        assert_eq!(batched.matches("\"stablehlo.dot_general\"").count(), 1);
        assert!(batched.contains("lhs_batching_dimensions = [], rhs_batching_dimensions = []"));
        let (x, y) = (
            random(DType::F32, &[m, k], 7),
            random(DType::F32, &[k, n], 8),
        );
        // Both forms contract k-blocks in order; their matmul shapes differ, so f32 rounding may.
        if let Some(out) = both_forms_agree(&p, &[x.clone(), y.clone()], 1e-5) {
            let (xv, yv) = (x.to_f64_vec(), y.to_f64_vec());
            let want: Vec<f64> = (0..m * n)
                .map(|e| (0..k).map(|t| xv[e / n * k + t] * yv[t * n + e % n]).sum())
                .collect();
            let whole = run(&auto, &[x.clone(), y.clone()], &[(DType::F32, vec![m, n])]);
            for got in [&out[0], &whole.unwrap()[0]] {
                let err = max_rel_err(&got.to_f64_vec(), &want);
                assert!(
                    err < 1e-6 * k as f64,
                    "{m}x{n}x{k}: error {err} (f32 sums of k terms)"
                );
            }
        }
    }
}

#[test]
fn fori_with_uniform_dynamic_slices_is_batched() {
    let p = Launch::new(&ChunkSumK)
        .grid([2])
        .input(BlockSpec::new([8, 256], |i| (i, 0)))
        .output(BlockSpec::new([8, 64], |i| (i, 0)), [16, 64])
        .trace_program(&[(DType::F32, vec![16, 256])])
        .unwrap();
    // The loop counter is the same in every grid step, so the slices stay dynamic_slices.
    assert_eq!(batched_form_applies(&p), Ok(()));
    let looped = emit_kernel_as(&p, Form::GridLoop).unwrap();
    let batched = emit_kernel_as(&p, Form::Batched).unwrap();
    assert_eq!(
        looped.matches("\"stablehlo.while\"").count(),
        2,
        "grid loop + fori"
    );
    assert_eq!(
        batched.matches("\"stablehlo.while\"").count(),
        1,
        "fori only"
    );
    for text in [&looped, &batched] {
        let x = random(DType::F32, &[16, 256], 9);
        if let Some(out) = run(
            text,
            std::slice::from_ref(&x),
            &[(DType::F32, vec![16, 64])],
        ) {
            let xv = x.to_f64_vec();
            let want: Vec<f64> = (0..16 * 64)
                .map(|e| (0..4).map(|j| xv[e / 64 * 256 + j * 64 + e % 64]).sum())
                .collect();
            assert!(max_rel_err(&out[0].to_f64_vec(), &want) < 1e-6);
        }
    }
}

#[test]
fn per_step_and_cheap_ifs_are_selected_when_batched() {
    let launch = |k: &'static dyn Kernel| {
        Launch::new(k)
            .grid([3])
            .input(BlockSpec::new([8, 128], |i| (i, 0)))
            .output(BlockSpec::new([8, 128], |i| (i, 0)), [24, 128])
            .trace_program(&[(DType::F32, vec![24, 128])])
            .unwrap()
    };
    let x = random(DType::F32, &[24, 128], 12);
    // Both branches run for every step, each step selects its own.
    let p = launch(&FlipFirstK);
    assert_eq!(batched_form_applies(&p), Ok(()));
    let text = emit_kernel(&p).unwrap();
    assert!(text.contains("stablehlo.select"), "{text}");
    assert!(!text.contains("\"stablehlo.while\"") && !text.contains("\"stablehlo.if\""));
    let flipped: Vec<f64> = x
        .to_f64_vec()
        .iter()
        .enumerate()
        .map(|(e, v)| if e < 8 * 128 { -v } else { *v })
        .collect();
    if let Some(out) = both_forms_agree(&p, std::slice::from_ref(&x), 0.0) {
        assert_eq!(out[0].to_f64_vec(), flipped);
    }
    // A `while` in a per-step branch could run forever in the steps that skip it.
    let p = launch(&HalveWhileOverK);
    let reason = batched_form_applies(&p).unwrap_err();
    assert!(
        reason.contains("condition that depends on the grid step, and a branch has a `while` loop"),
        "{reason}"
    );
    let text = emit_kernel(&p).unwrap();
    assert!(text.contains("\"stablehlo.while\"") && text.contains("\"stablehlo.if\""));
    let p = launch(&UniformIfK);
    if let Some(out) = both_forms_agree(&p, std::slice::from_ref(&x), 0.0) {
        let want: Vec<f64> = x.to_f64_vec().iter().map(|v| v * 2.0).collect();
        assert_eq!(out[0].to_f64_vec(), want);
    }
    // The same in every step, with cheap branches: a select batched (XLA would copy what a
    // `stablehlo.if` passes through), a `stablehlo.if` in the grid loop.
    let batched = emit_kernel(&p).unwrap();
    assert!(batched.contains("stablehlo.select") && !batched.contains("\"stablehlo.if\""));
    assert!(emit_kernel_as(&p, Form::GridLoop)
        .unwrap()
        .contains("\"stablehlo.if\""));
    // A branch with a `dot` costs more than the copies: it stays a `stablehlo.if`.
    let p = Launch::new(&UniformDotIfK)
        .grid([3])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .input(BlockSpec::new([128, 128], |_i| (0, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [24, 128])
        .trace_program(&[(DType::F32, vec![24, 128]), (DType::F32, vec![128, 128])])
        .unwrap();
    let batched = emit_kernel(&p).unwrap();
    assert!(batched.contains("\"stablehlo.if\"") && !batched.contains("stablehlo.select"));
    let w = random(DType::F32, &[128, 128], 13);
    if let Some(out) = both_forms_agree(&p, &[x.clone(), w.clone()], 1e-5) {
        let (xv, wv) = (x.to_f64_vec(), w.to_f64_vec());
        let want: Vec<f64> = (0..24 * 128)
            .map(|e| {
                (0..128)
                    .map(|k| xv[e / 128 * 128 + k] * wv[k * 128 + e % 128])
                    .sum()
            })
            .collect();
        // f32 sums of 128 products of magnitude <= 4: rounding <= 128 * 4 * 2^-24 ~ 3e-5.
        let err = max_rel_err(&out[0].to_f64_vec(), &want);
        assert!(err < 1e-4, "{err}");
    }
}

#[test]
fn output_revisited_across_an_axis_is_not_batched() {
    // Every step of axis 1 writes the same output block: the loop's last step wins, which a
    // side-by-side form cannot express, so Auto falls back to the loop.
    let p = Launch::new(&AddK)
        .grid([2, 2])
        .input(BlockSpec::new([8, 128], |i, j| [i, j]))
        .input(BlockSpec::new([8, 128], |i, j| [i, j]))
        .output(BlockSpec::new([8, 128], |i, _j| (i, 0)), [16, 128])
        .trace_program(&[(DType::F32, vec![16, 256]), (DType::F32, vec![16, 256])])
        .unwrap();
    let reason = batched_form_applies(&p).unwrap_err();
    assert!(reason.contains("ignores grid axis 1"), "{reason}");
    let text = emit_kernel(&p).unwrap();
    assert!(text.contains("\"stablehlo.while\""));
    let (x, y) = (
        random(DType::F32, &[16, 256], 10),
        random(DType::F32, &[16, 256], 11),
    );
    if let Some(out) = run(
        &text,
        &[x.clone(), y.clone()],
        &[(DType::F32, vec![16, 128])],
    ) {
        let (xv, yv) = (x.to_f64_vec(), y.to_f64_vec());
        let want: Vec<f64> = (0..16 * 128)
            .map(|e| {
                let s = e / 128 * 256 + 128 + e % 128;
                (xv[s] as f32 + yv[s] as f32) as f64
            })
            .collect();
        assert_eq!(out[0].to_f64_vec(), want, "the last step (j = 1) wins");
    }
}

#[test]
fn launch_mismatches_are_errors() {
    let mut p = add_program(16, 256, 8, 128);
    p.inputs.pop();
    assert!(matches!(emit_kernel(&p), Err(EmitError::Launch { .. })));
    let mut p = add_program(16, 256, 8, 128);
    p.outputs[0].block_shape = vec![8, 64];
    let err = emit_kernel(&p).unwrap_err().to_string();
    assert!(err.contains("should be a ref of [8, 64]"), "{err}");
    let mut p = add_program(16, 256, 8, 128);
    p.grid = vec![2];
    p.semantics.pop();
    let err = emit_kernel(&p).unwrap_err().to_string();
    assert!(
        err.contains("index map takes 2 grid indices, the grid has 1"),
        "{err}"
    );
    let mut p = matmul_program(16, 16, 16, 8);
    p.scratch[0].space = MemorySpace::Smem;
    assert!(
        emit_kernel(&p).is_ok(),
        "the memory space does not change StableHLO"
    );
}

#[test]
fn gridless_launch_is_one_step() {
    let p = Launch::new(&AddK)
        .input(BlockSpec::new([8, 128], || [0, 0]))
        .input(BlockSpec::new([8, 128], || [0, 0]))
        .output(BlockSpec::new([8, 128], || [0, 0]), [8, 128])
        .trace_program(&[(DType::F32, vec![8, 128]), (DType::F32, vec![8, 128])])
        .unwrap();
    let batched = emit_kernel(&p).unwrap();
    assert!(batched.contains("\"stablehlo.add\"(%arg0, %arg1) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>"));
    let (x, y) = (
        random(DType::F32, &[8, 128], 13),
        random(DType::F32, &[8, 128], 14),
    );
    both_forms_agree(&p, &[x, y], 0.0);
}

#[test]
fn blocks_from_different_grid_axes_meet_in_one_matmul() {
    // o[i, j] = x[i] @ y[j]^T over a 2-D parallel grid: x's rows fold axis 0 and y's axis 1,
    // so all blocks meet in one matmul of the whole arrays, nothing broadcast or moved.
    let (m, n, k, b) = (32, 24, 64, 8);
    let p = Launch::new(&MatmulFullKK)
        .grid([m / b, n / b])
        .input(BlockSpec::new([b, k], |i, _j| (i, 0)))
        .input(BlockSpec::new([b, k], |_i, j| (j, 0)))
        .output(BlockSpec::new([b, b], |i, j| [i, j]), [m, n])
        .trace_program(&[(DType::BF16, vec![m, k]), (DType::BF16, vec![n, k])])
        .unwrap();
    let text = emit_kernel(&p).unwrap();
    assert_eq!(text.matches("\"stablehlo.dot_general\"").count(), 1);
    assert!(text.contains("lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]"));
    for absent in ["broadcast_in_dim", "transpose", "reshape"] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    assert!(text.contains("-> tensor<32x24xf32>"), "{text}");
    let (x, y) = (
        random(DType::BF16, &[m, k], 15),
        random(DType::BF16, &[n, k], 16),
    );
    // The two forms contract in differently shaped matmuls: same math, f32 rounding may differ.
    if let Some(out) = both_forms_agree(&p, &[x.clone(), y.clone()], 1e-5) {
        let (xv, yv) = (x.to_f64_vec(), y.to_f64_vec());
        let want: Vec<f64> = (0..m * n)
            .map(|e| (0..k).map(|t| xv[e / n * k + t] * yv[e % n * k + t]).sum())
            .collect();
        // f32 sums of 128 products of magnitude <= 4: rounding <= 128 * 4 * 2^-24 ~ 3e-5.
        let err = max_rel_err(&out[0].to_f64_vec(), &want);
        assert!(err < 1e-4, "{err}");
    }
}

#[test]
fn computed_index_maps_gather_their_blocks() {
    // Blocks read in reverse order: `2 - i` is not a plain grid index, so the batched form
    // evaluates the map for all steps at once and gathers each step's block.
    let p = Launch::new(&CopyK)
        .grid([3])
        .input(BlockSpec::new([8, 128], |i| (2 - i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [24, 128])
        .trace_program(&[(DType::F32, vec![24, 128])])
        .unwrap();
    batched_form_applies(&p).unwrap();
    let text = emit_kernel(&p).unwrap();
    assert!(text.contains("\"stablehlo.subtract\""));
    assert!(text.contains("\"stablehlo.gather\""), "{text}");
    assert!(!text.contains("\"stablehlo.while\""), "{text}");
    let x = random(DType::F32, &[24, 128], 17);
    if let Some(out) = run(
        &text,
        std::slice::from_ref(&x),
        &[(DType::F32, vec![24, 128])],
    ) {
        let xv = x.to_f64_vec();
        let want: Vec<f64> = (0..24 * 128)
            .map(|e| xv[(2 - e / (8 * 128)) * 8 * 128 + e % (8 * 128)])
            .collect();
        assert_eq!(out[0].to_f64_vec(), want);
    }
}

#[test]
fn blocks_shared_by_many_steps_are_not_gathered_for_each() {
    // 64 steps read 2 blocks: gathering a copy per step would take 32x the array.
    let p = Launch::new(&CopyK)
        .grid([64])
        .input(BlockSpec::new([8, 128], |i| (i / 32, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [512, 128])
        .trace_program(&[(DType::F32, vec![16, 128])])
        .unwrap();
    let reason = batched_form_applies(&p).unwrap_err();
    assert!(reason.contains("over 4x its array"), "{reason}");
    let text = emit_kernel(&p).unwrap();
    assert!(text.contains("\"stablehlo.while\""), "{text}");
    let x = random(DType::F32, &[16, 128], 18);
    if let Some(out) = run(
        &text,
        std::slice::from_ref(&x),
        &[(DType::F32, vec![512, 128])],
    ) {
        let xv = x.to_f64_vec();
        let want: Vec<f64> = (0..512 * 128)
            .map(|e| xv[(e / (8 * 128) / 32) * 8 * 128 + e % (8 * 128)])
            .collect();
        assert_eq!(out[0].to_f64_vec(), want);
    }
}

/// An elementwise body runs once on the whole arrays (which elements share a block cannot
/// matter); a body that reads `program_id` still gets true blocks, via transposes.
#[test]
fn elementwise_bodies_skip_the_block_transpose_only_when_legal() {
    let add = emit_kernel_as(&add_program(32, 384, 16, 128), Form::Batched).unwrap();
    assert!(
        add.contains("\"stablehlo.add\"(%arg0, %arg1) : (tensor<32x384xf32>, tensor<32x384xf32>)"),
        "{add}"
    );
    assert!(
        !add.contains("stablehlo.transpose") && !add.contains("stablehlo.reshape"),
        "{add}"
    );
    let bias = emit_kernel_as(&bias_program(), Form::Batched).unwrap();
    assert!(bias.contains("stablehlo.transpose"), "{bias}");
}

/// Auto batches an all-parallel grid only where no step reads scratch another step left: a
/// running sum carried in scratch keeps the grid loop (and its answer), the batched form
/// asked for explicitly gives each block alone.
#[test]
fn scratch_read_across_parallel_steps_keeps_the_grid_loop() {
    let p = Launch::new(&RunningSumK)
        .grid([3])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [24, 128])
        .scratch(Vmem::<f32>::new([8, 128]))
        .trace_program(&[(DType::F32, vec![24, 128])])
        .unwrap();
    assert_eq!(batched_form_applies(&p), Ok(()));
    let text = emit_kernel(&p).unwrap();
    assert_eq!(text, emit_kernel_as(&p, Form::GridLoop).unwrap());
    let x = random(DType::F32, &[24, 128], 14);
    let outs = [(DType::F32, vec![24, 128])];
    if let Some(out) = run(&text, std::slice::from_ref(&x), &outs) {
        let xv = x.to_f64_vec();
        let want: Vec<f64> = (0..24 * 128)
            .map(|e| (0..=e / 1024).map(|b| xv[b * 1024 + e % 1024]).sum())
            .collect();
        assert!(max_rel_err(&out[0].to_f64_vec(), &want) < 1e-6);
        let batched = emit_kernel_as(&p, Form::Batched).unwrap();
        let alone = run(&batched, std::slice::from_ref(&x), &outs).unwrap();
        assert!(max_rel_err(&alone[0].to_f64_vec(), &want) > 0.1);
    }
}
