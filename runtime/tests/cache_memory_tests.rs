//! Resident memory stays bounded while a client compiles thousands of distinct shapes: the
//! executable cache evicts past its capacity (`TESSERA_EXECUTABLE_CACHE_SIZE`). Its own test
//! binary (one test), so that no other test's memory or env var shows up here.
//!
//! Compiling 10,000 programs on the 2-core machine takes ~18 min (~110 ms a debug-build
//! compile), so `make test` uses a small cache (16 entries) and the 520 distinct shapes that
//! fit in ~60 s: unbounded, each shape kept ~110 KB resident; bounded, the cache never holds
//! more than 16 executables. `make soak` runs it over 10,000 shapes
//! (`TESSERA_SOAK_SHAPES=10000`).

use tessera_runtime::{CompileOptions, Device, DeviceKind, RuntimeError};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("linux /proc");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn module(k: usize) -> String {
    format!(
        "module @s{k} {{\n  func.func public @main(%x: tensor<{k}xf32>) -> tensor<{k}xf32> {{\n    %0 = stablehlo.negate %x : tensor<{k}xf32>\n    return %0 : tensor<{k}xf32>\n  }}\n}}"
    )
}

#[test]
fn memory_stays_bounded_over_hundreds_of_distinct_shapes() {
    let path = tessera_runtime::plugin_store::locate(DeviceKind::Cpu).expect("CPU plugin");
    // A malformed size is a clean error naming the variable.
    std::env::set_var("TESSERA_EXECUTABLE_CACHE_SIZE", "many");
    let err = Device::with_plugin(DeviceKind::Cpu, &path).unwrap_err();
    assert!(matches!(err, RuntimeError::BadEnv { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("TESSERA_EXECUTABLE_CACHE_SIZE=`many`"),
        "{err}"
    );

    std::env::set_var("TESSERA_EXECUTABLE_CACHE_SIZE", "16");
    let device = Device::cpu().unwrap();
    let c = device.client().unwrap();
    assert_eq!(c.cache_stats().capacity, 16);
    let o = CompileOptions::default();
    let compile = |range: std::ops::Range<usize>| {
        for k in range {
            c.compile_cached(&module(k), &o).unwrap();
        }
    };
    let shapes: usize = std::env::var("TESSERA_SOAK_SHAPES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(520)
        .max(121);
    compile(1..121); // warm up: the cache fills, allocator pools reach their steady size
    let before = rss_kib();
    compile(121..shapes + 1);
    let after = rss_kib();
    let s = c.cache_stats();
    let growth = after.saturating_sub(before);
    println!(
        "RSS after 120 shapes: {before} KiB; after {} more: {after} KiB (growth {growth} KiB); {s:?}",
        shapes - 120
    );
    assert_eq!(s.entries, 16);
    assert_eq!(s.misses as usize, shapes);
    assert_eq!(s.evictions as usize, shapes - 16);
    // 400 more cached executables would hold ~44 MB (10,000: ~1 GB); allow 8 MiB of
    // allocator noise.
    assert!(growth < 8 * 1024, "resident memory grew by {growth} KiB");
}
