//! Shared by the `mosaic_*` tests: traced programs of every test kernel (the hand-expanded
//! kernels of `common::kernels` plus a few here that use the rest of the vocabulary), and
//! the jax-backed tools of `tools/` run through `$TESSERA_JAX_PYTHON`.

#![allow(dead_code)]

use crate::common::kernels::{add, chunk_mean, layer_norm, matmul, silu, softmax};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use tessera_lowering::kernel::{Generic, Kernel, KernelInfo, ParamInfo, ParamRole};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{__fori, __if_else, KernelProgram, KernelTracer, TraceError};

pub const fn p(name: &'static str, role: ParamRole, dtype: DType) -> ParamInfo {
    ParamInfo {
        name,
        role,
        dtype: Some(dtype),
    }
}
pub use ParamRole::{Input as In, Output as Out, Scratch as Scr};

/// A hand-written `#[tpu_kernel]` expansion of a non-generic kernel.
#[macro_export]
macro_rules! kernel {
    ($name:ident, [$($param:expr),*], |$t:ident| $body:block) => {
        #[allow(non_camel_case_types)]
        pub struct $name;
        impl Kernel for $name {
            fn info(&self) -> &'static KernelInfo {
                static INFO: KernelInfo = KernelInfo {
                    name: stringify!($name), file: file!(), line: line!(), column: 1,
                    generic: Generic::None, params: &[$($param),*],
                };
                &INFO
            }
            fn trace(&self, $t: &mut KernelTracer, _: Option<DType>) -> Result<(), TraceError> {
                $body
                Ok(())
            }
        }
    };
}

// Integer and bool ops, iota, compares, select, casts, rem, bitwise, SMEM scratch scalars.
kernel!(
    int_ops,
    [
        p("x", In, DType::I32),
        p("o", Out, DType::I32),
        p("s", Scr, DType::I32)
    ],
    |t| {
        let (x, o, s) = (
            t.input::<i32>(0)?,
            t.output::<i32>(0)?,
            t.scratch::<i32>(0)?,
        );
        let v = x.load();
        let col = iota::<i32>([8, 128], 1);
        s.store_scalar((0,), program_id(0) * 3);
        let k = s.load_scalar((0,));
        let mask = (col.gt(64) & v.ne(0)) | !col.lt(3);
        let r = where_(mask, v % 7 + k, -v).maximum(col.abs());
        o.store(r + r.cast::<f32>().cast::<i32>() / 2);
    }
);

// Transposes, `dot_t`, full and all-axes reductions, scalar reshapes, element access to
// VMEM, math functions, and an `if` with results.
kernel!(
    float_ops,
    [
        p("x", In, DType::F32),
        p("y", In, DType::F32),
        p("o", Out, DType::F32)
    ],
    |t| {
        let (x, y, o) = (t.input::<f32>(0)?, t.input::<f32>(1)?, t.output::<f32>(0)?);
        let (a, b) = (x.load(), y.load());
        let s = dot_t(a, b) + dot(a.t(), b.t().t());
        let total = s.sum([0, 1], false).to_scalar();
        let corner = x.load_scalar((0, 0));
        let ((), z) = __if_else(
            total.gt(corner),
            (),
            |c| (c, sigmoid(s) * tanh(s)),
            |c| (c, sqrt(abs(s)) + exp(s).min(1, true)),
        );
        o.store(
            z + floor(log(abs(s) + 1.0)) - ceil(sin(s) * cos(s))
                + erf(rsqrt(abs(s) + 1.0))
                + abs(s).pow(0.5),
        );
        o.store_scalar((0, 0), corner.pow(2.0) + exp(corner));
    }
);

// A bf16 kernel: casts through f32, a 3-D block reshaped to 2-D, fori over slices.
kernel!(
    bf16_ops,
    [p("x", In, DType::BF16), p("o", Out, DType::BF16)],
    |t| {
        let (x, o) = (t.input::<bf16>(0)?, t.output::<bf16>(0)?);
        let v = x.load().cast::<f32>().reshape([32, 128]);
        let acc = __fori(0, 2, v, |j, acc| {
            acc + x
                .load_slice((j, 0, 0), [1, 16, 128])
                .cast::<f32>()
                .broadcast_in_dim([2, 16, 128], [0, 1, 2])
                .reshape([32, 128])
        });
        o.store(acc.reshape([2, 16, 128]).cast::<bf16>());
    }
);

pub fn add_program(dtype: DType, m: usize, n: usize, bm: usize, bn: usize) -> KernelProgram {
    add::launch()
        .grid([m / bm, n / bn])
        .input(BlockSpec::new([bm, bn], |i, j| [i, j]))
        .input(BlockSpec::new([bm, bn], |i, j| [i, j]))
        .output(BlockSpec::new([bm, bn], |i, j| [i, j]), [m, n])
        .trace_program(&[(dtype, vec![m, n]), (dtype, vec![m, n])])
        .expect("add traces")
}

