//! The shipped kernels on every device: the reference interpreter and StableHLO on the XLA CPU
//! plugin (both forms) against their float64 references and each other, at several shapes and
//! in f32 and bf16; the registry; that a kernel leaving a block unwritten fails its check; and
//! launch mistakes reported at this file's lines.

use tessera_kernels::{
    add, check, check_as, compare, find, layer_norm, matmul, random_inputs, shipped, tolerance,
};
use tessera_kernels::{CheckError, ShippedKernel, BF16_TOLERANCE, F32_TOLERANCE};
use tessera_lowering::kernel::find_kernel;
use tessera_lowering::kernel::ParamRole;
use tessera_lowering::mosaic::{check_program, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{batched_form_applies, Form};
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

const DTYPES: [DType; 2] = [DType::F32, DType::BF16];

fn cpu() -> Device {
    Device::cpu().expect("the XLA CPU plugin is installed (see runtime's plugin tests)")
}

fn shipped_kernel(name: &str) -> &'static ShippedKernel {
    find(name).expect("shipped")
}

/// The default launch of `k` on `shape`, traced for `dtype` inputs.
fn program(k: &ShippedKernel, dtype: DType, shape: &[usize]) -> KernelProgram {
    let inputs: Vec<(DType, Vec<usize>)> = (k.input_shapes)(shape)
        .into_iter()
        .map(|s| (dtype, s))
        .collect();
    let launch = (k.launch)(shape).unwrap_or_else(|e| panic!("{e}"));
    launch
        .trace_program(&inputs)
        .unwrap_or_else(|e| panic!("{} {dtype} {shape:?}: {e}", k.name))
}

/// The grid, and the block shapes of inputs then outputs, of `k`'s default launch.
fn grid_and_blocks(k: &ShippedKernel, shape: &[usize]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let p = program(k, DType::F32, shape);
    let blocks = p.inputs.iter().chain(&p.outputs);
    (
        p.grid.clone(),
        blocks.map(|o| o.block_shape.clone()).collect(),
    )
}

/// The conformance suite of one kernel: for each shape and dtype, the interpreter, the CPU
/// plugin's grid-loop form and its default form (plus the batched form where legal) each
/// match the float64 reference, and the devices and forms match each other.
fn conformance(name: &str, shapes: &[&[usize]], batched: bool) {
    let (k, cpu, interp) = (shipped_kernel(name), cpu(), Device::interp());
    for (seed, shape) in shapes.iter().enumerate() {
        let (grid, _) = grid_and_blocks(k, shape);
        for dtype in DTYPES {
            let what = format!("{name} {dtype} {shape:?} (grid {grid:?})");
            let tol = tolerance(dtype);
            let mut runs = vec![
                (
                    "interp",
                    check_as(k, &interp, dtype, shape, seed as u64, Form::Auto),
                ),
                (
                    "cpu grid loop",
                    check_as(k, &cpu, dtype, shape, seed as u64, Form::GridLoop),
                ),
                ("cpu auto", check(k, &cpu, dtype, shape, seed as u64)),
            ];
            if batched {
                runs.push((
                    "cpu batched",
                    check_as(k, &cpu, dtype, shape, seed as u64, Form::Batched),
                ));
            }
            let reports: Vec<_> = runs
                .into_iter()
                .map(|(device, r)| {
                    let r = r.unwrap_or_else(|e| panic!("{what} on {device}: {e}"));
                    assert!(
                        r.passed,
                        "{what} on {device} vs float64: {:?} over {}",
                        r.worst, r.tolerance
                    );
                    assert!(r.tolerance >= tol, "{what}");
                    (device, r)
                })
                .collect();
            let (first, rest) = reports.split_first().expect("runs");
            for (device, r) in rest {
                let want: Vec<Vec<f64>> =
                    first.1.outputs.iter().map(HostTensor::to_f64_vec).collect();
                let worst = compare(&r.outputs, &want)
                    .expect("same outputs")
                    .expect("not empty");
                assert!(
                    worst.rel_err <= r.tolerance,
                    "{what}: {device} vs interp: {worst:?}"
                );
            }
        }
    }
    assert_eq!(
        batched_form_applies(&program(k, DType::F32, shapes[0])).is_ok(),
        batched,
        "{name}: is the batched form legal?"
    );
}

// Shapes: several grid steps on every axis, non-square, a single step, and dims that are not
// powers of two (whole-dim blocks).

