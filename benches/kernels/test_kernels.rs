//! DSL test kernels (not shipped) with a hand-written counterpart of the same math in plain
//! StableHLO, as a JAX user would write it without Pallas: the kernels are those of
//! kernels/tests (scan_tests, block_dims_tests, int8_matmul_tests, scalar_prefetch_tests,
//! grouped_matmul_tests, while_tests): those three share their kernel and launch from
//! kernels/tests/shared/, the short others are repeated here.
//! Inputs are seeded and valid (indices in range, sorted group offsets).

use super::{module, ty};
use rand::{Rng, SeedableRng};
use tessera::lowering::prelude::*;
use tessera::lowering::trace::Launch;
use tessera::lowering::HostTensor;
use tessera_macros::tpu_kernel;

#[path = "../../kernels/tests/shared/row_cumsum.rs"]
mod carried_cumsum;
#[path = "../../kernels/tests/shared/grouped_matmul.rs"]
mod grouped_matmul;
#[path = "../../kernels/tests/shared/sum_while.rs"]
mod sum_while;

/// One f32 sublane tile of rows; lanes.
const ROWS: usize = 8;
const LANES: usize = 128;

#[tpu_kernel]
fn row_cumsum(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load().cumsum(1));
}

/// `[b, m, k] @ [b, k, n]`, the batch dim squeezed out of the blocks.
#[tpu_kernel]
fn batched_matmul(x: &Ref<f32>, y: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(dot(x.load(), y.load()));
}

/// `o = f32(x @ y) * scale`, summed in int32, one scale per row.
#[tpu_kernel]
fn int8_matmul(x: &Ref<i8>, y: &Ref<i8>, scale: &Ref<f32>, o: &mut RefMut<f32>) {
    let acc = dot_i8(x.load(), y.load());
    o.store(acc.cast::<f32>() * scale.load());
}

/// Output block `i` is row block `idx[i]` of `x` (the index map reads the prefetched indices).
#[tpu_kernel]
fn gather_rows(_idx: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load());
}

/// A test kernel's launch, its seeded inputs and the hand-written module of the same math.
pub struct Case {
    pub name: &'static str,
    pub launch: Launch,
    pub inputs: Vec<HostTensor>,
    pub hand: String,
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::from_vec(shape, (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect())
}

pub fn cases() -> Vec<Case> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(20261203);
    let mut cases = Vec::new();

