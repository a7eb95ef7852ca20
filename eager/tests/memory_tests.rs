//! No leaks: a long deferred loop keeps resident memory flat.

mod common;
use common::*;

/// Resident pages of this process (Linux `/proc/self/statm`, second field).
fn resident_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn ten_thousand_deferred_steps_keep_memory_flat() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let x = dev(&host(30, &[16, 16]));
    let w = dev(&host(31, &[16, 16]));
    let step = |i: usize| {
        let y = x.matmul(&w).unwrap().tanh().unwrap();
        let g = y.mul(&x).unwrap().mul_scalar(1e-4).unwrap();
        w.add_scaled_(&g, -(1e-3 + 1e-7 * i as f64)).unwrap();
        sync().unwrap();
    };
    for i in 0..1000 {
        step(i);
    }
    let before = resident_bytes();
    for i in 0..10_000 {
        step(i);
    }
    let after = resident_bytes();
    let grown = after.saturating_sub(before);
    // 10,000 steps each allocate and free a few 1 KiB buffers; a leak of one buffer per
    // step alone would be ~10 MB.
    assert!(
        grown < 4 << 20,
        "RSS grew {grown} bytes over 10,000 steps ({before} -> {after})"
    );
    assert!(w.to_f64_vec().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn ten_thousand_strict_steps_keep_memory_flat() {
    let _g = ModeGuard::new(EagerMode::Strict).unwrap();
    let x = dev(&host(32, &[16, 16]));
    let w = dev(&host(33, &[16, 16]));
    let step = |i: usize| {
        let g = x
            .matmul(&w)
            .unwrap()
            .tanh()
            .unwrap()
            .mul_scalar(1e-4)
            .unwrap();
        w.add_scaled_(&g, -(1e-3 + 1e-7 * i as f64)).unwrap();
    };
    for i in 0..1000 {
        step(i);
    }
    w.wait().unwrap();
    let before = resident_bytes();
    for i in 0..10_000 {
        step(i);
    }
    w.wait().unwrap();
    let after = resident_bytes();
    let grown = after.saturating_sub(before);
    assert!(
        grown < 4 << 20,
        "RSS grew {grown} bytes over 10,000 steps ({before} -> {after})"
    );
}
