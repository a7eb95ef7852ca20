//! What the kernel tests that spawn Python share.
// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::process::{Command, Output};
use std::time::Duration;

/// Runs `cmd` and collects its output. These test binaries also load libtpu (other tests
/// compile with it on other threads), and a process spawned while libtpu compiles sometimes
/// fails to start with EFAULT ("Bad address"; seen in 2 of about 10 runs on 2 cores): the
/// spawn is retried, never the check it runs.
pub fn output(cmd: &mut Command) -> Output {
    let mut attempt = 0;
    loop {
        match cmd.output() {
            Ok(o) => return o,
            Err(e) if e.raw_os_error() == Some(libc_efault()) && attempt < 5 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("runs python: {e}"),
        }
    }
}

/// EFAULT on Linux.
const fn libc_efault() -> i32 {
    14
}

/// The Python with jax that the jaxlib checks run (`TESSERA_JAX_PYTHON`); None skips them
/// outside CI, and CI must have it.
pub fn jax_python() -> Option<std::ffi::OsString> {
    let py = std::env::var_os("TESSERA_JAX_PYTHON").filter(|p| !p.is_empty());
    if py.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the jaxlib checks: set TESSERA_JAX_PYTHON"
        );
        eprintln!("skipped: set TESSERA_JAX_PYTHON to a Python with jax");
    }
    py
}

/// Verifies serialized Mosaic text with jaxlib's tpu dialect (tools/check_mosaic.py).
pub fn verify_mosaic(py: &std::ffi::OsStr, tag: &str, file_name: &str, serialized: &str) {
    let dir = temp_dir(tag);
    let file = dir.path().join(file_name);
    std::fs::write(&file, serialized).unwrap();
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/check_mosaic.py");
    let out = output(Command::new(py).arg(tool).arg(&file));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains(": OK"), "{text}");
}

/// A new empty directory `$TMPDIR/tessera-<tag>-<random>`, removed (with what is in it) when
/// the returned [`tempfile::TempDir`] is dropped, also when the test panics.
pub fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tessera-{tag}-"))
        .tempdir()
        .expect("creates a temporary directory")
}

/// The TPU generations the new kernels are compiled for by libtpu (no TPU needed).
pub const TOPOLOGIES: [&str; 3] = ["v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"];

/// Compiles `program` with libtpu for every one of [`TOPOLOGIES`]; each must give code.
pub fn compiles_for_every_topology(program: &tessera_lowering::trace::KernelProgram) {
    for topology in TOPOLOGIES {
        let target =
            tessera_runtime::TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let out = target
            .compile_program(program)
            .unwrap_or_else(|e| panic!("{topology}: {e}"));
        assert!(out.code_bytes > 0, "{topology}");
    }
}

/// Runs `tools/<tool>` with `args` through `$TESSERA_JAX_PYTHON` and returns its stdout;
/// `None` where that is unset (outside CI).
pub fn jax_tool(tool: &str, args: &[String]) -> Option<String> {
    let py = jax_python()?;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tools")
        .join(tool);
    let out = output(Command::new(py).arg(path).args(args));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{tool}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(text)
}

/// Writes `program`'s serialized Mosaic (for v5e) into a fresh temporary directory; returns
/// the directory (removed when dropped: keep it while the file is used) and the file's path.
pub fn write_mosaic(
    tag: &str,
    program: &tessera_lowering::trace::KernelProgram,
) -> (tempfile::TempDir, String) {
    use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
    let dir = temp_dir(tag);
    let file = dir.path().join(format!("{tag}.mlir"));
    let m = lower_to_mosaic(program, TpuGeneration::V5e).expect("lowers to Mosaic");
    std::fs::write(&file, &m.serialized).unwrap();
    let path = file.to_string_lossy().to_string();
    (dir, path)
}

/// Checks that `program`'s Mosaic (for v5e) has the structure Pallas emits for the same
/// kernel: `tools/pallas_structure.py` of both, ours from the module and Pallas' from
/// `pallas_args` (entry `key` of its JSON), must be equal (grid, semantics, scalar-prefetch
/// and scratch counts, argument types, windows, index maps). Returns Pallas' structure for
/// further checks; `None` where [`jax_python`] is unset (outside CI).
pub fn assert_pallas_structure(
    tag: &str,
    program: &tessera_lowering::trace::KernelProgram,
    pallas_args: &[&str],
    key: &str,
) -> Option<serde_json::Value> {
    let (_dir, file) = write_mosaic(tag, program);
    let pallas = jax_tool("pallas_structure.py", &["--module".into(), file.clone()]).map(|ours| {
        let args: Vec<String> = pallas_args.iter().map(|a| a.to_string()).collect();
        let pallas = jax_tool("pallas_structure.py", &args);
        let pallas = pallas.expect("jax is there: the first call ran");
        let ours: serde_json::Value = serde_json::from_str(&ours).expect("JSON");
        let mut pallas: serde_json::Value = serde_json::from_str(&pallas).expect("JSON");
        assert!(
            !pallas[key].is_null(),
            "{tag}: pallas_structure.py gave no `{key}`: {pallas}"
        );
        assert_eq!(
            ours[&file], pallas[key],
            "{tag}: Tessera (left) vs Pallas (right)"
        );
        pallas[key].take()
    });
    pallas
}

