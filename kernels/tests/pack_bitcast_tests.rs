//! Packing narrow types into 32-bit words and back (#16 item 2.6), as Pallas TPU users write
//! it with `pltpu.bitcast`: `[2n, m]` bf16 <-> `[n, m]` u32 and `[4n, m]` i8 <-> `[n, m]` i32,
//! rows `p*i .. p*i + p` sharing word row `i`, row `p*i + k` in bits `k*narrow ..`. Words
//! are checked against ones assembled here from the inputs' bits, unpacking a known word
//! pattern gives its halves, a round trip gives the input back, and the words are byte for
//! byte the ones Pallas' own `pltpu.bitcast` packs (interpret mode), all exactly on the
//! interpreter and the XLA CPU plugin; the Mosaic verifies with jaxlib's tpu dialect and
//! libtpu compiles it for v5e, v6e and tpu7x. Rows that do not pack are reported at this
//! file's line, and so is a width change through the same-shape `bitcast`.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;

const LANES: usize = 128;

/// bf16 rows packed in pairs into u32 words, and the words unpacked again.
#[tpu_kernel]
fn bf16_words(x: &Ref<bf16>, words: &mut RefMut<u32>, back: &mut RefMut<bf16>) {
    let w = x.load().pack_bitcast::<u32>();
    words.store(w);
    back.store(w.pack_bitcast::<bf16>());
}

/// i8 rows packed in fours into i32 words, and the words unpacked again.
#[tpu_kernel]
fn i8_words(x: &Ref<i8>, words: &mut RefMut<i32>, back: &mut RefMut<i8>) {
    let w = x.load().pack_bitcast::<i32>();
    words.store(w);
    back.store(w.pack_bitcast::<i8>());
}

/// i32 words unpacked into bf16 pairs of rows, and f32 read as i32 (same width: the plain
/// reinterpretation, same shape).
#[tpu_kernel]
fn unpack_bf16(w: &Ref<i32>, f: &Ref<f32>, halves: &mut RefMut<bf16>, bits: &mut RefMut<i32>) {
    halves.store(w.load().pack_bitcast::<bf16>());
    bits.store(f.load().pack_bitcast::<i32>());
}

/// Six i8 rows do not fill 32-bit words.
#[tpu_kernel]
fn six_rows(x: &Ref<i8>, o: &mut RefMut<i32>) {
    o.store(x.load().pack_bitcast::<i32>());
}

const SIX_ROWS_LINE: u32 = line!() - 3;

/// `bitcast` keeps the shape, so it refuses a width change and points at `pack_bitcast`.
#[tpu_kernel]
fn same_shape_narrowing(x: &Ref<bf16>, o: &mut RefMut<u32>) {
    o.store(x.load().bitcast::<u32>());
}

const NARROWING_LINE: u32 = line!() - 3;

/// `[words * p * steps, LANES]` narrow rows in blocks of `p * words` rows, packed into
/// `[words * steps, LANES]` in blocks of `words` rows.
fn words_launch(kernel: Launch, p: usize, words: usize, steps: usize) -> Launch {
    let narrow = || BlockSpec::new([p * words, LANES], |i| (i, 0));
    kernel
        .grid([steps])
        .input(narrow())
        .output(
            BlockSpec::new([words, LANES], |i| (i, 0)),
            [words * steps, LANES],
        )
        .output(narrow(), [p * words * steps, LANES])
}

/// Words assembled from narrow rows: row `p*i + k` in bits `k*bits ..` of word row `i`.
fn assemble(narrow_bits: &[u32], bits: u32, rows: usize) -> Vec<u32> {
    let p = (32 / bits) as usize;
    let mask = if bits == 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    };
    (0..rows / p * LANES)
        .map(|flat| {
            let (i, c) = (flat / LANES, flat % LANES);
            (0..p).fold(0u32, |word, k| {
                word | ((narrow_bits[(p * i + k) * LANES + c] & mask) << (k as u32 * bits))
            })
        })
        .collect()
}

