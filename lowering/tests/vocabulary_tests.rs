//! The rest of the vocabulary on the interpreter: integer ops, iota, select, casts, shape
//! ops, transposed dots, SMEM scratch, slices (static and traced) and their bounds checks.

mod common;

use common::FnKernel;
use tessera_lowering::interp::{self, InterpError};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_lowering::HostTensor;

fn program(k: &'static FnKernel, shape: [usize; 2], n_in: usize) -> KernelProgram {
    let mut l = Launch::new(k).grid([1]);
    for _ in 0..n_in {
        l = l.input(BlockSpec::new(shape, |_| [0, 0]));
    }
    l.output(BlockSpec::new(shape, |_| [0, 0]), shape)
        .trace_program(&vec![(DType::F32, shape.to_vec()); n_in])
        .unwrap()
}

fn run1(k: &'static FnKernel, x: &HostTensor) -> Vec<f64> {
    let shape = [x.shape()[0], x.shape()[1]];
    interp::run(&program(k, shape, 1), std::slice::from_ref(x)).unwrap()[0].to_f64_vec()
}

fn ramp(rows: usize, cols: usize) -> HostTensor {
    HostTensor::from_f64(
        DType::F32,
        vec![rows, cols],
        &(0..rows * cols).map(|v| v as f64).collect::<Vec<_>>(),
    )
}

#[test]
fn iota_where_and_integer_arithmetic() {
    // o[r, c] = c % 3 == 0 ? -x : x / 2 ... via integer iota and select.
    let k = FnKernel::leak("select", 1, |x, o| {
        let cols = iota::<i32>([8, 128], 1);
        let third = (cols % 3).eq(0);
        let v = x[0].load();
        o.store(where_(third, -v, v / 2.0) + (cols / 64).cast::<f32>());
    });
    let x = ramp(8, 128);
    let out = run1(k, &x);
    for (f, got) in out.iter().enumerate() {
        let c = f % 128;
        let v = f as f64;
        let want = if c % 3 == 0 { -v } else { v / 2.0 } + (c / 64) as f64;
        assert_eq!(*got, want, "element {f}");
    }
}

#[test]
fn casts_truncate_and_round() {
    let k = FnKernel::leak("casts", 1, |x, o| {
        let v = x[0].load() * 0.37 - 100.0;
        o.store(
            v.cast::<i8>().cast::<f32>() + v.cast::<bf16>().cast::<f32>() * 0.0 + v.floor() * 0.0,
        );
    });
    let out = run1(k, &ramp(8, 128));
    for (f, got) in out.iter().enumerate() {
        let v = (f as f32 * 0.37f32 - 100.0f32) as f64;
        assert_eq!(*got, (v.trunc()).clamp(-128.0, 127.0), "element {f}");
    }
}

#[test]
fn transpose_reshape_broadcast_in_dim_and_dot_t() {
    let k = FnKernel::leak("shapes", 1, |x, o| {
        let v = x[0].load(); // [8, 128]
        let t = v.t().transpose([1, 0]); // back to [8, 128]
        let r = t.reshape([8, 2, 64]).sum(2, false); // [8, 2]
        let b = r.broadcast_in_dim([8, 2, 64], [0, 1]).reshape([8, 128]);
        let g = dot_t(v, v); // [8, 8]
        let d = g.sum(1, true); // [8, 1]
        o.store(b + d * 0.0 + dot_general(v.t(), v.t(), true, false).sum(1, true) * 0.0);
    });
    let x = ramp(8, 128);
    let out = run1(k, &x);
    for (f, got) in out.iter().enumerate() {
        let (r, c) = (f / 128, f % 128);
        let half = c / 64;
        let want: f64 = (0..64).map(|j| (r * 128 + half * 64 + j) as f64).sum();
        assert_eq!(*got, want, "element {f}");
    }
}