pub fn matmul_program(dtype: DType, m: usize, n: usize, k: usize, b: usize) -> KernelProgram {
    matmul::launch()
        .grid([m / b, n / b, k / b])
        .input(BlockSpec::new([b, b], |i, _j, k| [i, k]))
        .input(BlockSpec::new([b, b], |_i, j, k| [k, j]))
        .output(BlockSpec::new([b, b], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([b, b]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(dtype, vec![m, k]), (dtype, vec![k, n])])
        .expect("matmul traces")
}

pub fn softmax_program(dtype: DType, m: usize, n: usize, bm: usize) -> KernelProgram {
    softmax::launch()
        .grid([m / bm])
        .input(BlockSpec::new([bm, n], |i| (i, 0)))
        .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
        .trace_program(&[(dtype, vec![m, n])])
        .expect("softmax traces")
}

fn row_program(
    launch: Launch,
    dtype: DType,
    m: usize,
    n: usize,
    bm: usize,
    extra: usize,
) -> KernelProgram {
    let mut l = launch
        .grid([m / bm])
        .input(BlockSpec::new([bm, n], |i| (i, 0)));
    let mut arrays = vec![(dtype, vec![m, n])];
    for _ in 0..extra {
        l = l.input(BlockSpec::new([1, n], |_i| [0, 0]));
        arrays.push((dtype, vec![1, n]));
    }
    l.output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
        .trace_program(&arrays)
        .expect("row kernel traces")
}

/// Every test kernel at two shapes, named `kernel/dtype/shape`.
pub fn all_programs() -> Vec<(String, KernelProgram)> {
    let mut out = Vec::new();
    let mut push = |name: String, p: KernelProgram| out.push((name, p));
    for dtype in [DType::F32, DType::BF16] {
        push(
            format!("add/{dtype}/256x512"),
            add_program(dtype, 256, 512, 128, 256),
        );
        push(
            format!("add/{dtype}/64x128"),
            add_program(dtype, 64, 128, 32, 128),
        );
        push(
            format!("matmul/{dtype}/256x256x384"),
            matmul_program(dtype, 256, 256, 384, 128),
        );
        push(
            format!("matmul/{dtype}/512x256x256"),
            matmul_program(dtype, 512, 256, 256, 256),
        );
        push(
            format!("softmax/{dtype}/64x256"),
            softmax_program(dtype, 64, 256, 16),
        );
        push(
            format!("softmax/{dtype}/128x1024"),
            softmax_program(dtype, 128, 1024, 32),
        );
        push(
            format!("silu/{dtype}/64x256"),
            row_program(silu::launch(), dtype, 64, 256, 16, 0),
        );
        push(
            format!("layer_norm/{dtype}/64x256"),
            row_program(layer_norm::launch(), dtype, 64, 256, 16, 2),
        );
        push(
            format!("layer_norm/{dtype}/32x512"),
            row_program(layer_norm::launch(), dtype, 32, 512, 32, 2),
        );
    }
    push(
        "silu/f32/16x128".into(),
        row_program(silu::launch(), DType::F32, 16, 128, 8, 0),
    );
    for n in [512, 1024] {
        let p = chunk_mean::launch()
            .grid([2])
            .input(BlockSpec::new([8, n], |i| (i, 0)))
            .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
            .trace_program(&[(DType::F32, vec![16, n])])
            .expect("chunk_mean traces");
        push(format!("chunk_mean/f32/16x{n}"), p);
    }
    for m in [16, 32] {
        let p = Launch::new(&int_ops)
            .grid([m / 8])
            .input(BlockSpec::new([8, 128], |i| (i, 0)))
            .output(BlockSpec::new([8, 128], |i| (i, 0)), [m, 128])
            .scratch(Smem::<i32>::new([4]))
            .trace_program(&[(DType::I32, vec![m, 128])])
            .expect("int_ops traces");
        push(format!("int_ops/i32/{m}x128"), p);
        let p = Launch::new(&float_ops)
            .grid([m / 8])
            .input(BlockSpec::new([128, 128], |_i| (0, 0)))
            .input(BlockSpec::new([128, 128], |_i| (0, 0)))
            .output(BlockSpec::new([128, 128], |_i| (0, 0)), [128, 128])
            .semantics([Arbitrary])
            .trace_program(&[(DType::F32, vec![128, 128]), (DType::F32, vec![128, 128])])
            .expect("float_ops traces");
        push(format!("float_ops/f32/grid{}", m / 8), p);
        let p = Launch::new(&bf16_ops)
            .grid([m / 16])
            .input(BlockSpec::new([2, 16, 128], |i| (0, i, 0)))
            .output(BlockSpec::new([2, 16, 128], |i| (0, i, 0)), [2, m, 128])
            .trace_program(&[(DType::BF16, vec![2, m, 128])])
            .expect("bf16_ops traces");
        push(format!("bf16_ops/bf16/2x{m}x128"), p);
    }
    out
}

/// The Python with jax (`$TESSERA_JAX_PYTHON`); `None` prints why the caller skips.
pub fn jax_python(test: &str) -> Option<PathBuf> {
    match std::env::var_os("TESSERA_JAX_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ if std::env::var_os("CI").is_some() => {
            panic!("{test}: CI runs the jaxlib checks: set TESSERA_JAX_PYTHON (make test does)")
        }
        _ => {
            eprintln!("{test}: skipped: set TESSERA_JAX_PYTHON to a Python with jax (`make test` sets it)");
            None
        }
    }
}

/// `tools/NAME` in the repository.
pub fn tool(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("tools")
        .join(name)
}

/// Runs `python tools/script args` with `stdin`; returns (success, stdout + stderr).
pub fn run_tool(python: &PathBuf, script: &str, args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(python)
        .arg(tool(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {python:?}: {e}"));
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("tool runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `add` launched with no grid (one step, whole arrays as blocks).
pub fn single_step_add() -> KernelProgram {
    add::launch()
        .input(BlockSpec::new([8, 128], || [0, 0]))
        .input(BlockSpec::new([8, 128], || [0, 0]))
        .output(BlockSpec::new([8, 128], || [0, 0]), [8, 128])
        .trace_program(&[(DType::F32, vec![8, 128]), (DType::F32, vec![8, 128])])
        .expect("single-step add traces")
}
