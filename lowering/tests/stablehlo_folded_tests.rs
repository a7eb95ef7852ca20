//! The folded layout of the batched form: all-parallel launches whose body cannot tell grid
//! steps apart run once on the whole arrays (no re-layout, no leading grid dims); bodies that
//! could tell them apart get the leading-grid-dims layout. When a Python with jax is
//! installed (see `tests/jaxlib_oracle`), the modules run on random inputs against float64
//! references, the grid loop and the interpreter.

mod common;
mod jaxlib_oracle;

use common::kernels::{layer_norm, softmax};
use common::{assert_close, random, ref_layer_norm, ref_softmax, rng, FnKernel};
use jaxlib_oracle::run_with_jaxlib;
use tessera_lowering::interp;
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{emit_kernel, emit_kernel_as, Form};
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;

fn arrays(ts: &[&HostTensor]) -> Vec<(DType, Vec<usize>)> {
    ts.iter().map(|t| (t.dtype(), t.shape().to_vec())).collect()
}

/// Runs `text` with jaxlib if installed (`None`: skipped).
fn run(text: &str, inputs: &[HostTensor], p: &KernelProgram) -> Option<HostTensor> {
    let outs = [(p.outputs[0].dtype, p.outputs[0].array_shape.clone())];
    run_with_jaxlib(text, inputs, &outs)
        .map(|r| r.unwrap_or_else(|e| panic!("{e}\n{text}")).remove(0))
}

/// Auto's module (the batched form), then checks it and the grid loop against `want`.
fn check(p: &KernelProgram, inputs: &[HostTensor], want: &[f64]) -> String {
    let text = emit_kernel(p).unwrap();
    assert_eq!(text, emit_kernel_as(p, Form::Batched).unwrap());
    let looped = emit_kernel_as(p, Form::GridLoop).unwrap();
    for (form, t) in [("batched", &text), ("grid loop", &looped)] {
        if let Some(out) = run(t, inputs, p) {
            assert_close(&out, want, &format!("{} {form}", p.name));
        }
    }
    text
}

#[test]
fn row_blocks_are_whole_array_ops() {
    for dtype in [DType::F32, DType::BF16] {
        let (m, n, bm) = (24, 256, 8);
        let mut r = rng(31);
        let (x, g, b) = (
            random(&mut r, dtype, &[m, n]),
            random(&mut r, dtype, &[1, n]),
            random(&mut r, dtype, &[1, n]),
        );
        let rows = || BlockSpec::new([bm, n], |i| (i, 0));
        let p = softmax::launch()
            .grid([m / bm])
            .input(rows())
            .output(rows(), [m, n])
            .trace_program(&arrays(&[&x]))
            .unwrap();
        let text = check(
            &p,
            std::slice::from_ref(&x),
            &ref_softmax(&x.to_f64_vec(), n),
        );
        // Row statistics broadcast straight back, as one writes it by hand.
        assert!(
            text.contains(&format!("(tensor<{m}xf32>) -> tensor<{m}x{n}xf32>")),
            "{text}"
        );
        for absent in ["stablehlo.reshape", "stablehlo.transpose", "x1xf32>", "x8x"] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        let p = layer_norm::launch()
            .grid([m / bm])
            .input(rows())
            .input(BlockSpec::new([1, n], |_i| [0, 0]))
            .input(BlockSpec::new([1, n], |_i| [0, 0]))
            .output(rows(), [m, n])
            .trace_program(&arrays(&[&x, &g, &b]))
            .unwrap();
        let want = ref_layer_norm(&x.to_f64_vec(), &g.to_f64_vec(), &b.to_f64_vec(), n);
        let text = check(&p, &[x.clone(), g.clone(), b.clone()], &want);
        // The weights, the same for every row block, broadcast over all rows at once.
        let w = format!("(tensor<1x{n}xf32>) -> tensor<{m}x{n}xf32>");
        assert_eq!(text.matches(&w).count(), 2, "{text}");
        assert!(
            !text.contains("stablehlo.transpose") && !text.contains("x8x"),
            "{text}"
        );
    }
}

/// A block read at a constant index meets blocks that differ per step: it is tiled along the
/// folded dim (one copy per step, steps major); a transposing body folds too.
#[test]
fn blocks_the_same_in_every_step_are_tiled() {
    let (x, w) = (
        random(&mut rng(32), DType::F32, &[24, 256]),
        random(&mut rng(33), DType::F32, &[8, 128]),
    );
    let k = FnKernel::leak("plus_tile_t", 2, |i, o| {
        o.store((i[0].load() + i[1].load()).t())
    });
    let p = Launch::new(k)
        .grid([3, 2])
        .input(BlockSpec::new([8, 128], |i, j| [i, j]))
        .input(BlockSpec::new([8, 128], |_i, _j| [0, 0]))
        .output(BlockSpec::new([128, 8], |i, j| [j, i]), [256, 24])
        .trace_program(&arrays(&[&x, &w]))
        .unwrap();
    let (xv, wv) = (x.to_f64_vec(), w.to_f64_vec());
    let want: Vec<f64> = (0..256 * 24)
        .map(|e| {
            let (c, r) = (e / 24, e % 24);
            ((xv[r * 256 + c] as f32) + (wv[r % 8 * 128 + c % 128] as f32)) as f64
        })
        .collect();
    let text = check(&p, &[x, w], &want);
    assert!(
        text.contains("(tensor<8x128xf32>) -> tensor<3x8x2x128xf32>"),
        "{text}"
    );
    assert_eq!(
        text.matches("stablehlo.reshape").count(),
        1,
        "the tiling's: {text}"
    );
}

/// Bodies that mix steps (a reduction over rows of row blocks) or stretch a one-row block
/// across rows keep the leading grid dims, and compute what the interpreter does.
#[test]
fn bodies_that_mix_steps_keep_leading_grid_dims() {
    let col_sums = FnKernel::leak("col_sums", 1, |i, o| o.store(i[0].load().sum(0, true)));
    let stretch = FnKernel::leak("stretch", 1, |i, o| {
        o.store(i[0].load().broadcast_to([8, 128]))
    });
    let x = random(&mut rng(34), DType::F32, &[24, 128]);
    let programs = [
        Launch::new(col_sums)
            .grid([3])
            .input(BlockSpec::new([8, 128], |i| (i, 0)))
            .output(BlockSpec::new([1, 128], |i| (i, 0)), [3, 128]),
        Launch::new(stretch)
            .grid([3])
            .input(BlockSpec::new([1, 128], |i| (i, 0)))
            .output(BlockSpec::new([8, 128], |i| (i, 0)), [24, 128]),
    ];
    for (launch, rows) in programs.into_iter().zip([24, 3]) {
        let x = HostTensor::from_f64(DType::F32, vec![rows, 128], &x.to_f64_vec()[..rows * 128]);
        let p = launch.trace_program(&arrays(&[&x])).unwrap();
        let want = interp::run(&p, std::slice::from_ref(&x)).unwrap();
        let text = check(&p, std::slice::from_ref(&x), &want[0].to_f64_vec());
        assert!(
            text.contains("x3x") || text.contains("<3x"),
            "leading grid dim: {text}"
        );
        assert!(text.contains("stablehlo.reshape"), "{text}");
    }
}
