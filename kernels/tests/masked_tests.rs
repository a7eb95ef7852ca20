//! Masked loads and stores (Pallas' `pl.load(.., mask=, other=)` / `pl.store(.., mask=)`):
//! a kernel interleaving `K` planes column by column. Grid step `(i, k)` loads row block `i`
//! of plane `k` with rows at or past a scalar-prefetched `valid` count masked to a fill
//! value (a ragged tail), and stores it only into the columns `j` with `j % K == k`; the
//! output block stays resident over the `k` axis, so every element is written by exactly
//! one step. Exact on the interpreter and the XLA CPU plugin (a select in the value form)
//! against a reference; the Mosaic is Pallas' masked `tpu.vector_store` (32-bit data) or a
//! load-select-store (narrower data), verified by jaxlib and compiled by libtpu for v5e,
//! v6e and tpu7x. A mask of the wrong shape is an error at the user's line.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt};

/// The fill value of masked-off loads.
const FILL: f64 = -7.0;

#[tpu_kernel]
fn interleave<T: Element>(valid: &Prefetch<i32>, x: &Ref<T>, o: &mut RefMut<T>) {
    let shape = o.shape();
    let (i, k) = (program_id(0), program_id(1));
    let rows = iota::<i32>(shape.clone(), 0) + i * shape[0] as i32;
    let planes = x.load_masked(
        rows.lt(valid.load_scalar([0])),
        scalar::<i32>(FILL as i32).cast::<T>(),
    );
    let cols = iota::<i32>(shape.clone(), 1);
    o.store_masked((cols % num_programs(1)).eq(k), planes);
}

/// `x: [K, m, n]` in `[1, bm, n]` blocks (plane dim squeezed) -> `o: [m, n]`.
fn launch(planes: usize, m: usize, n: usize, bm: usize) -> Launch {
    interleave::launch()
        .grid([m / bm, planes])
        .input(BlockSpec::new([1, bm, n], |i, k| (k, i, 0)).squeeze([0]))
        .output(BlockSpec::new([bm, n], |i, _k| (i, 0)), [m, n])
        .semantics([Parallel, Arbitrary])
}

fn reference(x: &[f64], valid: usize, (planes, m, n): (usize, usize, usize)) -> Vec<f64> {
    (0..m * n)
        .map(|e| {
            let (r, c) = (e / n, e % n);
            if r < valid {
                x[((c % planes) * m + r) * n + c]
            } else {
                FILL
            }
        })
        .collect()
}

fn check_on_every_device<T: tessera_lowering::HostElement>(
    values: impl Fn(&mut rand::rngs::StdRng) -> T,
) {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    for (seed, (planes, m, n, bm)) in [(3, 64, 256, 16), (2, 32, 128, 8), (4, 64, 384, 32)]
        .into_iter()
        .enumerate()
    {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64 + 90);
        let data: Vec<T> = (0..planes * m * n).map(|_| values(&mut rng)).collect();
        let x = HostTensor::from_vec(vec![planes, m, n], data);
        for valid in [m, m - 3, bm + 1, 0] {
            let v = HostTensor::from_vec(vec![1], vec![valid as i32]);
            let want = reference(&x.to_f64_vec(), valid, (planes, m, n));
            let launch = launch(planes, m, n, bm);
            let runs = [
                ("interp", launch.run(&Device::interp(), &[&v, &x])),
                ("cpu auto", launch.run_as(&cpu, &[&v, &x], Form::Auto)),
                (
                    "cpu grid loop",
                    launch.run_as(&cpu, &[&v, &x], Form::GridLoop),
                ),
            ];
            for (device, out) in runs {
                let got = out.unwrap_or_else(|e| panic!("{device}: {e}"))[0].to_f64_vec();
                assert_eq!(got, want, "{device} {planes} planes {m}x{n} valid {valid}");
            }
        }
    }
}

#[test]
fn masked_loads_and_stores_are_exact_on_the_interpreter_and_cpu() {
    check_on_every_device::<f32>(|rng| rng.gen_range(-4.0f32..4.0));
    check_on_every_device::<i32>(|rng| rng.gen_range(-1000..1000));
    check_on_every_device::<bf16>(|rng| bf16::from_f32(rng.gen_range(-4.0f32..4.0)));
}

fn program(dtype: DType) -> KernelProgram {
    launch(3, 64, 256, 16)
        .trace_program(&[(DType::I32, vec![1]), (dtype, vec![3, 64, 256])])
        .expect("traces")
}

#[test]
fn the_mosaic_is_a_masked_vector_store_and_verifies_with_jaxlib() {
    let m = lower_to_mosaic(&program(DType::F32), TpuGeneration::V5e).unwrap();
    assert!(m.readable.contains("tpu.vector_store"), "{}", m.readable);
    assert!(
        m.readable
            .contains("operandSegmentSizes = array<i32: 1, 1, 2, 1>"),
        "{}",
        m.readable
    );
    // bf16: Mosaic's masked store takes 32-bit data; the block is merged and stored whole.
    let narrow = lower_to_mosaic(&program(DType::BF16), TpuGeneration::V5e).unwrap();
    assert!(
        !narrow.readable.contains("tpu.vector_store"),
        "{}",
        narrow.readable
    );
    for dtype in [DType::F32, DType::I32, DType::BF16] {
        support::check_mosaic_of(&format!("masked-{dtype}"), &program(dtype));
    }
}

#[test]
fn the_masked_kernel_compiles_with_libtpu_for_three_generations() {
    for dtype in [DType::F32, DType::BF16] {
        support::compiles_for_every_topology(&program(dtype));
    }
}

#[tpu_kernel]
fn bad_store_mask(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let wrong = iota::<i32>([8, 64], 1).lt(3);
    o.store_masked(wrong, x.load());
}

#[tpu_kernel]
fn bad_load_mask(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let wrong = iota::<i32>([4, 128], 0).lt(3);
    o.store(x.load_masked(wrong, 0.0));
}

fn trace_error(launch: Launch) -> TraceError {
    let x = HostTensor::zeros(DType::F32, vec![8, 128]);
    let launch = launch
        .input(BlockSpec::new([8, 128], || (0, 0)))
        .output(BlockSpec::new([8, 128], || (0, 0)), [8, 128]);
    support::interp_trace_error(&launch, &[&x])
}

#[test]
fn a_mask_of_the_wrong_shape_is_an_error_at_its_line() {
    let file = file!().rsplit('/').next().unwrap();
    let cases = [
        (
            trace_error(bad_store_mask::launch()),
            "store_masked",
            "[8, 64]",
        ),
        (
            trace_error(bad_load_mask::launch()),
            "load_masked",
            "[4, 128]",
        ),
    ];
    let source = include_str!("masked_tests.rs");
    for (error, op, shape) in cases {
        let text = error.to_string();
        let line = 1 + source
            .lines()
            .position(|l| l.contains(&format!(".{op}(wrong")))
            .unwrap();
        assert!(text.contains(&format!("{file}:{line}:")), "{text}");
        assert!(
            text.contains(&format!("cannot broadcast shape {shape} to [8, 128]")),
            "{text}"
        );
    }
}
