//! VMEM loads and stores at traced indices: Tessera refuses, at the kernel's line, exactly
//! the indices libtpu cannot prove aligned (last dim: multiples of 128; second-minor: of 8;
//! `lowering/src/mosaic/alignment.rs`). Each case is compiled by real libtpu for v5e, v6e
//! and tpu7x with the check bypassed, and libtpu's verdict must be Tessera's; an accepted
//! case also runs on the interpreter and the XLA CPU plugin against an exact reference.

use std::cell::Cell;
use tessera_lowering::mosaic::{
    lower_to_mosaic, lower_to_mosaic_unaligned, tpu_custom_call, MosaicError, TpuGeneration,
};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::{DType, HostTensor};
use tessera_macros::tpu_kernel;
use tessera_runtime::{CompileOptions, Device, LaunchExt, TpuTarget};

const TOPOLOGIES: [&str; 3] = ["v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"];
const ROWS: usize = 64;
const COLS: usize = 512;

/// Which access the kernel makes, along which dim, at index `start[0] * mul + add`, promised
/// a multiple of `hint` (`multiple_of`) where `hint` is not 0.
#[derive(Clone, Copy, Debug)]
struct Case {
    access: Access,
    dim: usize,
    mul: i32,
    add: i32,
    hint: usize,
    rows: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Access {
    LoadSlice,
    StoreSlice,
    LoadScalar,
}

thread_local! {
    static CASE: Cell<Case> = const { Cell::new(Case { access: Access::LoadSlice, dim: 1, mul: 128, add: 0, hint: 0, rows: 8 }) };
}

/// Makes this thread's [`Case`]: one access of `x` or `o` at a traced index.
#[tpu_kernel]
fn traced_access<T: Float>(start: &Prefetch<i32>, x: &Ref<T>, o: &mut RefMut<T>) {
    access(start, x, o);
}

fn access<T: Float>(start: &Prefetch<i32>, x: &Ref<T>, o: &mut RefMut<T>) {
    let c = CASE.with(Cell::get);
    let mut s = start.load_scalar([0]) * c.mul + c.add;
    if c.hint > 0 {
        s = s.multiple_of(c.hint); // PROMISE
    }
    match (c.access, c.dim) {
        (Access::LoadSlice, 1) => o.store_slice((0, 0), x.load_slice((0, s), [c.rows, 128])), // LOAD LANES
        (Access::LoadSlice, _) => o.store_slice((0, 0), x.load_slice((s, 0), [c.rows, 128])), // LOAD ROWS
        (Access::StoreSlice, 1) => o.store_slice((0, s), x.load_slice((0, 0), [c.rows, 128])), // STORE LANES
        (Access::StoreSlice, _) => o.store_slice((s, 0), x.load_slice((0, 0), [c.rows, 128])), // STORE ROWS
        (Access::LoadScalar, 1) => o.store(x.load_scalar((0, s))), // SCALAR LANES
        (Access::LoadScalar, _) => o.store(x.load_scalar((s, 0))), // SCALAR ROWS
    }
}

/// The line of this file holding `marker` (the access a case makes), as `file:line`.
fn line_of(marker: &str) -> String {
    let line = include_str!("dynamic_index_tests.rs")
        .lines()
        .position(|l| l.ends_with(&format!("// {marker}")))
        .expect("marker in this file")
        + 1;
    format!("kernels/tests/dynamic_index_tests.rs:{line}:")
}

fn marker(c: &Case) -> &'static str {
    match (c.access, c.dim) {
        (Access::LoadSlice, 1) => "LOAD LANES",
        (Access::LoadSlice, _) => "LOAD ROWS",
        (Access::StoreSlice, 1) => "STORE LANES",
        (Access::StoreSlice, _) => "STORE ROWS",
        (Access::LoadScalar, 1) => "SCALAR LANES",
        (Access::LoadScalar, _) => "SCALAR ROWS",
    }
}

fn launch() -> Launch {
    traced_access::launch()
        .input(BlockSpec::new([ROWS, COLS], || [0, 0]))
        .output(BlockSpec::new([ROWS, COLS], || [0, 0]), [ROWS, COLS])
}

fn program(c: Case, dtype: DType) -> KernelProgram {
    CASE.with(|cell| cell.set(c));
    launch()
        .trace_program(&[(DType::I32, vec![1]), (dtype, vec![ROWS, COLS])])
        .expect("traces")
}

