//! Bitwise ops, shifts and bitcasts: an xorshift32 step on u32, the fields of f32 bit
//! patterns (exponent, sign flip, half-word rotation), and shifts by per-element amounts,
//! including amounts outside `0..32` (StableHLO's semantics: 0, or the sign for an
//! arithmetic right shift). Each runs on the interpreter and the XLA CPU plugin against an
//! exact reference computed here with Rust's integer ops, its Mosaic verifies with jaxlib's
//! tpu dialect, and libtpu compiles it for v5e, v6e and tpu7x. Misuse is reported at this
//! file's lines (a float shift does not compile: `dsl-macros/tests/ui/shift_float.rs`).

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

const ROWS: usize = 8;
const LANES: usize = 128;

/// One xorshift32 step (Marsaglia's 13, 17, 5) on every element.
#[tpu_kernel]
fn xorshift32(x: &Ref<u32>, o: &mut RefMut<u32>) {
    let mut s = x.load();
    s = s ^ (s << 13);
    s = s ^ (s >> 17);
    s = s ^ (s << 5);
    o.store(s);
}

/// Fields of f32 bit patterns: the unbiased exponent, `-x` by flipping the sign bit, and the
/// pattern rotated by 16 bits (and read back as f32), all from one bitcast.
#[tpu_kernel]
fn float_bits(
    x: &Ref<f32>,
    exponent: &mut RefMut<i32>,
    negated: &mut RefMut<f32>,
    rotated: &mut RefMut<f32>,
) {
    let bits = x.load().bitcast::<i32>();
    exponent.store(((bits >> 23) & 0xff) - 127);
    negated.store((bits ^ i32::MIN).bitcast::<f32>());
    rotated.store((bits.shift_right_logical(16) | (bits << 16)).bitcast::<f32>());
}

/// `x` shifted by per-element amounts, three ways.
#[tpu_kernel]
fn shifts(
    x: &Ref<i32>,
    n: &Ref<i32>,
    left: &mut RefMut<i32>,
    arithmetic: &mut RefMut<i32>,
    logical: &mut RefMut<i32>,
) {
    let (x, n) = (x.load(), n.load());
    left.store(x << n);
    arithmetic.store(x >> n);
    logical.store(x.shift_right_logical(n));
}

/// Row block `i` of a `[m, LANES]` array.
fn rows() -> BlockSpec {
    BlockSpec::new([ROWS, LANES], |i| (i, 0))
}

fn xorshift_launch(m: usize) -> Launch {
    xorshift32::launch()
        .grid([m / ROWS])
        .input(rows())
        .output(rows(), [m, LANES])
}

fn float_bits_launch(m: usize) -> Launch {
    float_bits::launch()
        .grid([m / ROWS])
        .input(rows())
        .output(rows(), [m, LANES])
        .output(rows(), [m, LANES])
        .output(rows(), [m, LANES])
}

fn shifts_launch(m: usize) -> Launch {
    shifts::launch()
        .grid([m / ROWS])
        .input(rows())
        .input(rows())
        .output(rows(), [m, LANES])
        .output(rows(), [m, LANES])
        .output(rows(), [m, LANES])
}

/// Each device's outputs, as f64 vectors: the interpreter and the CPU plugin in the default
/// form and as the grid loop.
fn run_everywhere(launch: &Launch, inputs: &[&HostTensor]) -> Vec<(&'static str, Vec<Vec<f64>>)> {
    support::run_everywhere(launch, inputs)
        .into_iter()
        .map(|(device, out)| (device, out.iter().map(HostTensor::to_f64_vec).collect()))
        .collect()
}

#[test]
fn xorshift32_is_exact_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let m = 16;
    let xs: Vec<u32> = (0..m * LANES).map(|_| rng.gen()).collect();
    let want: Vec<f64> = xs
        .iter()
        .map(|&x| {
            let mut s = x;
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            f64::from(s)
        })
        .collect();
    let x = HostTensor::from_vec(vec![m, LANES], xs);
    for (device, out) in run_everywhere(&xorshift_launch(m), &[&x]) {
        assert_eq!(out[0], want, "{device}");
    }
}

