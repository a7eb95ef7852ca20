//! The benchmark workloads (shared by `tessera bench eager` and the criterion bench, and
//! checked against float64 references by the tests): a transformer block forward, a chain of
//! pointwise ops, and an MLP training step with a hand-written backward and in-place SGD.
//! Each runs in whatever mode is current.

use crate::error::Result;
use crate::runtime::call;
use crate::tensor::Tensor;
use tessera_lowering::{DType, HostTensor};
use tessera_ops::ArgValue;

/// Deterministic pseudo-random values in [-scale, scale) (an LCG: no dependency, same on
/// every run).
pub fn lcg_values(seed: u64, n: usize, scale: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// A seeded host tensor.
pub fn host_tensor(dtype: DType, seed: u64, shape: &[usize], scale: f64) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::from_f64(dtype, shape.to_vec(), &lcg_values(seed, n, scale))
}

/// A seeded device tensor.
pub fn random(dtype: DType, seed: u64, shape: &[usize], scale: f64) -> Result<Tensor> {
    Tensor::from_host(&host_tensor(dtype, seed, shape, scale))
}

/// The weights of one pre-norm transformer block of width `d` with `heads` heads.
pub struct Block {
    pub heads: usize,
    pub ln1_w: Tensor,
    pub ln1_b: Tensor,
    pub w_qkv: Tensor,
    pub w_o: Tensor,
    pub ln2_w: Tensor,
    pub ln2_b: Tensor,
    pub w_1: Tensor,
    pub w_2: Tensor,
}

impl Block {
    pub fn new(d: usize, heads: usize, seed: u64, dt: DType) -> Result<Block> {
        let s = 1.0 / (d as f64).sqrt();
        Ok(Block {
            heads,
            ln1_w: Tensor::full(dt, &[d], 1.0)?,
            ln1_b: Tensor::zeros(dt, &[d])?,
            w_qkv: random(dt, seed, &[d, 3 * d], s)?,
            w_o: random(dt, seed + 1, &[d, d], s)?,
            ln2_w: Tensor::full(dt, &[d], 1.0)?,
            ln2_b: Tensor::zeros(dt, &[d])?,
            w_1: random(dt, seed + 2, &[d, 4 * d], s)?,
            w_2: random(dt, seed + 3, &[4 * d, d], 0.5 * s)?,
        })
    }

    /// `x` is `[S, D]`: x + attn(ln1(x)), then h + mlp(ln2(h)).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape();
        let (s, d) = (shape[0] as i64, shape[1] as i64);
        let h = self.heads as i64;
        let dh = d / h;
        let a = x.layer_norm(&[d], Some(&self.ln1_w), Some(&self.ln1_b), 1e-5)?;
        let qkv = a.matmul(&self.w_qkv)?; // [S, 3D]
        let split = |i: i64| -> Result<Tensor> {
            // [S, D] -> [S, H, Dh] -> [H, S, Dh]
            qkv.slice(1, i * d, (i + 1) * d, 1)?
                .reshape(&[s, h, dh])?
                .permute(&[1, 0, 2])
        };
        let (q, k, v) = (split(0)?, split(1)?, split(2)?);
        let scores = q
            .matmul(&k.transpose(1, 2)?)?
            .mul_scalar(1.0 / (dh as f64).sqrt())?;
        let p = scores.softmax(-1)?;
        let o = p.matmul(&v)?.permute(&[1, 0, 2])?.reshape(&[s, d])?;
        let x = x.add(&o.matmul(&self.w_o)?)?;
        let m = x.layer_norm(&[d], Some(&self.ln2_w), Some(&self.ln2_b), 1e-5)?;
        let m = m.matmul(&self.w_1)?.gelu("tanh")?.matmul(&self.w_2)?;
        x.add(&m)
    }
}

/// `n` pointwise ops on `x` (and `y`): scales, shifts, tanh, sin, products.
pub fn pointwise_chain(x: &Tensor, y: &Tensor, n: usize) -> Result<Tensor> {
    let mut x = x.clone();
    for i in 0..n {
        x = match i % 5 {
            0 => x.mul_scalar(0.9)?,
            1 => x.add_scalar(0.1)?,
            2 => x.tanh()?,
            3 => x.sin()?,
            _ => x.mul(y)?,
        };
    }
    Ok(x)
}

/// A two-layer MLP (relu) trained on mean squared error.
pub struct Mlp {
    pub w1: Tensor,
    pub b1: Tensor,
    pub w2: Tensor,
    pub b2: Tensor,
}

impl Mlp {
    pub fn new(d_in: usize, hidden: usize, d_out: usize, seed: u64, dt: DType) -> Result<Mlp> {
        Ok(Mlp {
            w1: random(dt, seed, &[d_in, hidden], 1.0 / (d_in as f64).sqrt())?,
            b1: Tensor::zeros(dt, &[hidden])?,
            w2: random(dt, seed + 1, &[hidden, d_out], 1.0 / (hidden as f64).sqrt())?,
            b2: Tensor::zeros(dt, &[d_out])?,
        })
    }

    /// One step: forward, loss, hand-written backward, `p -= lr * grad` in place. Returns
    /// the loss (on the device).
    pub fn step(&self, x: &Tensor, target: &Tensor, lr: f64) -> Result<Tensor> {
        let z = x.matmul(&self.w1)?.add(&self.b1)?;
        let h = z.relu()?;
        let y = h.matmul(&self.w2)?.add(&self.b2)?;
        let diff = y.sub(target)?;
        let loss = diff.mul(&diff)?.mean()?;
        let dy = diff.mul_scalar(2.0 / diff.numel() as f64)?;
        let dw2 = h.t()?.matmul(&dy)?;
        let db2 = dy.sum_dim(&[0], false)?;
        let dh = dy.matmul(&self.w2.t()?)?;
        let dz = crate::methods::first_tensor(call(
            "threshold_backward",
            vec![
                ArgValue::Tensor(dh),
                ArgValue::Tensor(z),
                ArgValue::Float(0.0),
            ],
            vec![],
        )?)?;
        let dw1 = x.t()?.matmul(&dz)?;
        let db1 = dz.sum_dim(&[0], false)?;
        self.w1.add_scaled_(&dw1, -lr)?;
        self.b1.add_scaled_(&db1, -lr)?;
        self.w2.add_scaled_(&dw2, -lr)?;
        self.b2.add_scaled_(&db2, -lr)?;
        Ok(loss)
    }
}