/// The cases and whether libtpu accepts them (measured: the three generations agree).
fn cases() -> Vec<(Case, DType, bool)> {
    // (index multiplier, addend, `multiple_of` promise (0: none), libtpu compiles it)
    let lanes = [
        (128, 0, 0, true),
        (1, 0, 0, false),
        (8, 0, 0, false),
        (64, 0, 0, false),
        (128, 1, 0, false),
        (256, 128, 0, true),
        (1, 0, 128, true),
        (1, 0, 256, true),
        (1, 0, 64, false),
    ];
    let rows = [
        (8, 0, 0, true),
        (16, 8, 0, true),
        (1, 0, 0, false),
        (2, 0, 0, false),
        (8, 1, 0, false),
        (4, 4, 0, false),
        (1, 0, 8, true),
        (1, 0, 4, false),
    ];
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::BF16] {
        for access in [Access::LoadSlice, Access::StoreSlice] {
            for (dim, table) in [(1, &lanes[..]), (0, &rows[..])] {
                for &(mul, add, hint, ok) in table.iter() {
                    out.push((case(access, dim, mul, add, hint), dtype, ok));
                }
            }
        }
    }
    // Scalar reads of VMEM (32-bit only: libtpu extracts 32-bit scalars only).
    for (dim, mul, ok) in [(1, 128, true), (1, 8, false), (0, 8, true), (0, 1, false)] {
        out.push((case(Access::LoadScalar, dim, mul, 0, 0), DType::F32, ok));
    }
    out
}

fn case(access: Access, dim: usize, mul: i32, add: i32, hint: usize) -> Case {
    Case {
        access,
        dim,
        mul,
        add,
        hint,
        rows: 8,
    }
}

#[test]
fn tessera_refuses_exactly_what_libtpu_cannot_prove_aligned() {
    let targets: Vec<(&str, TpuTarget)> = TOPOLOGIES
        .iter()
        .map(|t| (*t, TpuTarget::aot(t).unwrap_or_else(|e| panic!("{t}: {e}"))))
        .collect();
    for (case, dtype, accepted) in cases() {
        let p = program(case, dtype);
        let what = format!("{case:?} {dtype}");
        match lower_to_mosaic(&p, TpuGeneration::V5e) {
            Ok(_) => assert!(accepted, "{what}: Tessera accepts what libtpu refuses"),
            Err(e) => {
                assert!(
                    !accepted,
                    "{what}: Tessera refuses what libtpu compiles: {e}"
                );
                assert!(
                    matches!(e, MosaicError::UnalignedIndex { .. }),
                    "{what}: {e}"
                );
                let text = e.to_string();
                let at = line_of(marker(&case));
                assert!(text.starts_with(&at), "{what}: expected {at}\n{text}");
            }
        }
        for (topology, target) in &targets {
            let generation = TpuGeneration::from_topology(topology).expect("known");
            let kernel = lower_to_mosaic_unaligned(&p, generation).expect("lowers unchecked");
            let module = tpu_custom_call(&p, &kernel).expect("wraps").into_text();
            match target.compile(&module, &CompileOptions::default()) {
                Ok(out) => {
                    assert!(
                        accepted,
                        "{what} on {topology}: libtpu now compiles it: relax alignment.rs"
                    );
                    assert!(out.code_bytes > 0);
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(!accepted, "{what} on {topology}: libtpu refuses:\n{e}");
                    // libtpu's own refusal names the kernel's line too (the ops' locations).
                    assert!(
                        e.contains("cannot statically prove") || e.contains("unaligned indices"),
                        "{what} on {topology}: another refusal:\n{e}"
                    );
                    assert!(e.starts_with(&line_of(marker(&case))), "{what}: {e}");
                }
            }
        }
    }
}

#[test]
fn an_aligned_lane_window_at_a_traced_start_matches_on_the_interpreter_and_cpu() {
    // o[:, 0..128] = x[:, 128 s .. 128 s + 128]: only that window of o is written, so only
    // it is compared (exactly: a copy).
    CASE.with(|cell| {
        cell.set(Case {
            access: Access::LoadSlice,
            dim: 1,
            mul: 128,
            add: 0,
            hint: 0,
            rows: ROWS,
        })
    });
    let data: Vec<f32> = (0..ROWS * COLS)
        .map(|i| ((i * 37) % 1001) as f32 - 500.0)
        .collect();
    let x = HostTensor::from_vec(vec![ROWS, COLS], data.clone());
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    for s in 0..(COLS / 128) {
        let start = HostTensor::from_vec(vec![1], vec![s as i32]);
        for (device, dev) in [("interp", Device::interp()), ("cpu", cpu.clone())] {
            let out = launch()
                .run(&dev, &[&start, &x])
                .unwrap_or_else(|e| panic!("{device}: {e}"));
            let got = out[0].to_f64_vec();
            for r in 0..ROWS {
                for c in 0..128 {
                    let want = f64::from(data[r * COLS + s * 128 + c]);
                    assert_eq!(got[r * COLS + c], want, "{device} s={s} at ({r}, {c})");
                }
            }
        }
    }
}

