//! Each shipped kernel, lowered by Tessera, vs the same math written by hand as plain
//! StableHLO (one `dot_general`, whole-array softmax, ...), both on the CPU plugin with inputs
//! on device; and the DSL test kernels of #16 with a hand-written counterpart of the same math
//! (`benches/kernels/test_kernels.rs`). Both of a pair must agree on seeded inputs before they are
//! timed. Criterion times each; a side-by-side pass at the end prints the ratio
//! handwritten/tessera of interleaved medians (goal >= 0.95).
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

/// The StableHLO tensor type of `shape` and element type `dtype` ("f32", "i8", ...).
fn ty(shape: &[usize], dtype: &str) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("tensor<{}x{dtype}>", dims.join("x"))
}

fn t(shape: &[usize]) -> String {
    ty(shape, "f32")
}

/// A hand-written module named after its kernel, around its `main`.
fn module(name: &str, body: String) -> String {
    format!("module @hand_{name} {{\n{body}\n}}")
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
        other => panic!("no handwritten StableHLO for `{other}`"),
    };
    module(name, body)
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

#[path = "kernels/test_kernels.rs"]
mod test_kernels;

fn pairs(device: &Device) -> Vec<Pair> {
    let client = device.client().expect("cpu client");
    let pair = |name: &'static str,
                launch: tessera::lowering::trace::Launch,
                inputs: Vec<HostTensor>,
                hand: String| {
        let sig: Vec<(DType, Vec<usize>)> = inputs
            .iter()
            .map(|t| (t.dtype(), t.shape().to_vec()))
            .collect();
        let program = launch.trace_program(&sig).expect("traces");
        let tessera = compile_program(&program, device, Form::Auto).expect("tessera compiles");
        let hand = client
            .compile_cached(&hand, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("handwritten {name} compiles: {e}"));
        let inputs: Vec<Buffer> = inputs
            .iter()
            .map(|t| client.upload(t).expect("upload"))
            .collect();
        let p = Pair {
            name,
            tessera,
            hand,
            inputs,
        };
        p.check_agree();
        p
    };
    let shipped = tessera_kernels::shipped().iter().map(|k| {
        let shape = k.default_shape;
        let inputs = (k.input_shapes)(shape)
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let n: usize = s.iter().product();
                let v: Vec<f64> = (0..n)
                    .map(|j| ((j * 7 + i * 13) % 17) as f64 / 17.0 - 0.5)
                    .collect();
                HostTensor::from_f64(DType::F32, s, &v)
            })
            .collect();
        let launch = (k.launch)(shape).expect("launch");
        pair(k.name, launch, inputs, handwritten(k.name, shape))
    });
    let tests = test_kernels::cases()
        .into_iter()
        .map(|c| pair(c.name, c.launch, c.inputs, c.hand));
    shipped.chain(tests).collect()
}

impl Pair {
    /// Panics unless both programs give the same outputs (f32 sums in another order: within
    /// 1e-4 of the largest magnitude), so that a ratio compares the same math.
    fn check_agree(&self) {
        let refs: Vec<&Buffer> = self.inputs.iter().collect();
        let outs = |exe: &Executable| -> Vec<Vec<f64>> {
            exe.execute(&refs)
                .expect("executes")
                .iter()
                .map(|b| b.to_host().expect("downloads").to_f64_vec())
                .collect()
        };
        let (t, h) = (outs(&self.tessera), outs(&self.hand));
        assert_eq!(t.len(), h.len(), "{}: output counts differ", self.name);
        for (t, h) in t.iter().zip(&h) {
            assert_eq!(t.len(), h.len(), "{}: output sizes differ", self.name);
            let scale = h.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let worst = t
                .iter()
                .zip(h)
                .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst <= 1e-4 * scale,
                "{}: tessera and handwritten differ by {worst} (scale {scale})",
                self.name
            );
        }
    }
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