    // Row cumulative sums of [256, 256]: whole rows per block (all steps parallel), and in
    // 128-column blocks with the carry in scratch (as in scan_tests.rs).
    let (rows, cols) = (256, 256);
    let cumsum_hand = |name: &str| {
        let t = ty(&[rows, cols], "f32");
        module(
            name,
            format!(
                "func.func public @main(%x: {t}) -> {t} {{
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = \"stablehlo.reduce_window\"(%x, %zero) ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }}) {{window_dimensions = array<i64: 1, {cols}>, padding = dense<[[0, 0], [{p}, 0]]> : tensor<2x2xi64>}} : ({t}, tensor<f32>) -> {t}
  return %0 : {t}
}}",
                p = cols - 1
            ),
        )
    };
    cases.push(Case {
        name: "row_cumsum",
        launch: row_cumsum::launch()
            .grid([rows / ROWS])
            .input(BlockSpec::new([ROWS, cols], |i| (i, 0)))
            .output(BlockSpec::new([ROWS, cols], |i| (i, 0)), [rows, cols]),
        inputs: vec![random_f32(&mut rng, vec![rows, cols])],
        hand: cumsum_hand("row_cumsum"),
    });
    cases.push(Case {
        name: "row_cumsum_carried",
        launch: carried_cumsum::cumsum_launch(
            carried_cumsum::row_cumsum_f32::launch(),
            tessera::lowering::DType::F32,
            rows,
            cols,
            LANES,
        ),
        inputs: vec![random_f32(&mut rng, vec![rows, cols])],
        hand: cumsum_hand("row_cumsum_carried"),
    });

    // Batched matmul [4, 256, 256] @ [4, 256, 256] on a (batch, 128-row block) grid.
    let (b, m, k, n) = (4, 256, 256, 256);
    let (xt, yt, ot) = (
        ty(&[b, m, k], "f32"),
        ty(&[b, k, n], "f32"),
        ty(&[b, m, n], "f32"),
    );
    cases.push(Case {
        name: "bmm_squeezed",
        launch: batched_matmul::launch()
            .grid([b, m / 128])
            .input(BlockSpec::new([1, 128, k], |bi, i| (bi, i, 0)).squeeze([0]))
            .input(BlockSpec::new([1, k, n], |bi, _i| (bi, 0, 0)).squeeze([0]))
            .output(
                BlockSpec::new([1, 128, n], |bi, i| (bi, i, 0)).squeeze([0]),
                [b, m, n],
            ),
        inputs: vec![
            random_f32(&mut rng, vec![b, m, k]),
            random_f32(&mut rng, vec![b, k, n]),
        ],
        hand: module(
            "bmm",
            format!(
                "func.func public @main(%x: {xt}, %y: {yt}) -> {ot} {{
  %0 = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [2] x [1] : ({xt}, {yt}) -> {ot}
  return %0 : {ot}
}}"
            ),
        ),
    });

    // int8 [256, 512] @ [512, 256] in int32, dequantized per row, in 32-row blocks.
    let (m, k, n) = (256, 512, 256);
    let i8s = |rng: &mut rand::rngs::StdRng, shape: Vec<usize>| {
        let len = shape.iter().product();
        HostTensor::from_vec(
            shape,
            (0..len).map(|_| rng.gen_range(-128i8..=127)).collect(),
        )
    };
    let (x8, y8, x32, y32, acc, st, ot) = (
        ty(&[m, k], "i8"),
        ty(&[k, n], "i8"),
        ty(&[m, k], "i32"),
        ty(&[k, n], "i32"),
        ty(&[m, n], "i32"),
        ty(&[m, 1], "f32"),
        ty(&[m, n], "f32"),
    );
    cases.push(Case {
        name: "int8_matmul",
        launch: int8_matmul::launch()
            .grid([m / 32])
            .input(BlockSpec::new([32, k], |i| (i, 0)))
            .input(BlockSpec::new([k, n], |_i| (0, 0)))
            .input(BlockSpec::new([32, 1], |i| (i, 0)))
            .output(BlockSpec::new([32, n], |i| (i, 0)), [m, n]),
        inputs: vec![
            i8s(&mut rng, vec![m, k]),
            i8s(&mut rng, vec![k, n]),
            random_f32(&mut rng, vec![m, 1]),
        ],
        hand: module(
            "int8_matmul",
            format!(
                "func.func public @main(%x: {x8}, %y: {y8}, %s: {st}) -> {ot} {{
  %xi = stablehlo.convert %x : ({x8}) -> {x32}
  %yi = stablehlo.convert %y : ({y8}) -> {y32}
  %d = stablehlo.dot_general %xi, %yi, contracting_dims = [1] x [0] : ({x32}, {y32}) -> {acc}
  %f = stablehlo.convert %d : ({acc}) -> {ot}
  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1] : ({st}) -> {ot}
  %0 = stablehlo.multiply %f, %sb : {ot}
  return %0 : {ot}
}}"
            ),
        ),
    });

    // A gather of 32 row blocks out of 64 by scalar-prefetched indices.
    let (blocks, n_out) = (64, 32);
    let idx: Vec<i32> = (0..n_out)
        .map(|_| rng.gen_range(0..blocks as i32))
        .collect();
    let (it, xt, x3, g3, ot) = (
        ty(&[n_out], "i32"),
        ty(&[blocks * ROWS, LANES], "f32"),
        ty(&[blocks, ROWS, LANES], "f32"),
        ty(&[n_out, ROWS, LANES], "f32"),
        ty(&[n_out * ROWS, LANES], "f32"),
    );
    cases.push(Case {
        name: "gather_rows",
        launch: gather_rows::launch()
            .grid([n_out])
            .input(BlockSpec::prefetch([ROWS, LANES], |g, p| {
                (p[0].load_scalar([g[0]]), 0)
            }))
            .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [n_out * ROWS, LANES]),
        inputs: vec![
            HostTensor::from_vec(vec![n_out], idx),
            random_f32(&mut rng, vec![blocks * ROWS, LANES]),
        ],
        hand: module(
            "gather_rows",
            format!(
                "func.func public @main(%i: {it}, %x: {xt}) -> {ot} {{
  %x3 = stablehlo.reshape %x : ({xt}) -> {x3}
  %g = \"stablehlo.gather\"(%x3, %i) {{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, {ROWS}, {LANES}>}} : ({x3}, {it}) -> {g3}
  %0 = stablehlo.reshape %g : ({g3}) -> {ot}
  return %0 : {ot}
}}"
            ),
        ),
    });

    // Grouped matmul: [256, 256] rows in 4 ragged groups (sorted offsets), w [4, 256, 256].
    let (m, k, n, groups) = (256, 256, 256, 4);
    let mut cuts: Vec<i32> = (0..groups - 1)
        .map(|_| rng.gen_range(0..=m as i32))
        .collect();
    cuts.sort();
    let offs: Vec<i32> = [vec![0], cuts, vec![m as i32]].concat();
    let (oft, xt, wt, dt, it, bt, ot, gt) = (
        ty(&[groups + 1], "i32"),
        ty(&[m, k], "f32"),
        ty(&[groups, k, n], "f32"),
        ty(&[m, groups, n], "f32"),
        ty(&[m, groups], "i32"),
        ty(&[m, groups], "i1"),
        ty(&[m, n], "f32"),
        ty(&[groups], "i32"),
    );
    let b3 = ty(&[m, groups, n], "i1");
    cases.push(Case {
        name: "grouped_matmul",
        launch: grouped_matmul::gmm_launch(m, k, n, groups),
        inputs: vec![
            HostTensor::from_vec(vec![groups + 1], offs),
            random_f32(&mut rng, vec![m, k]),
            random_f32(&mut rng, vec![groups, k, n]),
        ],
        // Every row times every group's weights, the rows outside a group zeroed, summed
        // over groups (what `ragged_dot` computes, densely).
        hand: module(
            "grouped_matmul",
            format!(
                "func.func public @main(%offs: {oft}, %x: {xt}, %w: {wt}) -> {ot} {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [1] : ({xt}, {wt}) -> {dt}
  %lo = \"stablehlo.slice\"(%offs) {{start_indices = array<i64: 0>, limit_indices = array<i64: {groups}>, strides = array<i64: 1>}} : ({oft}) -> {gt}
  %hi = \"stablehlo.slice\"(%offs) {{start_indices = array<i64: 1>, limit_indices = array<i64: {g1}>, strides = array<i64: 1>}} : ({oft}) -> {gt}
  %rows = stablehlo.iota dim = 0 : {it}
  %lob = stablehlo.broadcast_in_dim %lo, dims = [1] : ({gt}) -> {it}
  %hib = stablehlo.broadcast_in_dim %hi, dims = [1] : ({gt}) -> {it}
  %ge = stablehlo.compare GE, %rows, %lob : ({it}, {it}) -> {bt}
  %lt = stablehlo.compare LT, %rows, %hib : ({it}, {it}) -> {bt}
  %in = stablehlo.and %ge, %lt : {bt}
  %inb = stablehlo.broadcast_in_dim %in, dims = [0, 1] : ({bt}) -> {b3}
  %zero = stablehlo.constant dense<0.0> : {dt}
  %sel = stablehlo.select %inb, %d, %zero : {b3}, {dt}
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%sel init: %z) applies stablehlo.add across dimensions = [1] : ({dt}, tensor<f32>) -> {ot}
  return %0 : {ot}
}}",
                g1 = groups + 1
            ),
        ),
    });

    // A `while` summing the first n = 12 of 16 slabs [8, 128], n read from SMEM.
    let (slabs, count) = (16, 12);
    let (nt, xt, ot, mt, bt) = (
        ty(&[1], "i32"),
        ty(&[slabs, ROWS, LANES], "f32"),
        ty(&[1, ROWS, LANES], "f32"),
        ty(&[slabs], "i32"),
        ty(&[slabs, ROWS, LANES], "i1"),
    );
    let rt = ty(&[ROWS, LANES], "f32");
    cases.push(Case {
        name: "sum_while",
        launch: sum_while::sum_launch(slabs),
        inputs: vec![
            HostTensor::from_vec(vec![1], vec![count]),
            random_f32(&mut rng, vec![slabs, ROWS, LANES]),
        ],
        // The slabs below n kept, the rest zeroed, summed.
        hand: module(
            "sum_while",
            format!(
                "func.func public @main(%n: {nt}, %x: {xt}) -> {ot} {{
  %ns = stablehlo.reshape %n : ({nt}) -> tensor<i32>
  %nb = stablehlo.broadcast_in_dim %ns, dims = [] : (tensor<i32>) -> {mt}
  %i = stablehlo.iota dim = 0 : {mt}
  %lt = stablehlo.compare LT, %i, %nb : ({mt}, {mt}) -> {m1}
  %ltb = stablehlo.broadcast_in_dim %lt, dims = [0] : ({m1}) -> {bt}
  %zero = stablehlo.constant dense<0.0> : {xt}
  %sel = stablehlo.select %ltb, %x, %zero : {bt}, {xt}
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%sel init: %z) applies stablehlo.add across dimensions = [0] : ({xt}, tensor<f32>) -> {rt}
  %0 = stablehlo.reshape %s : ({rt}) -> {ot}
  return %0 : {ot}
}}",
                m1 = ty(&[slabs], "i1")
            ),
        ),
    });
    cases
}
