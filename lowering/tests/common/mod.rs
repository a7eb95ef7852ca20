//! Shared by the integration tests: hand-expanded kernels, random inputs, float64
//! references and tolerance checks.

#![allow(dead_code)]

pub mod kernels;

use rand::{Rng, SeedableRng};
use tessera_lowering::kernel::{Generic, Kernel, KernelInfo, ParamInfo, ParamRole};
use tessera_lowering::trace::{KernelTracer, Ref, RefMut, TraceError};
use tessera_lowering::{DType, HostTensor};

type Body = dyn Fn(&[Ref<f32>], &RefMut<f32>) + Send + Sync;

/// An f32 kernel with `inputs` inputs and one output whose body is a closure: for tests
/// that build kernels at run time (error cases, proptest). Leaked, like a static kernel.
pub struct FnKernel {
    info: &'static KernelInfo,
    body: Box<Body>,
}

impl FnKernel {
    #[track_caller]
    pub fn leak(
        name: &'static str,
        inputs: usize,
        body: impl Fn(&[Ref<f32>], &RefMut<f32>) + Send + Sync + 'static,
    ) -> &'static FnKernel {
        let loc = std::panic::Location::caller();
        let mut params: Vec<ParamInfo> = (0..inputs)
            .map(|i| ParamInfo {
                name: ["x", "y", "z", "w"][i],
                role: ParamRole::Input,
                dtype: Some(DType::F32),
            })
            .collect();
        params.push(ParamInfo {
            name: "o",
            role: ParamRole::Output,
            dtype: Some(DType::F32),
        });
        let info = Box::leak(Box::new(KernelInfo {
            name,
            file: loc.file(),
            line: loc.line(),
            column: loc.column(),
            generic: Generic::None,
            params: Box::leak(params.into_boxed_slice()),
        }));
        Box::leak(Box::new(FnKernel {
            info,
            body: Box::new(body),
        }))
    }
}

impl Kernel for FnKernel {
    fn info(&self) -> &'static KernelInfo {
        self.info
    }
    fn trace(&self, tracer: &mut KernelTracer, _: Option<DType>) -> Result<(), TraceError> {
        let n = self.info.params.len() - 1;
        let inputs = (0..n)
            .map(|i| tracer.input::<f32>(i))
            .collect::<Result<Vec<_>, _>>()?;
        let o = tracer.output::<f32>(0)?;
        (self.body)(&inputs, &o);
        Ok(())
    }
}

pub fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// Uniform in [-2, 2), rounded to `dtype`.
pub fn random(rng: &mut impl Rng, dtype: DType, shape: &[usize]) -> HostTensor {
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-2.0..2.0)).collect();
    HostTensor::from_f64(dtype, shape.to_vec(), &v)
}

/// `|got - want| <= tol * (1 + |want|)` everywhere, `tol` by dtype (f32 ~1e-5, bf16 ~1e-2).
pub fn assert_close(got: &HostTensor, want: &[f64], what: &str) {
    let tol = match got.dtype() {
        DType::F32 => 2e-5,
        DType::F64 => 1e-12,
        _ => 1e-2,
    };
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{what}: element {i}: got {a}, want {b} (tol {tol} x {scale})"
        );
    }
}

pub fn ref_matmul(x: &[f64], y: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| x[i * k + p] * y[p * n + j]).sum();
        }
    }
    out
}

pub fn ref_softmax(x: &[f64], n: usize) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / s)
        })
        .collect()
}

pub fn ref_layer_norm(x: &[f64], g: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            let inv = 1.0 / (var + 1e-5).sqrt();
            row.iter()
                .enumerate()
                .map(move |(j, v)| (v - mean) * inv * g[j] + b[j])
                .collect::<Vec<_>>()
        })
        .collect()
}