#[test]
fn dynamic_slices_in_a_loop_and_smem_scratch() {
    // Copies column chunks in reverse order; counts steps in an SMEM scalar.
    struct K;
    static INFO: tessera_lowering::kernel::KernelInfo = tessera_lowering::kernel::KernelInfo {
        name: "reverse_chunks",
        file: file!(),
        line: line!(),
        column: 1,
        generic: tessera_lowering::kernel::Generic::None,
        params: &[
            tessera_lowering::kernel::ParamInfo {
                name: "x",
                role: tessera_lowering::kernel::ParamRole::Input,
                dtype: Some(DType::F32),
            },
            tessera_lowering::kernel::ParamInfo {
                name: "o",
                role: tessera_lowering::kernel::ParamRole::Output,
                dtype: Some(DType::F32),
            },
            tessera_lowering::kernel::ParamInfo {
                name: "n",
                role: tessera_lowering::kernel::ParamRole::Scratch,
                dtype: Some(DType::I32),
            },
        ],
    };
    impl tessera_lowering::kernel::Kernel for K {
        fn info(&self) -> &'static tessera_lowering::kernel::KernelInfo {
            &INFO
        }
        fn trace(
            &self,
            t: &mut tessera_lowering::trace::KernelTracer,
            _: Option<DType>,
        ) -> Result<(), tessera_lowering::trace::TraceError> {
            let (x, o, n) = (
                t.input::<f32>(0)?,
                t.output::<f32>(0)?,
                t.scratch::<i32>(0)?,
            );
            let (_, ()) = tessera_lowering::trace::__if_else(
                program_id(0).eq(0),
                (),
                |()| {
                    n.store_scalar([0], 0);
                    ((), ())
                },
                |()| ((), ()),
            );
            tessera_lowering::trace::__fori(0, 4, (), |j, ()| {
                let chunk = x.load_slice((0, j * 32), [8, 32]);
                o.store_slice((0, (3 - j) * 32), chunk);
            });
            n.store_scalar([0], n.load_scalar([0]) + 1);
            let count = n.load_scalar((0,)).cast::<f32>();
            o.store_slice([0, 0], o.load_slice([0, 0], [8, 1]) * 0.0 + count);
            Ok(())
        }
    }
    let p = Launch::new(&K)
        .grid([2])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .scratch(Smem::<i32>::new([1]))
        .semantics([Arbitrary])
        .trace_program(&[(DType::F32, vec![16, 128])])
        .unwrap();
    assert_eq!(p.scratch[0].space, tessera_lowering::ir::MemorySpace::Smem);
    let x = ramp(16, 128);
    let out = interp::run(&p, &[x]).unwrap()[0].to_f64_vec();
    for (f, got) in out.iter().enumerate() {
        let (r, c) = (f / 128, f % 128);
        let want = if c == 0 {
            (r / 8 + 1) as f64
        } else {
            (r * 128 + (3 - c / 32) * 32 + c % 32) as f64
        };
        assert_eq!(*got, want, "element {f}");
    }
}

#[test]
fn out_of_bounds_dynamic_slice_names_op_and_line() {
    let line = line!() + 3; // the `load_slice` call below
    let k = FnKernel::leak("oob", 1, |x, o| {
        o.store(
            x[0].load_slice((0, program_id(0) * 64 + 100), [8, 32])
                .sum(1, true),
        )
    });
    let p = program(k, [8, 128], 1);
    let err = interp::run(&p, &[ramp(8, 128)]).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::SliceOutOfBounds {
                op: "load_slice",
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("vocabulary_tests.rs:{line}:")),
        "{msg}"
    );
    assert!(msg.contains("`load_slice`: window at [0, 100] of size [8, 32] is out of bounds of a ref of shape [8, 128]"), "{msg}");
}

#[test]
fn math_functions_match_f64() {
    let k = FnKernel::leak("math", 1, |x, o| {
        let v = x[0].load() / 512.0 - 1.0; // (-1, 1)
        let s = erf(v)
            + v.cos()
            + v.sin()
            + v.tanh()
            + (v.abs() + 1.0).log()
            + (v.abs() + 1.0).sqrt()
            + (v.abs() + 1.0).rsqrt()
            + v.exp()
            + sigmoid(v)
            + v.ceil()
            + (v * 2.0).pow(2.0)
            + maximum(v, -v)
            + minimum(v, -v);
        o.store(s);
    });
    let out = run1(k, &ramp(8, 128));
    for (f, got) in out.iter().enumerate() {
        let v = ((f as f32) / 512.0 - 1.0) as f64;
        let a = v.abs() + 1.0;
        // erf by its Taylor series, which converges fast for |v| < 1.
        let (mut term, mut sum) = (v, v);
        for n in 1..40 {
            term *= -v * v / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        let erf_v = sum * 2.0 / std::f64::consts::PI.sqrt();
        let want = erf_v
            + v.cos()
            + v.sin()
            + v.tanh()
            + a.ln()
            + a.sqrt()
            + 1.0 / a.sqrt()
            + v.exp()
            + 1.0 / (1.0 + (-v).exp())
            + v.ceil()
            + (2.0 * v).powi(2)
            + v.abs()
            - v.abs();
        assert!(
            (got - want).abs() < 1e-5 * (1.0 + want.abs()),
            "element {f}: {got} vs {want}"
        );
    }
}

#[test]
fn when_and_fori_loop_without_the_macro() {
    // o = x on the first grid step, then 3 rounds of doubling: x * 8.
    let k = FnKernel::leak("plain", 1, |x, o| {
        let v = fori_loop(0, 3, x[0].load(), |_, acc| acc * 2.0);
        o.store(v);
        when(program_id(0).ne(0), || o.store(0.0));
    });
    let p = Launch::new(k)
        .grid([2])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&[(DType::F32, vec![16, 128])])
        .unwrap();
    let out = interp::run(&p, &[ramp(16, 128)]).unwrap()[0].to_f64_vec();
    for (f, got) in out.iter().enumerate() {
        assert_eq!(
            *got,
            if f < 1024 { 8.0 * f as f64 } else { 0.0 },
            "element {f}"
        );
    }
}
