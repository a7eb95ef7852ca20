//! Must-show kernel of issue 16: a paged-attention decode step. Each sequence's query heads
//! `[H, D]` attend over its KV cache, which lives in pages `[pages, P, D]` left in HBM
//! (`BlockSpec::any()`); the page table and the lengths are scalar-prefetched into SMEM, and
//! each needed page is copied HBM -> VMEM by DMA, double-buffered by hand (page `j + 1` is
//! in flight while page `j` is used). Online softmax over the pages, masked by length.
//! Checked against a float64 reference on the interpreter and the CPU plugin, lowered to
//! Mosaic that jaxlib's tpu dialect verifies, and compiled by libtpu for v5e, v6e, tpu7x.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt};

/// Query heads (one f32 sublane tile), head dim and page size (one lane tile each).
const H: usize = 8;
const D: usize = 128;
const P: usize = 128;

/// One sequence per grid step. `kbuf`/`vbuf` hold two pages each (slots 0 and 1); semaphore
/// `2 slot` signals K copies and `2 slot + 1` V copies into that slot.
#[tpu_kernel]
fn paged_attention(
    pages: &Prefetch<i32>,
    lengths: &Prefetch<i32>,
    q: &Ref<f32>,
    k_pages: &Ref<f32>,
    v_pages: &Ref<f32>,
    o: &mut RefMut<f32>,
    kbuf: &mut Scratch<f32>,
    vbuf: &mut Scratch<f32>,
    sems: &mut Scratch<i32>,
) {
    let b = program_id(0);
    let len = lengths.load_scalar([b]);
    let n_pages = (len + (P as i32 - 1)) / P as i32;
    // `pages` is the `[batch, pages per sequence]` table, flattened.
    let width = (pages.shape()[0] / lengths.shape()[0]) as i32;
    let first = pages.load_scalar([b * width]);
    let k0 = async_copy(
        k_pages.at((first, 0, 0), [1, P, D]),
        kbuf.at((0, 0, 0), [1, P, D]),
        sems.sem(0),
    );
    let v0 = async_copy(
        v_pages.at((first, 0, 0), [1, P, D]),
        vbuf.at((0, 0, 0), [1, P, D]),
        sems.sem(1),
    );
    k0.start();
    v0.start();
    let qs = q.load() * (1.0 / (D as f64).sqrt());
    let mut m = full::<f32>([H, 1], -1e30);
    let mut l = full::<f32>([H, 1], 0.0);
    let mut acc = full::<f32>([H, D], 0.0);
    for j in range(n_pages) {
        let slot = j % 2;
        let next = j + 1;
        if next.lt(n_pages) {
            let page = pages.load_scalar([b * width + next]);
            let other = next % 2;
            let kn = async_copy(
                k_pages.at((page, 0, 0), [1, P, D]),
                kbuf.at((other, 0, 0), [1, P, D]),
                sems.sem(other * 2),
            );
            let vn = async_copy(
                v_pages.at((page, 0, 0), [1, P, D]),
                vbuf.at((other, 0, 0), [1, P, D]),
                sems.sem(other * 2 + 1),
            );
            kn.start();
            vn.start();
        }
        let page = pages.load_scalar([b * width + j]);
        let kc = async_copy(
            k_pages.at((page, 0, 0), [1, P, D]),
            kbuf.at((slot, 0, 0), [1, P, D]),
            sems.sem(slot * 2),
        );
        let vc = async_copy(
            v_pages.at((page, 0, 0), [1, P, D]),
            vbuf.at((slot, 0, 0), [1, P, D]),
            sems.sem(slot * 2 + 1),
        );
        kc.wait();
        vc.wait();
        let k = kbuf.load_slice((slot, 0, 0), [1, P, D]).reshape([P, D]);
        let v = vbuf.load_slice((slot, 0, 0), [1, P, D]).reshape([P, D]);
        let pos = iota::<i32>([H, P], 1) + j * P as i32;
        let live = pos.lt(len);
        let s = where_(live, dot_t(qs, k), -1e30);
        let m_new = maximum(m, s.max(1, true));
        let alpha = exp(m - m_new);
        let e = where_(live, exp(s - m_new), 0.0);
        l = alpha * l + e.sum(1, true);
        acc = alpha * acc + dot(e, v);
        m = m_new;
    }
    o.store(acc / l);
}

/// `batch` sequences of up to `width` pages each, from a pool of `pool` pages.
fn launch(batch: usize) -> Launch {
    paged_attention::launch()
        .grid([batch])
        .input(BlockSpec::new([1, H, D], |b| (b, 0, 0)).squeeze([0]))
        .input(BlockSpec::any())
        .input(BlockSpec::any())
        .output(
            BlockSpec::new([1, H, D], |b| (b, 0, 0)).squeeze([0]),
            [batch, H, D],
        )
        .scratch(Vmem::<f32>::new([2, P, D]))
        .scratch(Vmem::<f32>::new([2, P, D]))
        .scratch(DmaSemaphores::new(4))
        .semantics([Arbitrary])
}

