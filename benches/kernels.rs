//! Each shipped kernel, lowered by Tessera, vs the same math written by hand as plain
//! StableHLO (one `dot_general`, whole-array softmax, ...), both on the CPU plugin with inputs
//! on device; and the DSL test kernels that have such a counterpart (row cumulative sums, see
//! kernels/tests/scan_tests.rs). Criterion times each; a side-by-side pass at the end prints
//! the ratio handwritten/tessera of interleaved medians (goal >= 0.95).
//!
//! row_cumsum_carried (a carry in scratch across the `arbitrary` column axis) measured 0.87
//! under the grid loop; the carried-scan rewrite (stablehlo/kernel/carried.rs) makes it one
//! whole-array cumsum: 1.003 and 0.996 in two runs on the 2-core dev machine.

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::Instant;
use tessera::lowering::stablehlo::Form;
use tessera::lowering::DType;
use tessera::runtime::{compile_program, Buffer, CompileOptions, Device, Executable, HostTensor};

fn t(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("tensor<{}xf32>", dims.join("x"))
}

/// Hand-written StableHLO of each kernel's math for a problem shape.
fn handwritten(name: &str, s: &[usize]) -> String {
    let body = match name {
        "add" => {
            let ty = t(s);
            format!("func.func public @main(%x: {ty}, %y: {ty}) -> {ty} {{\n  %0 = stablehlo.add %x, %y : {ty}\n  return %0 : {ty}\n}}")
        }
        "silu" => {
            let ty = t(s);
            format!("func.func public @main(%x: {ty}) -> {ty} {{\n  %s = stablehlo.logistic %x : {ty}\n  %0 = stablehlo.multiply %x, %s : {ty}\n  return %0 : {ty}\n}}")
        }
        "matmul" => {
            let (m, n, k) = (s[0], s[1], s[2]);
            let (a, b, c) = (t(&[m, k]), t(&[k, n]), t(&[m, n]));
            format!("func.func public @main(%x: {a}, %y: {b}) -> {c} {{\n  %0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [0] : ({a}, {b}) -> {c}\n  return %0 : {c}\n}}")
        }
        "softmax" => {
            let (ty, row) = (t(s), t(&[s[0]]));
            format!(
                "func.func public @main(%x: {ty}) -> {ty} {{
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : ({ty}, tensor<f32>) -> {row}
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ({row}) -> {ty}
  %d = stablehlo.subtract %x, %mb : {ty}
  %e = stablehlo.exponential %d : {ty}
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : ({ty}, tensor<f32>) -> {row}
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : ({row}) -> {ty}
  %0 = stablehlo.divide %e, %sb : {ty}
  return %0 : {ty}
}}"
            )
        }
        "layer_norm" => {
            let (ty, row, col) = (t(s), t(&[s[0]]), t(&[s[1]]));
            let inv_n = 1.0 / s[1] as f64;
            format!(
                "func.func public @main(%x: {ty}, %w: {col}, %b: {col}) -> {ty} {{
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %invn = stablehlo.constant dense<{inv_n:e}> : {ty}
  %eps = stablehlo.constant dense<1.0e-05> : {ty}
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : ({ty}, tensor<f32>) -> {row}
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : ({row}) -> {ty}
  %mean = stablehlo.multiply %sb, %invn : {ty}
  %c = stablehlo.subtract %x, %mean : {ty}
  %c2 = stablehlo.multiply %c, %c : {ty}
  %v = stablehlo.reduce(%c2 init: %zero) applies stablehlo.add across dimensions = [1] : ({ty}, tensor<f32>) -> {row}
  %vb = stablehlo.broadcast_in_dim %v, dims = [0] : ({row}) -> {ty}
  %var = stablehlo.multiply %vb, %invn : {ty}
  %ve = stablehlo.add %var, %eps : {ty}
  %r = stablehlo.rsqrt %ve : {ty}
  %n = stablehlo.multiply %c, %r : {ty}
  %wb = stablehlo.broadcast_in_dim %w, dims = [1] : ({col}) -> {ty}
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : ({col}) -> {ty}
  %nw = stablehlo.multiply %n, %wb : {ty}
  %0 = stablehlo.add %nw, %bb : {ty}
  return %0 : {ty}
}}"
            )
        }
        "row_cumsum" | "row_cumsum_carried" => {
            let ty = t(s);
            format!(
                "func.func public @main(%x: {ty}) -> {ty} {{
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = \"stablehlo.reduce_window\"(%x, %zero) ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }}) {{window_dimensions = array<i64: 1, {n}>, padding = dense<[[0, 0], [{p}, 0]]> : tensor<2x2xi64>}} : ({ty}, tensor<f32>) -> {ty}
  return %0 : {ty}
}}",
                n = s[1],
                p = s[1] - 1
            )
        }
        other => panic!("no handwritten StableHLO for `{other}`"),
    };
    format!("module @hand_{name} {{\n{body}\n}}")
}

struct Pair {
    name: &'static str,
    tessera: Arc<Executable>,
    hand: Arc<Executable>,
    inputs: Vec<Buffer>,
}