#[test]
fn add_matches_its_reference_on_every_device() {
    conformance(
        "add",
        &[&[256, 384], &[24, 640], &[8, 128], &[40, 200]],
        true,
    );
}

#[test]
fn silu_matches_its_reference_on_every_device() {
    conformance(
        "silu",
        &[&[256, 384], &[24, 640], &[8, 128], &[40, 200]],
        true,
    );
}

#[test]
fn matmul_matches_its_reference_on_every_device() {
    // Grids (3, 2, 3), (2, 1, 1), (1, 1, 5), (2, 3, 8); k = 1024 exercises the longer-sum
    // tolerance. Sizes stay small: the interpreter runs bf16 dots element by element.
    conformance(
        "matmul",
        &[
            &[24, 256, 384],
            &[256, 128, 128],
            &[64, 128, 640],
            &[16, 384, 1024],
        ],
        // Batched over the parallel axes, looping over the arbitrary k axis.
        true,
    );
}

#[test]
fn softmax_matches_its_reference_on_every_device() {
    conformance(
        "softmax",
        &[&[256, 256], &[24, 1000], &[8, 128], &[384, 64]],
        true,
    );
}

#[test]
fn layer_norm_matches_its_reference_on_every_device() {
    conformance(
        "layer_norm",
        &[&[256, 256], &[24, 1000], &[8, 128], &[384, 64]],
        true,
    );
}

#[test]
fn the_registry_names_registered_kernels_and_launches_them() {
    let names: Vec<&str> = shipped().iter().map(|k| k.name).collect();
    assert_eq!(names, ["add", "silu", "matmul", "softmax", "layer_norm"]);
    for k in shipped() {
        let launch = (k.launch)(k.default_shape).expect("the default shape is valid");
        assert_eq!(launch.kernel().info().name, k.name);
        assert!(
            find_kernel(k.name).is_some(),
            "{} is in the kernel inventory",
            k.name
        );
        assert_eq!(k.problem_dims.len(), k.default_shape.len(), "{}", k.name);
        let info = launch.kernel().info();
        let inputs = (k.input_shapes)(k.default_shape);
        assert_eq!(
            info.params_of(ParamRole::Input).count(),
            inputs.len(),
            "{}",
            k.name
        );
        let want = (k.reference)(
            &inputs
                .iter()
                .map(|s| vec![0.5; s.iter().product()])
                .collect::<Vec<_>>(),
            k.default_shape,
        );
        assert_eq!(
            info.params_of(ParamRole::Output).count(),
            want.len(),
            "{}",
            k.name
        );
        assert!(std::ptr::eq(find(k.name).expect("found"), k));
    }
    assert!(find("gelu").is_none());
    assert_eq!(
        (tolerance(DType::F32), tolerance(DType::BF16)),
        (F32_TOLERANCE, BF16_TOLERANCE)
    );
}

#[test]
fn default_launches_pick_tpu_legal_blocks_that_divide() {
    assert_eq!(
        grid_and_blocks(shipped_kernel("matmul"), &[256, 384, 512]),
        (vec![2, 3, 4], vec![vec![128, 128]; 3])
    );
    // The largest power of two up to 128 that divides (at least 8 on sublanes, 128 on lanes),
    // else the whole dim.
    assert_eq!(
        grid_and_blocks(shipped_kernel("add"), &[24, 200]),
        (vec![3, 1], vec![vec![8, 200]; 3])
    );
    assert_eq!(
        grid_and_blocks(shipped_kernel("silu"), &[7, 384]),
        (vec![1, 3], vec![vec![7, 128]; 2])
    );
    let (grid, blocks) = grid_and_blocks(shipped_kernel("layer_norm"), &[192, 1000]);
    assert_eq!(
        (grid, blocks),
        (
            vec![3],
            vec![vec![64, 1000], vec![1000], vec![1000], vec![64, 1000]]
        )
    );
    for k in shipped() {
        for dtype in DTYPES {
            for generation in TpuGeneration::ALL {
                check_program(&program(k, dtype, k.default_shape), generation)
                    .unwrap_or_else(|e| panic!("{} {dtype} on {generation:?}: {e}", k.name));
            }
        }
    }
}