struct Case {
    batch: usize,
    width: usize,
    pool: usize,
    pages: Vec<i32>,
    lengths: Vec<i32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn case(seed: u64, batch: usize, width: usize, pool: usize) -> Case {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut draw = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect() };
    let (q, k, v) = (draw(batch * H * D), draw(pool * P * D), draw(pool * P * D));
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 1);
    // Any page of the pool, repeats allowed; lengths from 1 (one live position) to full.
    let pages = (0..batch * width)
        .map(|_| rng.gen_range(0..pool as i32))
        .collect();
    let mut lengths: Vec<i32> = (0..batch)
        .map(|_| rng.gen_range(1..=(width * P) as i32))
        .collect();
    lengths[0] = (width * P) as i32;
    if batch > 1 {
        lengths[1] = 1;
    }
    Case {
        batch,
        width,
        pool,
        pages,
        lengths,
        q,
        k,
        v,
    }
}

impl Case {
    fn inputs(&self) -> Vec<HostTensor> {
        vec![
            HostTensor::from_vec(vec![self.batch * self.width], self.pages.clone()),
            HostTensor::from_vec(vec![self.batch], self.lengths.clone()),
            HostTensor::from_vec(vec![self.batch, H, D], self.q.clone()),
            HostTensor::from_vec(vec![self.pool, P, D], self.k.clone()),
            HostTensor::from_vec(vec![self.pool, P, D], self.v.clone()),
        ]
    }

    /// Softmax attention in f64 over the first `len` positions of the sequence's pages.
    fn reference(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.batch * H * D);
        let scale = 1.0 / (D as f64).sqrt();
        for b in 0..self.batch {
            let len = self.lengths[b] as usize;
            let row = |t: &[f32], pos: usize| {
                let page = self.pages[b * self.width + pos / P] as usize;
                let at = (page * P + pos % P) * D;
                t[at..at + D]
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect::<Vec<f64>>()
            };
            for h in 0..H {
                let q: Vec<f64> = self.q[(b * H + h) * D..][..D]
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect();
                let s: Vec<f64> = (0..len)
                    .map(|pos| {
                        row(&self.k, pos)
                            .iter()
                            .zip(&q)
                            .map(|(k, q)| k * q)
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let total: f64 = e.iter().sum();
                let mut o = vec![0.0; D];
                for (pos, w) in e.iter().enumerate() {
                    for (o, v) in o.iter_mut().zip(row(&self.v, pos)) {
                        *o += w * v / total;
                    }
                }
                out.extend(o);
            }
        }
        out
    }
}

/// f32 scores and an f32 online softmax over up to 512 positions: measured 3.5e-8
/// (interpreter) and 3.7e-8 (CPU plugin) max absolute error vs float64 on the seeded case
/// (outputs are averages of values in [-1, 1]); checked at 1e-6.
const TOL: f64 = 1e-6;

#[test]
fn paged_attention_matches_float64_on_every_device() {
    let c = case(17, 3, 4, 10);
    let inputs = c.inputs();
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let want = c.reference();
    let l = launch(c.batch);
    let runs = [
        ("interp", l.run(&Device::interp(), &refs)),
        ("cpu auto", l.run_as(&support::cpu(), &refs, Form::Auto)),
        (
            "cpu grid loop",
            l.run_as(&support::cpu(), &refs, Form::GridLoop),
        ),
    ];
    for (device, out) in runs {
        let got = out.unwrap_or_else(|e| panic!("{device}: {e}"))[0].to_f64_vec();
        assert_eq!(got.len(), want.len(), "{device}");
        let worst = support::max_abs_error(&got, &want);
        eprintln!("{device}: max |error| vs float64 {worst:e}");
        assert!(worst <= TOL, "{device}: max |error| {worst:e} > {TOL:e}");
    }
}

fn program() -> KernelProgram {
    let c = case(3, 2, 4, 6);
    let types: Vec<(DType, Vec<usize>)> = c
        .inputs()
        .iter()
        .map(|t| (t.dtype(), t.shape().to_vec()))
        .collect();
    launch(c.batch).trace_program(&types).expect("traces")
}

#[test]
fn paged_attention_mosaic_verifies_with_jaxlib() {
    let m = lower_to_mosaic(&program(), TpuGeneration::V6e).expect("lowers");
    assert!(m.readable.contains("\"tpu.enqueue_dma\""), "{}", m.readable);
    assert!(
        m.readable.contains("scalar_prefetch = 2 : i64"),
        "{}",
        m.readable
    );
    let Some(py) = support::jax_python() else {
        return;
    };
    support::verify_mosaic(&py, "paged", "paged_attention.mlir", &m.serialized);
}

#[test]
fn paged_attention_compiles_with_libtpu_for_three_generations() {
    support::compiles_for_every_topology(&program());
}

#[test]
fn paged_attention_has_the_structure_pallas_emits() {
    // `program()`: 2 sequences of up to 4 pages from a pool of 6. Same grid, semantics, 2
    // scalar-prefetch arrays, 3 scratch operands (two VMEM page slots, 4 DMA semaphores),
    // argument types (K/V pools as `any` memrefs) and windows (squeezed q/o blocks; none for
    // the HBM operands).
    let args = ["--paged", "2", "4", "6"];
    if let Some(pallas) = support::assert_pallas_structure("paged-pallas", &program(), &args, "paged") {
        assert_eq!(pallas["scalar_prefetch"], 2);
    }
}