/// Writes `program`'s Mosaic (for v5e) and verifies it with jaxlib's tpu dialect
/// (tools/check_mosaic.py); skipped where [`jax_python`] is unset (outside CI).
pub fn check_mosaic_of(tag: &str, program: &tessera_lowering::trace::KernelProgram) {
    let (_dir, file) = write_mosaic(tag, program);
    if let Some(text) = jax_tool("check_mosaic.py", std::slice::from_ref(&file)) {
        assert!(text.contains(": OK"), "{text}");
    }
}

/// A row-block case over an f32 `[v, lanes]` array of seeded values in [-4, 4): `n` row
/// offsets (any row, not only multiples of 8; repeats allowed) of `rows`-row blocks, and what a
/// kernel copying each block out plus 1 gives (exact in f32), as f64. Returns (offsets as an
/// i32 tensor, the array, the expected output).
pub fn row_blocks_plus_one(
    seed: u64,
    n: usize,
    v: usize,
    rows: usize,
    lanes: usize,
) -> (
    tessera_lowering::HostTensor,
    tessera_lowering::HostTensor,
    Vec<f64>,
) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let xs: Vec<f32> = (0..v * lanes).map(|_| rng.gen_range(-4.0..4.0)).collect();
    let starts: Vec<i32> = (0..n)
        .map(|_| rng.gen_range(0..=(v - rows) as i32))
        .collect();
    let want: Vec<f64> = starts
        .iter()
        .flat_map(|&s| {
            let s = s as usize * lanes;
            xs[s..s + rows * lanes].iter().map(|&e| f64::from(e + 1.0))
        })
        .collect();
    (
        tessera_lowering::HostTensor::from_vec(vec![n], starts),
        tessera_lowering::HostTensor::from_vec(vec![v, lanes], xs),
        want,
    )
}

/// The largest |got - want| over the elements (the kernel tests' check against float64).
pub fn max_abs_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(
        got.len(),
        want.len(),
        "result and reference differ in length"
    );
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max)
}

/// A shipped kernel's program at its default problem shape with f32 inputs.
pub fn default_program(
    k: &tessera_kernels::ShippedKernel,
) -> tessera_lowering::trace::KernelProgram {
    let sig: Vec<(tessera_lowering::DType, Vec<usize>)> = (k.input_shapes)(k.default_shape)
        .into_iter()
        .map(|s| (tessera_lowering::DType::F32, s))
        .collect();
    (k.launch)(k.default_shape)
        .expect("the default shape is valid")
        .trace_program(&sig)
        .expect("traces")
}

/// The XLA CPU plugin.
pub fn cpu() -> tessera_runtime::Device {
    tessera_runtime::Device::cpu()
        .expect("the XLA CPU plugin is installed (see runtime's plugin tests)")
}

/// `launch`'s outputs on `inputs` on each device: the interpreter, and the CPU plugin in the
/// default form and as the grid loop (a failure panics naming the device).
pub fn run_everywhere(
    launch: &tessera_lowering::trace::Launch,
    inputs: &[&tessera_lowering::HostTensor],
) -> Vec<(&'static str, Vec<tessera_lowering::HostTensor>)> {
    use tessera_lowering::stablehlo::Form;
    use tessera_runtime::{Device, LaunchExt};
    [
        ("interp", launch.run(&Device::interp(), inputs)),
        ("cpu auto", launch.run_as(&cpu(), inputs, Form::Auto)),
        (
            "cpu grid loop",
            launch.run_as(&cpu(), inputs, Form::GridLoop),
        ),
    ]
    .into_iter()
    .map(|(device, out)| (device, out.unwrap_or_else(|e| panic!("{device}: {e}"))))
    .collect()
}

/// [`run_everywhere`], each device's first output checked against `want` exactly.
pub fn run_everywhere_exact(
    launch: &tessera_lowering::trace::Launch,
    inputs: &[&tessera_lowering::HostTensor],
    want: &[f64],
) {
    for (device, out) in run_everywhere(launch, inputs) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

/// The trace error of running `launch` on `inputs` on the interpreter (a misuse the tests
/// expect at its line); panics if it runs or fails otherwise.
pub fn interp_trace_error(
    launch: &tessera_lowering::trace::Launch,
    inputs: &[&tessera_lowering::HostTensor],
) -> tessera_lowering::trace::TraceError {
    use tessera_runtime::{Device, LaunchExt, RuntimeError};
    match launch.run(&Device::interp(), inputs) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {:?}", other.map(|_| ())),
    }
}