#[test]
fn bf16_rows_pack_in_pairs_low_half_first_and_unpack_back() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(31);
    let (words, steps) = (8, 3);
    let rows = 2 * words * steps;
    let x: Vec<bf16> = (0..rows * LANES)
        .map(|_| bf16::from_f32(rng.gen_range(-4.0..4.0)))
        .collect();
    let bits: Vec<u32> = x.iter().map(|v| u32::from(v.to_bits())).collect();
    let want: Vec<f64> = assemble(&bits, 16, rows)
        .into_iter()
        .map(f64::from)
        .collect();
    let xt = HostTensor::from_vec(vec![rows, LANES], x);
    let launch = words_launch(bf16_words::launch(), 2, words, steps);
    for (device, out) in support::run_everywhere(&launch, &[&xt]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}: words");
        assert_eq!(out[1].bytes(), xt.bytes(), "{device}: round trip");
    }
}

#[test]
fn i8_rows_pack_in_fours_lowest_byte_first_and_unpack_back() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(32);
    let (words, steps) = (8, 2);
    let rows = 4 * words * steps;
    let x: Vec<i8> = (0..rows * LANES).map(|_| rng.gen()).collect();
    let bits: Vec<u32> = x.iter().map(|&v| u32::from(v as u8)).collect();
    let want: Vec<f64> = assemble(&bits, 8, rows)
        .into_iter()
        .map(|w| f64::from(w as i32))
        .collect();
    let xt = HostTensor::from_vec(vec![rows, LANES], x);
    let launch = words_launch(i8_words::launch(), 4, words, steps);
    for (device, out) in support::run_everywhere(&launch, &[&xt]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}: words");
        assert_eq!(out[1].to_f64_vec(), xt.to_f64_vec(), "{device}: round trip");
    }
}

/// Pallas' own `pltpu.bitcast` of `x` (tools/pallas_bitcast.py, JAX's interpret-mode
/// lowering) as raw bytes; `None` where `TESSERA_JAX_PYTHON` is unset.
fn pallas_bitcast(x: &HostTensor, from: &str, to: &str) -> Option<Vec<u8>> {
    let dir = support::temp_dir("pallas-bitcast");
    let (input, output) = (
        dir.path().join(format!("{from}.in")),
        dir.path().join(format!("{from}.out")),
    );
    std::fs::write(&input, x.bytes()).unwrap();
    let args = [
        input.to_string_lossy().to_string(),
        from.to_string(),
        x.shape()[0].to_string(),
        x.shape()[1].to_string(),
        to.to_string(),
        output.to_string_lossy().to_string(),
    ];
    let words =
        support::jax_tool("pallas_bitcast.py", &args).map(|_| std::fs::read(&output).unwrap());
    words
}

#[test]
fn words_are_the_ones_pallas_pltpu_bitcast_packs() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(33);
    let bf: Vec<bf16> = (0..32 * LANES)
        .map(|_| bf16::from_f32(rng.gen_range(-4.0..4.0)))
        .collect();
    let bytes: Vec<i8> = (0..64 * LANES).map(|_| rng.gen()).collect();
    let cases = [
        (
            words_launch(bf16_words::launch(), 2, 8, 2),
            HostTensor::from_vec(vec![32, LANES], bf),
            ("bfloat16", "uint32"),
        ),
        (
            words_launch(i8_words::launch(), 4, 8, 2),
            HostTensor::from_vec(vec![64, LANES], bytes),
            ("int8", "int32"),
        ),
    ];
    for (launch, x, (from, to)) in cases {
        let Some(want) = pallas_bitcast(&x, from, to) else {
            return;
        };
        for (device, out) in support::run_everywhere(&launch, &[&x]) {
            assert_eq!(out[0].bytes(), want.as_slice(), "{device}: {from} -> {to}");
        }
    }
}

fn unpack_launch(words: usize) -> Launch {
    let spec = || BlockSpec::new([words, LANES], |_| (0, 0));
    unpack_bf16::launch()
        .grid([1])
        .input(spec())
        .input(spec())
        .output(
            BlockSpec::new([2 * words, LANES], |_| (0, 0)),
            [2 * words, LANES],
        )
        .output(spec(), [words, LANES])
}

