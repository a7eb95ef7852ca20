//! 100,000 executions with fresh buffers: resident memory must stay flat.

mod common;
use tessera_runtime::{CompileOptions, DType, HostTensor};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("linux /proc");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn hundred_thousand_executions_keep_memory_flat() {
    let c = common::cpu();
    let m = r#"module @inc {
  func.func public @main(%x: tensor<256xf32>) -> tensor<256xf32> {
    %one = stablehlo.constant dense<1.000000e+00> : tensor<256xf32>
    %0 = stablehlo.add %x, %one : tensor<256xf32>
    return %0 : tensor<256xf32>
  }
}"#;
    let exe = c.compile_cached(m, &CompileOptions::default()).unwrap();
    let input = HostTensor::from_f64(DType::F32, vec![256], &common::random_f64(256, 7));
    let run = |n: usize| {
        for _ in 0..n {
            let b = c.upload(&input).unwrap();
            let out = exe.execute(&[&b]).unwrap();
            out[0].block_until_ready().unwrap();
        }
    };
    run(10_000); // warm up: allocator pools and plugin caches reach their steady size
    let before = rss_kib();
    run(90_000);
    let after = rss_kib();
    let growth = after.saturating_sub(before);
    println!("RSS after 10k warm-up: {before} KiB; after 90k more executions: {after} KiB (growth {growth} KiB)");
    // 90k leaked 1 KiB buffers would be ~90 MB; allow 8 MiB of allocator noise.
    assert!(growth < 8 * 1024, "resident memory grew by {growth} KiB");
}
