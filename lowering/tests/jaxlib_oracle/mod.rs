//! Optional local oracle for tests: verify (and run) StableHLO text with jaxlib's MLIR parser
//! and XLA CPU client, when a Python with jax is installed. Lowering must not depend on the
//! runtime crate, so this is how its own tests check parse-ability and numerics; both
//! functions return `None` when no such Python is found, and tests then skip that check.
//!
//! The Python is `$TESSERA_JAX_PYTHON` (`make test` sets it to the project venv, which has
//! jax). Under CI (`CI` set) a missing one fails the test instead of skipping it.

#![allow(dead_code)] // each test file uses a part

use std::path::PathBuf;
use std::process::Command;
use tempfile::TempDir;
use tessera_lowering::{DType, HostTensor};

const SCRIPT: &str = r#"
import sys, os, numpy as np
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
d = sys.argv[1]
text = open(os.path.join(d, "module.mlir")).read()
ctx = mlir.make_ir_context()
try:
    m = ir.Module.parse(text, context=ctx)
except Exception as e:
    print(str(e)); sys.exit(3)
if len(sys.argv) > 2 and sys.argv[2] == "run":
    import jax, ml_dtypes
    jax.config.update("jax_enable_x64", True)  # else f64/c128 inputs are put as f32/c64
    from jax._src.lib import xla_client as xc
    names = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
             "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
             "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
             "c64": np.complex64, "c128": np.complex128}
    args = []
    for i, spec in enumerate(sys.argv[3:]):
        dt, shape = spec.split(":")
        shape = tuple(int(s) for s in shape.split("x") if s)
        raw = open(os.path.join(d, f"in{i}.bin"), "rb").read()
        args.append(np.frombuffer(raw, dtype=names[dt]).reshape(shape))
    dev = jax.devices("cpu")[:1]
    exe = dev[0].client.compile_and_load(text.encode(), xc.DeviceList(tuple(dev)), xc.CompileOptions())
    outs = exe.execute([jax.device_put(a, dev[0]) for a in args])
    for i, o in enumerate(outs):
        open(os.path.join(d, f"out{i}.bin"), "wb").write(np.ascontiguousarray(np.asarray(o)).tobytes())
"#;

fn python() -> Option<PathBuf> {
    match std::env::var_os("TESSERA_JAX_PYTHON").filter(|p| !p.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI runs the jaxlib checks: set TESSERA_JAX_PYTHON (make test does)")
        }
        None => None,
    }
}

/// A new empty directory, removed (with what is in it) when the returned [`TempDir`] is
/// dropped.
fn workdir() -> std::io::Result<TempDir> {
    tempfile::Builder::new().prefix("tessera-shlo-").tempdir()
}

/// Runs the script on `text` (and `inputs`) in a new [`workdir`]; returns that directory,
/// with the outputs in it, or the script's diagnostics.
fn invoke(text: &str, inputs: Option<&[HostTensor]>) -> Option<Result<TempDir, String>> {
    let py = python()?;
    let run = || -> Result<TempDir, String> {
        let dir = workdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        std::fs::write(d.join("module.mlir"), text).map_err(|e| e.to_string())?;
        std::fs::write(d.join("check.py"), SCRIPT).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&py);
        cmd.arg(d.join("check.py")).arg(d);
        if inputs.is_some() {
            cmd.arg("run");
        }
        for (i, t) in inputs.unwrap_or(&[]).iter().enumerate() {
            std::fs::write(d.join(format!("in{i}.bin")), t.bytes()).map_err(|e| e.to_string())?;
            let dims: Vec<String> = t.shape().iter().map(|s| s.to_string()).collect();
            cmd.arg(format!("{}:{}", t.dtype().name(), dims.join("x")));
        }
        let out = cmd.output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(dir)
    };
    Some(run())
}

/// Parses and verifies `text`; `Some(Err(diagnostics))` on a verifier error.
pub fn verify_with_jaxlib(text: &str) -> Option<Result<(), String>> {
    invoke(text, None).map(|r| r.map(drop))
}

/// Compiles and runs `text` on XLA's CPU client with `inputs`; returns the outputs, whose
/// types the caller states (`outputs`: dtype and shape of each result).
pub fn run_with_jaxlib(
    text: &str,
    inputs: &[HostTensor],
    outputs: &[(DType, Vec<usize>)],
) -> Option<Result<Vec<HostTensor>, String>> {
    let dir = match invoke(text, Some(inputs))? {
        Ok(dir) => dir,
        Err(e) => return Some(Err(e)),
    };
    let read = outputs
        .iter()
        .enumerate()
        .map(|(i, (dt, shape))| {
            let bytes =
                std::fs::read(dir.path().join(format!("out{i}.bin"))).map_err(|e| e.to_string())?;
            HostTensor::from_bytes(*dt, shape.clone(), bytes).map_err(|e| e.to_string())
        })
        .collect();
    Some(read)
}