fn run(exe: &Executable, inputs: &[Buffer]) {
    let refs: Vec<&Buffer> = inputs.iter().collect();
    for b in exe.execute(&refs).expect("executes") {
        b.block_until_ready().expect("ready");
    }
}

/// DSL test kernels (not shipped) with a hand-written counterpart: row cumulative sums of a
/// `[rows, cols]` array, whole rows per block (all steps parallel), and in 128-column blocks
/// with the running total carried in scratch along a sequential axis (as in scan_tests.rs).
mod test_kernels {
    use tessera::lowering::prelude::*;
    use tessera::lowering::trace::Launch;
    use tessera_macros::tpu_kernel;

    #[tpu_kernel]
    pub fn row_cumsum(x: &Ref<f32>, o: &mut RefMut<f32>) {
        o.store(x.load().cumsum(1));
    }

    #[tpu_kernel]
    pub fn row_cumsum_carried(x: &Ref<f32>, o: &mut RefMut<f32>, carry: &mut Scratch<f32>) {
        if program_id(1).eq(0) {
            carry.store(zeros());
        }
        let t = x.load();
        let before = carry.load();
        o.store(t.cumsum(1) + before);
        carry.store(before + t.sum(1, true));
    }

    pub const SHAPE: [usize; 2] = [256, 256];

    pub fn launches() -> Vec<(&'static str, Launch)> {
        let [rows, cols] = SHAPE;
        vec![
            (
                "row_cumsum",
                row_cumsum::launch()
                    .grid([rows / 8])
                    .input(BlockSpec::new([8, cols], |i| (i, 0)))
                    .output(BlockSpec::new([8, cols], |i| (i, 0)), [rows, cols]),
            ),
            (
                "row_cumsum_carried",
                row_cumsum_carried::launch()
                    .grid([rows / 8, cols / 128])
                    .input(BlockSpec::new([8, 128], |i, j| (i, j)))
                    .output(BlockSpec::new([8, 128], |i, j| (i, j)), [rows, cols])
                    .scratch(Vmem::<f32>::new([8, 128]))
                    .semantics([Parallel, Arbitrary]),
            ),
        ]
    }
}

fn pairs(device: &Device) -> Vec<Pair> {
    let client = device.client().expect("cpu client");
    let pair = |name: &'static str,
                launch: tessera::lowering::trace::Launch,
                shape: &[usize],
                shapes: Vec<Vec<usize>>| {
        let sig: Vec<(DType, Vec<usize>)> =
            shapes.iter().map(|s| (DType::F32, s.clone())).collect();
        let program = launch.trace_program(&sig).expect("traces");
        let tessera = compile_program(&program, device, Form::Auto).expect("tessera compiles");
        let hand = client
            .compile_cached(&handwritten(name, shape), &CompileOptions::default())
            .expect("handwritten compiles");
        let inputs = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n: usize = s.iter().product();
                let v: Vec<f64> = (0..n)
                    .map(|j| ((j * 7 + i * 13) % 17) as f64 / 17.0 - 0.5)
                    .collect();
                client
                    .upload(&HostTensor::from_f64(DType::F32, s.clone(), &v))
                    .expect("upload")
            })
            .collect();
        Pair {
            name,
            tessera,
            hand,
            inputs,
        }
    };
    let shipped = tessera_kernels::shipped().iter().map(|k| {
        let shape = k.default_shape;
        pair(
            k.name,
            (k.launch)(shape).expect("launch"),
            shape,
            (k.input_shapes)(shape),
        )
    });
    let tests = test_kernels::launches().into_iter().map(|(name, launch)| {
        pair(
            name,
            launch,
            &test_kernels::SHAPE,
            vec![test_kernels::SHAPE.to_vec()],
        )
    });
    shipped.chain(tests).collect()
}

fn median_us(f: &mut dyn FnMut(), n: usize) -> f64 {
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[n / 2]
}

fn kernels(c: &mut Criterion) {
    let device = Device::cpu().expect("CPU plugin: run `make plugin`");
    let pairs = pairs(&device);
    for p in &pairs {
        let mut g = c.benchmark_group(format!("kernel/{}", p.name));
        g.bench_function("tessera", |b| b.iter(|| run(&p.tessera, &p.inputs)));
        g.bench_function("handwritten", |b| b.iter(|| run(&p.hand, &p.inputs)));
        g.finish();
    }
    // Side by side, interleaved in rounds so that machine noise hits both alike.
    println!(
        "\n{:<20} {:>14} {:>16} {:>22}",
        "kernel", "tessera us", "handwritten us", "ratio hand/tessera"
    );
    for p in &pairs {
        let (mut ts, mut hs) = (Vec::new(), Vec::new());
        for _ in 0..15 {
            ts.push(median_us(&mut || run(&p.tessera, &p.inputs), 21));
            hs.push(median_us(&mut || run(&p.hand, &p.inputs), 21));
        }
        ts.sort_by(f64::total_cmp);
        hs.sort_by(f64::total_cmp);
        let (t, h) = (ts[ts.len() / 2], hs[hs.len() / 2]);
        println!("{:<20} {:>14.1} {:>16.1} {:>22.3}", p.name, t, h, h / t);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = kernels
}
criterion_main!(benches);
