//! Cost of the device-side data checks (`tessera_ops::check`): each op's module is lowered
//! twice, with and without its checks, compiled on the CPU plugin, and run side by side on the
//! same device buffers; prints the median time of each and their ratio.
//!
//!     cargo bench -p tessera-ops --bench index_checks --profile dev [-- ROUNDS]
//!
//! The device work dominates (XLA's CPU code is optimized whatever the Rust profile), so a dev
//! build measures the same ratio as a release one.

use std::time::Instant;
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_lowering::{DType, HostTensor};
use tessera_ops::plan::types_of;
use tessera_ops::{bind, lower_planned, plan, result_values, ArgValue, CallOptions, Lower};
use tessera_runtime::{Buffer, Client, CompileOptions, Device};

type A = ArgValue<HostTensor>;

fn ints(shape: &[usize], n: i64, seed: u64) -> HostTensor {
    let len: usize = shape.iter().product();
    // A small LCG: in range, deterministic.
    let mut s = seed;
    let v: Vec<f64> = (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % n as u64) as f64
        })
        .collect();
    HostTensor::from_f64(DType::I64, shape.to_vec(), &v)
}

fn floats(shape: &[usize]) -> HostTensor {
    let len: usize = shape.iter().product();
    let v: Vec<f64> = (0..len)
        .map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0)
        .collect();
    HostTensor::from_f64(DType::F32, shape.to_vec(), &v)
}

/// The op's module text with or without checks, and its host inputs.
fn lower(op: &str, args: Vec<A>, checks: bool) -> (String, Vec<HostTensor>) {
    let schema = tessera_ops::find(op).expect("op");
    let bound = bind(schema, args, Vec::new()).expect("bind");
    let kind = tessera_runtime::DeviceKind::Cpu;
    let p = plan(
        &types_of(&bound),
        Some(&bound),
        kind,
        CallOptions::default(),
    )
    .expect("plan");
    let tensors: Vec<&HostTensor> = bound.values.iter().flat_map(|v| v.tensors()).collect();
    let inputs: Vec<HostTensor> = p.inputs.iter().map(|&i| tensors[i].clone()).collect();
    let mut cx = Lower::new(0, kind);
    cx.checks_enabled = checks;
    let vals: Vec<Value> = inputs
        .iter()
        .map(|t| cx.f.arg(TensorType::new(t.shape(), t.dtype())))
        .collect();
    let lowered = lower_planned(&mut cx, &p, &vals).expect("lower");
    let checks = std::mem::take(&mut cx.checks);
    let results = result_values(&lowered.outs);
    let refs: Vec<&Value> = results
        .iter()
        .chain(checks.iter().map(|c| &c.flag))
        .collect();
    (cx.f.finish(&refs).expect("finish").into_text(), inputs)
}

/// Median seconds of one run (execute + wait for every output) of each program, over
/// `rounds` runs alternating between them, so drift in the machine's load hits both alike.
fn medians(client: &Client, texts: [&str; 2], bufs: &[Buffer], rounds: usize) -> [f64; 2] {
    let exes = texts.map(|t| {
        client
            .compile(t, &CompileOptions::default())
            .expect("compile")
    });
    let refs: Vec<&Buffer> = bufs.iter().collect();
    let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for i in 0..rounds + 3 {
        for (exe, times) in exes.iter().zip(&mut times) {
            let start = Instant::now();
            for o in exe.execute(&refs).expect("execute") {
                o.block_until_ready().expect("ready");
            }
            if i >= 3 {
                times.push(start.elapsed().as_secs_f64());
            }
        }
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    })
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    let device = Device::cpu().expect("cpu");
    let client = device.client().expect("client");
    let t = |h: HostTensor| ArgValue::Tensor(h);
    let cases: Vec<(&str, &str, Vec<A>)> = vec![
        (
            "index_select [4096, 256] by 4096 rows",
            "index_select",
            vec![
                t(floats(&[4096, 256])),
                ArgValue::Int(0),
                t(ints(&[4096], 4096, 1)),
            ],
        ),
        (
            "embedding [32000, 128] by [16, 512]",
            "embedding",
            vec![t(floats(&[32000, 128])), t(ints(&[16, 512], 32000, 2))],
        ),
        (
            "gather [1024, 1024] dim 1",
            "gather",
            vec![
                t(floats(&[1024, 1024])),
                ArgValue::Int(1),
                t(ints(&[1024, 64], 1024, 3)),
            ],
        ),
        (
            "scatter_add [1024, 1024] dim 0",
            "scatter_add",
            vec![
                t(floats(&[1024, 1024])),
                ArgValue::Int(0),
                t(ints(&[256, 1024], 1024, 4)),
                t(floats(&[256, 1024])),
            ],
        ),
        (
            "nll_loss_forward [4096, 1000]",
            "nll_loss_forward",
            vec![
                t(floats(&[4096, 1000])),
                t(ints(&[4096], 1000, 5)),
                ArgValue::None,
                ArgValue::Int(1),
                ArgValue::Int(-100),
            ],
        ),
        (
            "remainder i64 [1M]",
            "remainder.Tensor",
            vec![
                t(ints(&[1 << 20], 1000, 6)),
                t(plus_one(ints(&[1 << 20], 999, 7))),
            ],
        ),
    ];
    println!(
        "{:<40} {:>12} {:>12} {:>8}",
        "case", "checked ms", "unchecked ms", "ratio"
    );
    let mut ratios = Vec::new();
    for (name, op, args) in cases {
        let (with, inputs) = lower(op, args.clone(), true);
        let (without, _) = lower(op, args, false);
        let bufs: Vec<Buffer> = inputs
            .iter()
            .map(|h| client.upload(h).expect("upload"))
            .collect();
        let [a, b] = medians(&client, [&with, &without], &bufs, rounds);
        ratios.push(a / b);
        println!(
            "{name:<40} {:>12.3} {:>12.3} {:>8.3}",
            a * 1e3,
            b * 1e3,
            a / b
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median ratio checked/unchecked: {:.3}",
        ratios[ratios.len() / 2]
    );
}

/// `h + 1` (divisors that are never zero).
fn plus_one(h: HostTensor) -> HostTensor {
    let v: Vec<f64> = h.to_f64_vec().iter().map(|x| x + 1.0).collect();
    HostTensor::from_f64(h.dtype(), h.shape().to_vec(), &v)
}
