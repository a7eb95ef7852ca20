//! The hand-expanded kernels run on the interpreter against float64 references computed
//! here, on random inputs, in f32 and bf16.

mod common;

use common::kernels::*;
use common::*;
use tessera_lowering::interp::{self, InterpError};
use tessera_lowering::prelude::*;
use tessera_lowering::HostTensor;

const DTYPES: [DType; 2] = [DType::F32, DType::BF16];

fn arrays(ts: &[&HostTensor]) -> Vec<(DType, Vec<usize>)> {
    ts.iter().map(|t| (t.dtype(), t.shape().to_vec())).collect()
}

#[test]
fn add_matches_reference() {
    for dtype in DTYPES {
        for (m, n, bm, bn) in [(16, 256, 8, 128), (64, 128, 32, 128), (8, 384, 8, 128)] {
            let mut r = rng(1);
            let (x, y) = (
                random(&mut r, dtype, &[m, n]),
                random(&mut r, dtype, &[m, n]),
            );
            let p = add::launch()
                .grid([m / bm, n / bn])
                .input(BlockSpec::new([bm, bn], |i, j| [i, j]))
                .input(BlockSpec::new([bm, bn], |i, j| [i, j]))
                .output(BlockSpec::new([bm, bn], |i, j| [i, j]), [m, n])
                .trace_program(&arrays(&[&x, &y]))
                .unwrap();
            let out = interp::run(&p, &[x.clone(), y.clone()]).unwrap();
            let want: Vec<f64> = x
                .to_f64_vec()
                .iter()
                .zip(y.to_f64_vec())
                .map(|(a, b)| a + b)
                .collect();
            assert_eq!(out[0].dtype(), dtype);
            assert_close(&out[0], &want, &format!("add {dtype} {m}x{n}"));
        }
    }
}

#[test]
fn silu_matches_reference() {
    for dtype in DTYPES {
        for (m, n, bm) in [(16, 128, 8), (32, 256, 16), (8, 128, 8)] {
            let x = random(&mut rng(2), dtype, &[m, n]);
            let p = silu::launch()
                .grid([m / bm])
                .input(BlockSpec::new([bm, n], |i| (i, 0)))
                .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
                .trace_program(&arrays(&[&x]))
                .unwrap();
            let out = interp::run(&p, std::slice::from_ref(&x)).unwrap();
            let want: Vec<f64> = x
                .to_f64_vec()
                .iter()
                .map(|v| v / (1.0 + (-v).exp()))
                .collect();
            assert_close(&out[0], &want, &format!("silu {dtype} {m}x{n}"));
        }
    }
}