#[test]
fn float_bit_fields_are_exact_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(31);
    let m = 8;
    let mut xs: Vec<f32> = (0..m * LANES)
        .map(|_| rng.gen_range(-1.0f32..1.0) * 2f32.powi(rng.gen_range(-30..30)))
        .collect();
    xs[0] = 0.0;
    xs[1] = -0.0;
    xs[2] = f32::INFINITY;
    let exponent: Vec<f64> = xs
        .iter()
        .map(|x| f64::from(((x.to_bits() >> 23) & 0xff) as i32 - 127))
        .collect();
    let negated: Vec<f64> = xs.iter().map(|x| f64::from(-x)).collect();
    let rotated: Vec<f64> = xs
        .iter()
        .map(|x| f64::from(f32::from_bits(x.to_bits().rotate_left(16))))
        .collect();
    let x = HostTensor::from_vec(vec![m, LANES], xs);
    let same = |got: &[f64], want: &[f64]| {
        // Bit patterns, so NaNs from the rotation compare too.
        got.iter()
            .zip(want)
            .all(|(g, w)| (*g as f32).to_bits() == (*w as f32).to_bits())
    };
    for (device, out) in run_everywhere(&float_bits_launch(m), &[&x]) {
        assert_eq!(out[0], exponent, "{device}: exponent");
        assert!(same(&out[1], &negated), "{device}: negated");
        assert!(same(&out[2], &rotated), "{device}: rotated");
    }
}

#[test]
fn shifts_by_any_amount_follow_stablehlo_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(37);
    let m = 8;
    let xs: Vec<i32> = (0..m * LANES).map(|_| rng.gen()).collect();
    // Amounts from -3 to 40: in range, and past either end.
    let ns: Vec<i32> = (0..m * LANES).map(|_| rng.gen_range(-3..=40)).collect();
    let inside = |n: i32| (n as u32) < 32;
    let left: Vec<f64> = xs
        .iter()
        .zip(&ns)
        .map(|(&x, &n)| f64::from(if inside(n) { x << n } else { 0 }))
        .collect();
    let arithmetic: Vec<f64> = xs
        .iter()
        .zip(&ns)
        .map(|(&x, &n)| f64::from(x >> (n as u32).min(31)))
        .collect();
    let logical: Vec<f64> = xs
        .iter()
        .zip(&ns)
        .map(|(&x, &n)| {
            f64::from(if inside(n) {
                ((x as u32) >> n) as i32
            } else {
                0
            })
        })
        .collect();
    let x = HostTensor::from_vec(vec![m, LANES], xs);
    let n = HostTensor::from_vec(vec![m, LANES], ns);
    for (device, out) in run_everywhere(&shifts_launch(m), &[&x, &n]) {
        assert_eq!(out[0], left, "{device}: <<");
        assert_eq!(out[1], arithmetic, "{device}: >> (arithmetic)");
        assert_eq!(out[2], logical, "{device}: logical >>");
    }
}

fn programs() -> Vec<(&'static str, KernelProgram)> {
    let m = 16;
    let shape = vec![m, LANES];
    vec![
        (
            "xorshift32",
            xorshift_launch(m)
                .trace_program(&[(DType::U32, shape.clone())])
                .expect("traces"),
        ),
        (
            "float_bits",
            float_bits_launch(m)
                .trace_program(&[(DType::F32, shape.clone())])
                .expect("traces"),
        ),
        (
            "shifts",
            shifts_launch(m)
                .trace_program(&[(DType::I32, shape.clone()), (DType::I32, shape)])
                .expect("traces"),
        ),
    ]
}

#[test]
fn bit_ops_lower_to_mosaic_that_jaxlib_verifies() {
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        if name == "float_bits" {
            assert!(m.readable.contains("\"tpu.bitcast\""), "{}", m.readable);
        }
        if let Some(py) = support::jax_python() {
            support::verify_mosaic(&py, "bits-mosaic", &format!("{name}.mlir"), &m.serialized);
        }
    }
}

#[test]
fn bit_ops_compile_with_libtpu_for_three_generations() {
    for (name, program) in programs() {
        eprintln!("{name}");
        support::compiles_for_every_topology(&program);
    }
}

/// A bitcast between widths (f32 is 32 bits, i16 16).
#[tpu_kernel]
fn narrowing_bitcast(x: &Ref<f32>, o: &mut RefMut<i16>) {
    o.store(x.load().bitcast::<i16>());
}

const NARROWING_LINE: u32 = line!() - 3;

#[test]
fn a_bitcast_between_widths_is_reported_at_its_line() {
    let x = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let spec = || BlockSpec::new([ROWS, LANES], || (0, 0));
    let launch = narrowing_bitcast::launch()
        .input(spec())
        .output(spec(), [ROWS, LANES]);
    let error: TraceError = match launch.run(&Device::interp(), &[&x]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("bit_ops_tests.rs:{NARROWING_LINE}:"))
            && message.contains("cannot reinterpret f32 (32 bits) as i16 (16 bits)"),
        "{message}"
    );
}