#[test]
fn a_known_word_unpacks_into_its_low_then_high_half() {
    let words = 8;
    // 0x3f80_4000: low half 0x4000 is bf16 2.0 (row 2i), high half 0x3f80 is 1.0 (row 2i+1);
    // word row 1 holds -1.0 (0xbf80) low and 0.5 (0x3f00) high.
    let mut w = vec![0x3f80_4000_u32 as i32; words * LANES];
    w[LANES..2 * LANES].fill(0x3f00_bf80_u32 as i32);
    let f: Vec<f32> = (0..words * LANES).map(|i| i as f32 - 100.5).collect();
    let want_halves: Vec<f64> = (0..2 * words)
        .flat_map(|r| {
            let v = match r {
                2 => -1.0,
                3 => 0.5,
                r if r % 2 == 0 => 2.0,
                _ => 1.0,
            };
            std::iter::repeat_n(v, LANES)
        })
        .collect();
    let want_bits: Vec<f64> = f.iter().map(|v| f64::from(v.to_bits() as i32)).collect();
    let wt = HostTensor::from_vec(vec![words, LANES], w);
    let ft = HostTensor::from_vec(vec![words, LANES], f);
    for (device, out) in support::run_everywhere(&unpack_launch(words), &[&wt, &ft]) {
        assert_eq!(out[0].to_f64_vec(), want_halves, "{device}: halves");
        assert_eq!(out[1].to_f64_vec(), want_bits, "{device}: f32 bits");
    }
}

#[test]
fn rows_that_do_not_pack_and_a_same_shape_width_change_are_reported_at_their_lines() {
    let x = HostTensor::zeros(DType::I8, vec![6, LANES]);
    let message = support::interp_trace_error(
        &six_rows::launch()
            .input(BlockSpec::new([6, LANES], || (0, 0)))
            .output(BlockSpec::new([1, LANES], || (0, 0)), [1, LANES]),
        &[&x],
    )
    .to_string();
    assert!(
        message.contains(&format!("pack_bitcast_tests.rs:{SIX_ROWS_LINE}:"))
            && message.contains("must be a multiple of 4"),
        "{message}"
    );
    let x = HostTensor::zeros(DType::BF16, vec![16, LANES]);
    let message = support::interp_trace_error(
        &same_shape_narrowing::launch()
            .input(BlockSpec::new([16, LANES], || (0, 0)))
            .output(BlockSpec::new([16, LANES], || (0, 0)), [16, LANES]),
        &[&x],
    )
    .to_string();
    assert!(
        message.contains(&format!("pack_bitcast_tests.rs:{NARROWING_LINE}:"))
            && message.contains("cannot reinterpret bf16 (16 bits) as u32 (32 bits)")
            && message.contains("pack_bitcast"),
        "{message}"
    );
}

fn programs() -> Vec<(&'static str, KernelProgram)> {
    vec![
        (
            "bf16_words",
            words_launch(bf16_words::launch(), 2, 8, 2)
                .trace_program(&[(DType::BF16, vec![32, LANES])])
                .expect("traces"),
        ),
        (
            "i8_words",
            words_launch(i8_words::launch(), 4, 8, 2)
                .trace_program(&[(DType::I8, vec![64, LANES])])
                .expect("traces"),
        ),
        (
            "unpack_bf16",
            unpack_launch(8)
                .trace_program(&[(DType::I32, vec![8, LANES]), (DType::F32, vec![8, LANES])])
                .expect("traces"),
        ),
    ]
}

#[test]
fn packing_lowers_to_tpu_bitcast_that_jaxlib_verifies() {
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        assert_eq!(
            m.readable.matches("\"tpu.bitcast\"").count(),
            2,
            "{name}: {}",
            m.readable
        );
        if let Some(py) = support::jax_python() {
            support::verify_mosaic(&py, "pack-mosaic", &format!("{name}.mlir"), &m.serialized);
        }
    }
}

#[test]
fn packing_compiles_with_libtpu_for_three_generations() {
    for (name, program) in programs() {
        eprintln!("{name}");
        support::compiles_for_every_topology(&program);
    }
}
