//! Runtime latencies on the XLA CPU plugin: execute-only with inputs on device, host round
//! trip, compile of a small module, executable-cache hit.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera::runtime::{CompileOptions, DType, Device, HostTensor};

const TINY_ADD: &str = r#"module @tiny_add {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"#;

fn runtime(c: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin: run `make plugin`");
    let client = device.client().unwrap().clone();
    let opts = CompileOptions::default();
    let exe = client.compile_cached(TINY_ADD, &opts).unwrap();
    let host = HostTensor::from_f64(DType::F32, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let a = client.upload(&host).unwrap();
    let b = client.upload(&host).unwrap();

    c.bench_function("execute_only_tiny_add_inputs_on_device", |bench| {
        bench.iter(|| {
            let out = exe.execute(&[&a, &b]).unwrap();
            out[0].block_until_ready().unwrap();
            black_box(out)
        })
    });
    c.bench_function("host_round_trip_tiny_add", |bench| {
        bench.iter(|| {
            let x = client.upload(&host).unwrap();
            let y = client.upload(&host).unwrap();
            black_box(exe.execute(&[&x, &y]).unwrap()[0].to_host().unwrap())
        })
    });
    c.bench_function("executable_cache_hit", |bench| {
        bench.iter(|| black_box(client.compile_cached(TINY_ADD, &opts).unwrap()))
    });
    let mut g = c.benchmark_group("compile");
    g.sample_size(20);
    g.bench_function("compile_small_module_uncached", |bench| {
        bench.iter(|| black_box(client.compile(TINY_ADD, &opts).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, runtime);
criterion_main!(benches);
