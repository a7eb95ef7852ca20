//! The eager caches are bounded (its own test binary: the capacity is process-wide). Every
//! cached lowering and fused program holds an executable, and XLA CPU executables keep
//! memory mappings while they live: unbounded, a process running many shapes runs out of
//! `vm.max_map_count` and XLA's compiler fails.

mod common;
use common::*;

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn many_shapes_keep_a_bounded_number_of_executables_and_evicted_ones_rebuild() {
    set_cache_capacity(8);
    let run = |n: usize| {
        let x = dev(&host(n as u64, &[n]));
        let want: Vec<f64> = x
            .to_f64_vec()
            .unwrap()
            .iter()
            .map(|v| v * 2.0 + 1.0)
            .collect();
        // Strict: one lowering per op and shape; DeferAndFuse: one fused program per shape.
        let y = x.mul_scalar(2.0).unwrap().add_scalar(1.0).unwrap();
        let z = in_mode(EagerMode::DeferAndFuse, || {
            x.mul_scalar(2.0).unwrap().add_scalar(1.0).unwrap()
        });
        assert!(max_err(&y.to_f64_vec().unwrap(), &want) < 1e-6);
        assert!(max_err(&z.to_f64_vec().unwrap(), &want) < 1e-6);
    };
    for n in 1..=20 {
        run(n);
    }
    let before = mappings();
    // 150 new shapes: 300 lowerings and 150 fused programs, ~3 mappings each if kept.
    for n in 21..=170 {
        run(n);
    }
    let grown = mappings().saturating_sub(before);
    assert!(
        grown < 200,
        "{grown} new mappings for 150 shapes with 8 cached"
    );
    // An evicted shape lowers and compiles again, with the same results.
    run(1);
    set_cache_capacity(DEFAULT_CACHE_CAPACITY);
}