/// `start.multiple_of(128)` as the lane start: runs where the promise holds, and the
/// interpreter refuses a broken promise at the kernel's line.
#[test]
fn a_promised_multiple_runs_and_a_broken_promise_is_an_error_on_the_interpreter() {
    CASE.with(|cell| {
        cell.set(Case {
            rows: ROWS,
            ..case(Access::LoadSlice, 1, 1, 0, 128)
        })
    });
    let data: Vec<f32> = (0..ROWS * COLS)
        .map(|i| ((i * 53) % 997) as f32 - 400.0)
        .collect();
    let x = HostTensor::from_vec(vec![ROWS, COLS], data.clone());
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    for s in [0, 128, 384] {
        let start = HostTensor::from_vec(vec![1], vec![s as i32]);
        for (device, dev) in [("interp", Device::interp()), ("cpu", cpu.clone())] {
            let out = launch()
                .run(&dev, &[&start, &x])
                .unwrap_or_else(|e| panic!("{device}: {e}"));
            let got = out[0].to_f64_vec();
            for r in 0..ROWS {
                for c in 0..128 {
                    assert_eq!(
                        got[r * COLS + c],
                        f64::from(data[r * COLS + s + c]),
                        "{device} s={s}"
                    );
                }
            }
        }
    }
    let start = HostTensor::from_vec(vec![1], vec![5]);
    let err = launch()
        .run(&Device::interp(), &[&start, &x])
        .expect_err("5 is not a multiple of 128")
        .to_string();
    let at = line_of("PROMISE");
    assert!(
        err.starts_with(&at) && err.contains("not a multiple of 128"),
        "expected {at}: {err}"
    );
}

/// One element of `x` read at static indices.
#[tpu_kernel]
fn element_read<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    o.store(x.load_scalar((3, 5))); // ELEMENT READ
}

/// One element of `o` written at static indices.
#[tpu_kernel]
fn element_write<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    o.store(x.load());
    o.store_scalar((3, 5), 1.0); // ELEMENT WRITE
}

#[test]
fn single_vmem_elements_are_read_in_32_bit_types_only_as_libtpu_says() {
    let spec = || BlockSpec::new([ROWS, COLS], || [0, 0]);
    let targets: Vec<(&str, TpuTarget)> = TOPOLOGIES
        .iter()
        .map(|t| (*t, TpuTarget::aot(t).unwrap_or_else(|e| panic!("{t}: {e}"))))
        .collect();
    for dtype in [DType::F32, DType::BF16] {
        let sig = [(dtype, vec![ROWS, COLS])];
        let read = element_read::launch()
            .input(spec())
            .output(spec(), [ROWS, COLS]);
        let write = element_write::launch()
            .input(spec())
            .output(spec(), [ROWS, COLS]);
        for (marker, launch) in [("ELEMENT READ", read), ("ELEMENT WRITE", write)] {
            let p = launch.trace_program(&sig).expect("traces");
            // libtpu extracts 32-bit elements only; it writes one of any width.
            let accepted = dtype == DType::F32 || marker == "ELEMENT WRITE";
            let what = format!("{marker} {dtype}");
            match lower_to_mosaic(&p, TpuGeneration::V6e) {
                Ok(_) => assert!(accepted, "{what}: Tessera accepts what libtpu refuses"),
                Err(e) => {
                    let text = e.to_string();
                    assert!(!accepted, "{what}: {text}");
                    assert!(text.starts_with(&line_of(marker)), "{what}: {text}");
                    assert!(text.contains("32-bit types only"), "{what}: {text}");
                }
            }
            for (topology, target) in &targets {
                let generation = TpuGeneration::from_topology(topology).expect("known");
                let kernel = lower_to_mosaic_unaligned(&p, generation).expect("lowers unchecked");
                let module = tpu_custom_call(&p, &kernel).expect("wraps").into_text();
                match target.compile(&module, &CompileOptions::default()) {
                    Ok(_) => assert!(accepted, "{what} on {topology}: libtpu now compiles it"),
                    Err(e) => {
                        let e = e.to_string();
                        assert!(!accepted, "{what} on {topology}: {e}");
                        assert!(
                            e.contains("Only 32-bit scalar"),
                            "{what} on {topology}: {e}"
                        );
                    }
                }
            }
        }
    }
}