#[test]
fn a_bad_problem_shape_is_an_error_naming_the_dims() {
    let k = shipped_kernel("matmul");
    let error = (k.launch)(&[256, 256])
        .err()
        .expect("rank 2 is not a matmul problem");
    assert!(error.contains("3 dims [m, n, k], got 2"), "{error}");
    let error = (shipped_kernel("softmax").launch)(&[0, 128])
        .err()
        .expect("an empty dim");
    assert!(error.contains("empty dim"), "{error}");
    match check(k, &Device::interp(), DType::F32, &[1, 2, 3, 4], 0) {
        Err(CheckError::Shape(message)) => {
            assert!(message.contains("kernel `matmul`"), "{message}")
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[test]
fn inputs_are_seeded_and_rounded_to_the_dtype() {
    let k = shipped_kernel("layer_norm");
    let a = random_inputs(k, DType::BF16, &[16, 256], 3);
    assert_eq!(a, random_inputs(k, DType::BF16, &[16, 256], 3));
    assert_ne!(a, random_inputs(k, DType::BF16, &[16, 256], 4));
    let shapes: Vec<&[usize]> = a.iter().map(HostTensor::shape).collect();
    assert_eq!(shapes, [&[16, 256][..], &[256], &[256]]);
    // Weight and bias are not copies of x's first row: each input has its own stream.
    assert_ne!(a[1].to_f64_vec(), a[0].to_f64_vec()[..256]);
    // Uniform in [-1, 1) before rounding; bf16 rounds values near 1 up to 1.
    for v in a.iter().flat_map(HostTensor::to_f64_vec) {
        assert!(
            (-1.0..=1.0).contains(&v) && bf16::from_f64(v).to_f64() == v,
            "{v}"
        );
    }
}

// ---- A kernel that leaves a block unwritten must fail its check on every device. ----

/// `add`, except that grid step 1 writes nothing.
#[tpu_kernel]
fn add_skipping_step_one<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>) {
    if program_id(0).ne(1) {
        o.store(x.load() + y.load());
    }
}

fn skipping_launch(shape: &[usize]) -> Result<Launch, String> {
    let spec = || BlockSpec::new([8, 128], |i| (i, 0));
    Ok(add_skipping_step_one::launch()
        .grid([shape[0] / 8])
        .input(spec())
        .input(spec())
        .output(spec(), shape.to_vec()))
}

#[test]
fn a_kernel_that_skips_a_block_fails_the_check() {
    let skipping = ShippedKernel {
        name: "add_skipping_step_one",
        launch: skipping_launch,
        default_shape: &[32, 128],
        ..*shipped_kernel("add")
    };
    let cpu = cpu();
    for (device, form) in [
        (&Device::interp(), Form::Auto),
        (&cpu, Form::Auto),
        (&cpu, Form::GridLoop),
    ] {
        for dtype in DTYPES {
            let r = check_as(&skipping, device, dtype, &[32, 128], 0, form).expect("runs");
            let worst = r.worst.expect("has outputs");
            assert!(!r.passed, "{:?} {dtype}: {worst:?}", device.kind());
            // The worst element is in rows 8..16, the block step 1 owns.
            assert!((8 * 128..16 * 128).contains(&worst.index), "{worst:?}");
        }
    }
    // The interpreter's outputs start as NaN, which counts as infinitely wrong.
    let r = check(&skipping, &Device::interp(), DType::F32, &[32, 128], 0).expect("runs");
    assert!(
        r.max_rel_err.is_infinite() && r.worst.is_some_and(|w| w.got.is_nan()),
        "{r:?}"
    );
}

// ---- Launch mistakes through the shipped kernels: errors at this file's lines, no panic. ----

/// The error of `result`, which must name `kernels_tests.rs:LINE`.
fn assert_error_at(result: Result<Vec<HostTensor>, RuntimeError>, line: u32) -> TraceError {
    let error = match result {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("kernels_tests.rs:{line}:")),
        "{message}"
    );
    error
}

fn tensors(dtype: DType, shapes: &[&[usize]]) -> Vec<HostTensor> {
    shapes
        .iter()
        .map(|s| HostTensor::zeros(dtype, s.to_vec()))
        .collect()
}

#[test]
fn a_block_that_does_not_divide_its_array_is_reported_at_the_block_spec() {
    let ts = tensors(DType::F32, &[&[16, 128], &[16, 128]]);
    let (x_spec, line) = (BlockSpec::new([16, 96], |i| (0, i)), line!());
    let launch = add::add::launch()
        .grid([2])
        .input(x_spec)
        .input(BlockSpec::new([16, 64], |i| (0, i)))
        .output(BlockSpec::new([16, 64], |i| (0, i)), [16, 128]);
    let error = assert_error_at(launch.run(&Device::interp(), &[&ts[0], &ts[1]]), line);
    assert!(
        matches!(
            error,
            TraceError::BlockNotDividing {
                dim: 1,
                block_dim: 96,
                array_dim: 128,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn an_index_map_of_the_wrong_arity_is_reported_at_the_block_spec() {
    let ts = tensors(DType::F32, &[&[256, 128], &[128, 128]]);
    let (y_spec, line) = (BlockSpec::new([128, 128], |k, j| [k, j]), line!());
    let launch = matmul::matmul::launch()
        .grid([2, 1, 1])
        .input(BlockSpec::new([128, 128], |i, _j, k| [i, k]))
        .input(y_spec)
        .output(BlockSpec::new([128, 128], |i, j, _k| [i, j]), [256, 128])
        .scratch(Vmem::<f32>::new([128, 128]))
        .semantics([Parallel, Parallel, Arbitrary]);
    let error = assert_error_at(launch.run(&cpu(), &[&ts[0], &ts[1]]), line);
    assert!(
        matches!(error, TraceError::IndexMapArity { arity: 2, .. }),
        "{error}"
    );
}

#[test]
fn mixed_input_dtypes_are_reported_at_the_run_call() {
    let (x, y) = (
        HostTensor::zeros(DType::F32, vec![8, 128]),
        HostTensor::zeros(DType::BF16, vec![8, 128]),
    );
    let launch = (shipped_kernel("add").launch)(&[8, 128]).expect("valid");
    let (result, line) = (launch.run(&Device::interp(), &[&x, &y]), line!());
    let error = assert_error_at(result, line);
    assert!(
        matches!(
            error,
            TraceError::GenericConflict {
                first: DType::F32,
                second: DType::BF16,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("input `y`"), "{error}");
}

#[test]
fn a_scratch_of_the_wrong_dtype_is_reported_at_the_run_call() {
    let ts = tensors(DType::BF16, &[&[128, 128], &[128, 128]]);
    let launch = matmul::matmul::launch()
        .input(BlockSpec::new([128, 128], || [0, 0]))
        .input(BlockSpec::new([128, 128], || [0, 0]))
        .output(BlockSpec::new([128, 128], || [0, 0]), [128, 128])
        .scratch(Vmem::<bf16>::new([128, 128]));
    let (result, line) = (launch.run(&Device::interp(), &[&ts[0], &ts[1]]), line!());
    let error = assert_error_at(result, line);
    // `acc` is declared `Scratch<f32>`: the f32 accumulator cannot silently become bf16.
    assert!(
        matches!(
            error,
            TraceError::DTypeMismatch {
                expected: DType::F32,
                got: DType::BF16,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_launch_with_too_few_inputs_is_reported_at_the_run_call() {
    let x = HostTensor::zeros(DType::F32, vec![8, 128]);
    let launch = (shipped_kernel("layer_norm").launch)(&[8, 128]).expect("valid");
    let (result, line) = (launch.run(&cpu(), &[&x]), line!());
    let error = assert_error_at(result, line);
    assert!(
        matches!(
            error,
            TraceError::OperandCount {
                expected: 3,
                got: 1,
                ..
            }
        ),
        "{error}"
    );
    // The shipped kernels' params are public too: `layer_norm` is `x, w, b, o`.
    let params: Vec<&str> = layer_norm::layer_norm::launch()
        .kernel()
        .info()
        .params
        .iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(params, ["x", "w", "b", "o"]);
}

#[test]
fn problem_shapes_are_read_back_from_input_shapes() {
    for k in tessera_kernels::shipped() {
        let shape = k.default_shape;
        let inputs = (k.input_shapes)(shape);
        assert_eq!(k.problem_of(&inputs).unwrap(), shape, "{}", k.name);
    }
    let mm = tessera_kernels::find("matmul").unwrap();
    assert_eq!(
        mm.problem_of(&[vec![8, 3], vec![3, 5]]).unwrap(),
        vec![8, 5, 3]
    );
    let e = mm.problem_of(&[vec![8, 3], vec![4, 5]]).unwrap_err();
    assert!(
        e.contains("kernel `matmul` takes 2 input(s) shaped [m, k], [k, n]"),
        "{e}"
    );
    let e = mm.problem_of(&[vec![8, 3]]).unwrap_err();
    assert!(e.contains("got [[8, 3]]"), "{e}");
}
