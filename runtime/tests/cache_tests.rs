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

#[test]
fn caller_memory_uploads_in_place_or_copied_and_downloads_into_caller_memory() {
    let c = common::cpu();
    let vals: Vec<f32> = (0..257).map(|i| i as f32 - 100.0).collect();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let host = tessera_runtime::AlignedBytes::from_slice(&bytes);
    // At the aligned start the CPU plugin aliases the memory; 4 bytes in it must copy. Both
    // read back the values there, into memory of the caller's.
    for (skip, n) in [(0, 257), (1, 256)] {
        let data = host.as_slice()[skip * 4..].as_ptr();
        // SAFETY: `host` outlives `buf` and is not written while it lives.
        let buf = unsafe { c.upload_aliasing(tessera_runtime::DType::F32, &[n], data) }.unwrap();
        let mut out = vec![0u8; n * 4];
        buf.to_host_into(&mut out).unwrap();
        assert_eq!(out, bytes[skip * 4..]);
        let err = buf.to_host_into(&mut out[4..]).unwrap_err();
        assert!(err.to_string().contains("got"), "{err}");
    }
    // An empty tensor's data pointer may be null (torch's is): nothing is read.
    // SAFETY: zero bytes are read.
    let empty =
        unsafe { c.upload_aliasing(tessera_runtime::DType::F32, &[0, 3], std::ptr::null()) };
    let empty = empty.unwrap();
    assert_eq!(empty.shape(), &[0, 3]);
    empty.to_host_into(&mut []).unwrap();
}

fn negate(k: usize) -> String {
    format!(
        "module @n{k} {{\n  func.func public @main(%x: tensor<{k}xf32>) -> tensor<{k}xf32> {{\n    %0 = stablehlo.negate %x : tensor<{k}xf32>\n    return %0 : tensor<{k}xf32>\n  }}\n}}"
    )
}

#[test]
fn the_cache_is_bounded_and_evicts_the_least_recently_used() {
    // A private client: the shared one's cache belongs to the other tests.
    let path = tessera_runtime::plugin_store::locate(tessera_runtime::DeviceKind::Cpu).unwrap();
    let dev =
        tessera_runtime::Device::with_plugin(tessera_runtime::DeviceKind::Cpu, &path).unwrap();
    let c = dev.client().unwrap();
    assert_eq!(
        c.cache_stats().capacity,
        tessera_runtime::DEFAULT_EXECUTABLE_CACHE_SIZE
    );
    c.set_cache_capacity(2);
    let o = CompileOptions::default();
    let a = c.compile_cached(&negate(1), &o).unwrap();
    let _b = c.compile_cached(&negate(2), &o).unwrap();
    assert!(Arc::ptr_eq(&a, &c.compile_cached(&negate(1), &o).unwrap())); // 1 is now newest
    let _c3 = c.compile_cached(&negate(3), &o).unwrap(); // evicts 2, the least recent
    let s = c.cache_stats();
    assert_eq!((s.entries, s.capacity, s.evictions), (2, 2, 1), "{s:?}");
    assert!(Arc::ptr_eq(&a, &c.compile_cached(&negate(1), &o).unwrap()));
    let misses = c.cache_stats().misses;
    let _b2 = c.compile_cached(&negate(2), &o).unwrap(); // compiled again, evicts 3
    let s = c.cache_stats();
    assert_eq!((s.misses, s.evictions), (misses + 1, 2), "{s:?}");
    // An evicted executable still held by a caller keeps working.
    let x = c
        .upload(&tessera_runtime::HostTensor::from_f64(
            tessera_runtime::DType::F32,
            vec![3],
            &[1.0, -2.0, 3.0],
        ))
        .unwrap();
    let out = _c3.execute(&[&x]).unwrap()[0].to_host().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![-1.0, 2.0, -3.0]);
    // Shrinking evicts at once; 0 disables caching.
    c.set_cache_capacity(0);
    let s = c.cache_stats();
    assert_eq!((s.entries, s.evictions), (0, 4), "{s:?}");
    let p = c.compile_cached(&negate(1), &o).unwrap();
    let q = c.compile_cached(&negate(1), &o).unwrap();
    assert!(!Arc::ptr_eq(&p, &q));
    assert_eq!(c.cache_stats().entries, 0);
}
