//! The eager runtime's modes side by side (criterion): a transformer block forward
//! (S, D = 128, 256), a 50-op pointwise chain, an MLP training step, each in Strict, Debug,
//! DeferAndFuse and Compiled on the same inputs; and one cached Strict op call.
//! `tessera bench eager` prints the same cases as a table or JSON with the speedups.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera::eager::workloads::{pointwise_chain, random, Block, Mlp};
use tessera::eager::{compile, sync, EagerMode, ModeGuard, Result, Tensor};
use tessera::lowering::DType;

/// Benches `f` in every mode under `group/mode`.
fn modes(c: &mut Criterion, group: &str, f: &mut dyn FnMut() -> Result<Tensor>) {
    let mut g = c.benchmark_group(group);
    g.sample_size(20);
    for m in EagerMode::ALL {
        if m == EagerMode::Compiled {
            let mut prog = compile(|_: &[Tensor]| Ok(vec![f()?]));
            g.bench_function(m.name(), |b| {
                b.iter(|| {
                    let out = prog.call(&[]).unwrap();
                    out[0].wait().unwrap();
                    black_box(out)
                })
            });
        } else {
            let _mode = ModeGuard::new(m).unwrap();
            g.bench_function(m.name(), |b| {
                b.iter(|| {
                    let out = f().unwrap();
                    sync().unwrap();
                    out.wait().unwrap();
                    black_box(out)
                })
            });
        }
    }
    g.finish();
}

fn eager(c: &mut Criterion) {
    let f32 = DType::F32;
    let block = Block::new(256, 4, 7, f32).unwrap();
    let x = random(f32, 11, &[128, 256], 1.0).unwrap();
    modes(c, "eager_block_s128_d256", &mut || block.forward(&x));

    let (a, b) = (
        random(f32, 21, &[256, 256], 1.0).unwrap(),
        random(f32, 22, &[256, 256], 1.0).unwrap(),
    );
    modes(c, "eager_pointwise_chain_50", &mut || {
        pointwise_chain(&a, &b, 50)
    });

    let mlp = Mlp::new(256, 512, 64, 31, f32).unwrap();
    let (xs, ts) = (
        random(f32, 32, &[128, 256], 1.0).unwrap(),
        random(f32, 33, &[128, 64], 1.0).unwrap(),
    );
    let mut step = 0usize;
    modes(c, "eager_mlp_train_step", &mut || {
        step += 1;
        mlp.step(&xs, &ts, 1e-3 / (1.0 + 1e-3 * step as f64))
    });

    let _strict = ModeGuard::new(EagerMode::Strict).unwrap();
    let t = Tensor::from_f64(f32, &[4], &[1., 2., 3., 4.]).unwrap();
    c.bench_function("eager_strict_cached_op_call_tiny_add", |bench| {
        bench.iter(|| black_box(t.add(&t).unwrap()))
    });
}

criterion_group!(benches, eager);
criterion_main!(benches);
