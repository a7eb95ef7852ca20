//! A kernel library of a user's own: two `#[tpu_kernel]` kernels with their launch rules,
//! exported for `tessera.torch.load_library`, which registers them as `torch.ops.tessera.*`.

use tessera_export::{export_kernels, ExportedKernel};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// `o = x * scale + y`, elementwise, with `scale` fixed at 2 (a fused multiply-add).
#[tpu_kernel]
pub fn axpy<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>) {
    o.store(x.load() * 2.0 + y.load());
}

/// Row-wise root-mean-square norm: `o = x / sqrt(mean(x^2) + 1e-6)`, in f32.
#[tpu_kernel]
pub fn rms_norm<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let v = x.load().cast::<f32>();
    let inv_n = 1.0 / x.shape()[1] as f64;
    let ms = (v * v).sum(1, true) * inv_n;
    o.store((v * rsqrt(ms + 1e-6)).cast::<T>());
}

/// Blocks of up to 8 rows (the TPU's sublane tile) of whole rows.
fn rows_block(rows: usize) -> usize {
    if rows % 8 == 0 {
        8
    } else {
        rows
    }
}

fn two_dims(shape: &[usize]) -> Result<[usize; 2], String> {
    match shape {
        [r, c] if *r > 0 && *c > 0 => Ok([*r, *c]),
        _ => Err(format!("takes a non-empty [rows, cols] problem, got {shape:?}")),
    }
}

static KERNELS: &[ExportedKernel] = &[
    ExportedKernel {
        name: "axpy",
        problem_dims: &["rows", "cols"],
        input_shapes: |s| vec![s.to_vec(), s.to_vec()],
        launch: |s| {
            let [rows, cols] = two_dims(s)?;
            let br = rows_block(rows);
            let spec = || BlockSpec::new([br, cols], |i| (i, 0));
            Ok(axpy::launch()
                .grid([rows / br])
                .input(spec())
                .input(spec())
                .output(spec(), [rows, cols]))
        },
    },
    ExportedKernel {
        name: "rms_norm",
        problem_dims: &["rows", "cols"],
        input_shapes: |s| vec![s.to_vec()],
        launch: |s| -> Result<Launch, String> {
            let [rows, cols] = two_dims(s)?;
            let br = rows_block(rows);
            let spec = || BlockSpec::new([br, cols], |i| (i, 0));
            Ok(rms_norm::launch()
                .grid([rows / br])
                .input(spec())
                .output(spec(), [rows, cols]))
        },
    },
];

export_kernels!(KERNELS);
