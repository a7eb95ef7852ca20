//! The executable cache: a hit returns the same executable and counts as a hit.

mod common;
use std::sync::Arc;
use tessera_runtime::CompileOptions;

#[test]
fn second_compile_of_the_same_module_is_a_hit() {
    let c = common::cpu();
    let m = |k: u32| {
        format!(
            "module @c{k} {{\n  func.func public @main(%x: tensor<{k}xf32>) -> tensor<{k}xf32> {{\n    %0 = stablehlo.negate %x : tensor<{k}xf32>\n    return %0 : tensor<{k}xf32>\n  }}\n}}"
        )
    };
    let before = c.cache_stats();
    let a = c.compile_cached(&m(3), &CompileOptions::default()).unwrap();
    let b = c.compile_cached(&m(3), &CompileOptions::default()).unwrap();
    let other = c.compile_cached(&m(4), &CompileOptions::default()).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert!(!Arc::ptr_eq(&a, &other));
    let after = c.cache_stats();
    assert!(after.hits > before.hits);
    assert!(after.misses >= before.misses + 2);
    assert!(after.compile_time > before.compile_time);
    // Different options are a different entry.
    let opts = CompileOptions {
        device_ordinal: 0,
        ..CompileOptions::default()
    };
    let d = c.compile_cached(&m(3), &opts).unwrap();
    assert!(!Arc::ptr_eq(&a, &d));
}

#[test]
fn zero_copy_upload_aliases_aligned_host_memory_and_reads_back() {
    let c = common::cpu();
    let vals: Vec<f32> = (0..1024).map(|i| i as f32 * 0.5).collect();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let host = Arc::new(tessera_runtime::AlignedBytes::from_slice(&bytes));
    let buf = c
        .upload_shared(tessera_runtime::DType::F32, &[1024], host.clone())
        .unwrap();
    // The buffer holds the memory while it lives.
    assert_eq!(Arc::strong_count(&host), 2);
    assert_eq!(buf.to_host().unwrap().to_vec::<f32>().unwrap(), vals);
    drop(buf);
    assert_eq!(Arc::strong_count(&host), 1);
    let err = c
        .upload_shared(tessera_runtime::DType::F32, &[10], host)
        .unwrap_err();
    assert!(
        err.to_string().contains("needs 40 bytes, got 4096"),
        "{err}"
    );
}