fn matmul_program(dtype: DType, m: usize, n: usize, k: usize, b: usize) -> KernelProgram {
    matmul::launch()
        .grid([m / b, n / b, k / b])
        .input(BlockSpec::new([b, b], |i, _j, k| [i, k]))
        .input(BlockSpec::new([b, b], |_i, j, k| [k, j]))
        .output(BlockSpec::new([b, b], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([b, b]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(dtype, vec![m, k]), (dtype, vec![k, n])])
        .unwrap()
}

use tessera_lowering::trace::KernelProgram;

#[test]
fn tiled_matmul_matches_reference() {
    for dtype in DTYPES {
        for (m, n, k, b) in [(256, 128, 384, 128), (64, 96, 160, 32), (32, 32, 32, 32)] {
            let mut r = rng(3);
            let (x, y) = (
                random(&mut r, dtype, &[m, k]),
                random(&mut r, dtype, &[k, n]),
            );
            let p = matmul_program(dtype, m, n, k, b);
            let out = interp::run(&p, &[x.clone(), y.clone()]).unwrap();
            let want = ref_matmul(&x.to_f64_vec(), &y.to_f64_vec(), m, n, k);
            assert_close(&out[0], &want, &format!("matmul {dtype} {m}x{n}x{k}"));
        }
    }
}

#[test]
fn row_softmax_matches_reference() {
    for dtype in DTYPES {
        for (m, n, bm) in [(16, 128, 8), (64, 256, 32), (8, 512, 8)] {
            let x = random(&mut rng(4), dtype, &[m, n]);
            let p = softmax::launch()
                .grid([m / bm])
                .input(BlockSpec::new([bm, n], |i| (i, 0)))
                .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
                .trace_program(&arrays(&[&x]))
                .unwrap();
            let out = interp::run(&p, std::slice::from_ref(&x)).unwrap();
            assert_close(
                &out[0],
                &ref_softmax(&x.to_f64_vec(), n),
                &format!("softmax {dtype} {m}x{n}"),
            );
        }
    }
}

#[test]
fn layer_norm_matches_reference() {
    for dtype in DTYPES {
        for (m, n, bm) in [(16, 128, 8), (32, 256, 16), (8, 384, 8)] {
            let mut r = rng(5);
            let (x, g, b) = (
                random(&mut r, dtype, &[m, n]),
                random(&mut r, dtype, &[1, n]),
                random(&mut r, dtype, &[1, n]),
            );
            let p = layer_norm::launch()
                .grid([m / bm])
                .input(BlockSpec::new([bm, n], |i| (i, 0)))
                .input(BlockSpec::new([1, n], |_i| [0, 0]))
                .input(BlockSpec::new([1, n], |_i| [0, 0]))
                .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
                .trace_program(&arrays(&[&x, &g, &b]))
                .unwrap();
            let out = interp::run(&p, &[x.clone(), g.clone(), b.clone()]).unwrap();
            let want = ref_layer_norm(&x.to_f64_vec(), &g.to_f64_vec(), &b.to_f64_vec(), n);
            assert_close(&out[0], &want, &format!("layer_norm {dtype} {m}x{n}"));
        }
    }
}

#[test]
fn fori_with_carried_values_and_if_with_result() {
    let (m, n) = (16, 512);
    let x = random(&mut rng(6), DType::F32, &[m, n]);
    let p = chunk_mean::launch()
        .grid([m / 8])
        .input(BlockSpec::new([8, n], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [m, 128])
        .trace_program(&arrays(&[&x]))
        .unwrap();
    let text = p.body.to_string();
    assert!(text.contains("fori") && text.contains("= if"), "{text}");
    let out = interp::run(&p, std::slice::from_ref(&x)).unwrap();
    let xv = x.to_f64_vec();
    let want: Vec<f64> = (0..m * 128)
        .map(|f| {
            let (i, j) = (f / 128, f % 128);
            let sign = if (i / 8) % 2 == 1 { -1.0 } else { 1.0 };
            sign * (0..4).map(|c| xv[i * n + c * 128 + j]).sum::<f64>() / 4.0
        })
        .collect();
    assert_close(&out[0], &want, "chunk_mean");
}

#[test]
fn bf16_rounds_after_every_op() {
    // 1 + 2^-9 is not a bf16; adding it in two steps must lose it each time.
    let x = HostTensor::from_f64(DType::BF16, vec![8, 128], &vec![1.0; 1024]);
    let y = HostTensor::from_f64(DType::BF16, vec![8, 128], &vec![1.0 / 512.0; 1024]);
    let p = add::launch()
        .input(BlockSpec::new([8, 128], || [0, 0]))
        .input(BlockSpec::new([8, 128], || [0, 0]))
        .output(BlockSpec::new([8, 128], || [0, 0]), [8, 128])
        .trace_program(&arrays(&[&x, &y]))
        .unwrap();
    let out = interp::run(&p, &[x, y]).unwrap();
    assert!(out[0].to_f64_vec().iter().all(|&v| v == 1.0));
}

#[test]
fn out_of_bounds_block_names_the_index_map_line() {
    // Index maps are evaluated over the whole grid at trace time: the launch fails at the
    // BlockSpec's line before any backend runs it.
    let x = random(&mut rng(7), DType::F32, &[16, 128]);
    let (spec, line) = (BlockSpec::new([8, 128], |i| (i + 1, 0)), line!());
    let err = silu::launch()
        .grid([2])
        .input(spec)
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&arrays(&[&x]))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(&format!("interp_tests.rs:{line}")), "{msg}");
    assert!(
        msg.contains("[2, 0]") && msg.contains("grid index [1]"),
        "{msg}"
    );
}

#[test]
fn wrong_inputs_are_errors() {
    let x = random(&mut rng(8), DType::F32, &[16, 128]);
    let p = silu::launch()
        .grid([2])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&arrays(&[&x]))
        .unwrap();
    assert!(matches!(
        interp::run(&p, &[]),
        Err(InterpError::InputCount { .. })
    ));
    let bf = random(&mut rng(8), DType::BF16, &[16, 128]);
    let err = interp::run(&p, &[bf]).unwrap_err();
    assert!(
        err.to_string()
            .contains("input `x` was traced as f32[16, 128], got bf16[16, 128]"),
        "{err}"
    );
}
