//! Real kernels written with `#[tpu_kernel]`, traced through the lowering crate: they register
//! with the right metadata, their traced IR has the ops the rewriting promises, and the reference
//! interpreter computes what a float64 reference does.

use tessera_lowering::kernel::{find_kernel, registered_kernels, Generic, ParamRole};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;

/// `o = x + y`.
#[tpu_kernel]
pub fn add<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>) {
    o.store(x.load() + y.load());
}

/// `o = x * sigmoid(x)`, computed in f32.
#[tpu_kernel]
pub fn silu<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let v = x.load().cast::<f32>();
    o.store((v * sigmoid(v)).cast::<T>());
}

/// Tiled matmul: f32 accumulator in scratch, zeroed on the first k step, written on the last.
#[tpu_kernel]
pub fn matmul<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>, acc: &mut Scratch<f32>) {
    if program_id(2).eq(0) {
        acc.store(zeros());
    }
    acc.store(acc.load() + dot(x.load(), y.load()));
    if program_id(2).eq(num_programs(2) - 1) {
        o.store(acc.load().cast::<T>());
    }
}

/// Sums the four 128-wide column chunks of an (8, 512) block in a traced loop.
#[tpu_kernel]
fn chunk_sum(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut acc = full([8, 128], 0.0);
    for i in range(4) {
        acc = acc + x.load_slice((0, i * 128), [8, 128]);
    }
    o.store(acc);
}

/// `if`/`else` with a result and a carried tile, on a traced condition.
#[tpu_kernel]
fn first_block_doubles<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let t = x.load();
    let mut count = t;
    let y = if program_id(0).eq(0) {
        count = count + t;
        t + t
    } else {
        t
    };
    o.store(y + count);
}

/// Both branches write the same `&mut RefMut` (the branch closures borrow it, they do not move it).
#[tpu_kernel]
fn store_either(x: &Ref<f32>, o: &mut RefMut<f32>) {
    if program_id(0).eq(0) {
        o.store(x.load());
    } else {
        o.store(x.load() * 2.0);
    }
}

/// Any element type, `bool` included: picks `x` on the first block, `y` elsewhere.
#[tpu_kernel]
fn pick<E: Element>(x: &Ref<E>, y: &Ref<E>, o: &mut RefMut<E>) {
    let first = program_id(0).eq(0);
    o.store(where_(first, x.load(), y.load()));
}

/// Nested constructs: an `if` on the loop index inside a traced loop, both carrying `acc`.
#[tpu_kernel]
fn alternating_sum(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut acc = full([8, 128], 0.0);
    for i in range(4) {
        let chunk = x.load_slice((0, i * 128), [8, 128]);
        if (i % 2).eq(0) {
            acc += chunk;
        } else {
            acc = acc - chunk;
        }
    }
    o.store(acc);
}

/// Row softmax in f32, with reductions.
#[tpu_kernel]
fn softmax<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let v = x.load().cast::<f32>();
    let e = exp(v - v.max(1, true));
    o.store((e / e.sum(1, true)).cast::<T>());
}

/// A traced `if` cannot change a Rust value: the tracer reports it at the `if`.
#[tpu_kernel]
fn changes_rust_value(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut scale = 1.0;
    if program_id(0).eq(0) {
        scale = 2.0;
    }
    o.store(x.load() * scale);
}

/// Rust control flow runs at trace time: a Rust `if` picks one branch, a Rust `for` unrolls.
#[tpu_kernel]
fn unrolled(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut t = x.load();
    for _ in 0..3 {
        t = t * 2.0;
    }
    let scale = 4;
    if scale > 2 {
        t = t + 1.0;
    } else {
        t = t - 1.0;
    }
    o.store(t);
}

/// A 1-D grid over (16, 128) arrays in (8, 128) blocks.
fn elementwise(launch: Launch, dtype: DType, inputs: usize) -> Result<KernelProgram, TraceError> {
    (0..inputs)
        .fold(launch.grid([2]), |l, _| {
            l.input(BlockSpec::new([8, 128], |i| (i, 0)))
        })
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&vec![(dtype, vec![16, 128]); inputs])
}

fn matmul_program(dtype: DType) -> KernelProgram {
    matmul::launch()
        .grid([2, 2, 3])
        .input(BlockSpec::new([128, 128], |i, _j, k| [i, k]))
        .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
        .output(BlockSpec::new([128, 128], |i, j, _k| [i, j]), [256, 256])
        .scratch(Vmem::<f32>::new([128, 128]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(dtype, vec![256, 384]), (dtype, vec![384, 256])])
        .expect("traces")
}

/// A 1-D grid over (16, 512) inputs in (8, 512) blocks, (16, 128) outputs in (8, 128) blocks.
fn chunk_program(launch: Launch) -> KernelProgram {
    launch
        .grid([2])
        .input(BlockSpec::new([8, 512], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&[(DType::F32, vec![16, 512])])
        .expect("traces")
}

/// The op of each line of the traced body, nested regions included, in order.
fn ops(program: &KernelProgram) -> Vec<String> {
    let text = program.body.to_string();
    text.lines()
        .skip(1) // `func @name(..) {`
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty() && !line.starts_with('}') && *line != "yield")
        .map(|line| line.split_once(" = ").map_or(line, |(_, op)| op))
        .filter_map(|op| op.split_whitespace().next().map(str::to_string))
        .filter(|op| op != "yield")
        .collect()
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| *o == op).count()
}

/// The 1-based line of this file that contains `needle` (for location checks).
fn line_of(needle: &str) -> u32 {
    let index = include_str!("tpu_kernel_tests.rs")
        .lines()
        .position(|l| l.contains(needle));
    index.map(|i| i as u32 + 1).expect("needle is in this file")
}

#[test]
fn every_kernel_is_registered_with_its_metadata() {
    let names: Vec<&str> = registered_kernels().iter().map(|k| k.info().name).collect();
    for name in [
        "add",
        "alternating_sum",
        "changes_rust_value",
        "chunk_sum",
        "first_block_doubles",
        "matmul",
        "pick",
        "silu",
        "softmax",
        "store_either",
        "unrolled",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    let info = find_kernel("matmul").expect("registered").info();
    assert_eq!(info.generic, Generic::Float);
    assert!(info.file.ends_with("tpu_kernel_tests.rs"), "{}", info.file);
    assert_eq!((info.line, info.column), (line_of("pub fn matmul<T"), 8));
    let params: Vec<_> = info
        .params
        .iter()
        .map(|p| (p.name, p.role, p.dtype))
        .collect();
    assert_eq!(
        params,
        [
            ("x", ParamRole::Input, None),
            ("y", ParamRole::Input, None),
            ("o", ParamRole::Output, None),
            ("acc", ParamRole::Scratch, Some(DType::F32)),
        ]
    );
    assert_eq!(
        find_kernel("pick").map(|k| k.info().generic),
        Some(Generic::Element)
    );
    assert_eq!(
        find_kernel("chunk_sum").map(|k| k.info().generic),
        Some(Generic::None)
    );
}

#[test]
fn add_and_silu_trace_for_each_float_dtype() {
    for dtype in [DType::F32, DType::BF16] {
        let p = elementwise(add::launch(), dtype, 2).expect("traces");
        assert_eq!(p.dtype, Some(dtype));
        assert_eq!(ops(&p), ["load", "load", "add", "store"], "{p}");
        let p = elementwise(silu::launch(), dtype, 1).expect("traces");
        assert_eq!(
            ops(&p),
            ["load", "cast", "logistic", "mul", "cast", "store"],
            "{p}"
        );
    }
}

#[test]
fn matmul_ifs_on_program_id_become_if_regions_at_the_users_lines() {
    let p = matmul_program(DType::BF16);
    let ops = ops(&p);
    assert_eq!(count(&ops, "if"), 2, "{}", p.body);
    assert_eq!(count(&ops, "dot"), 1, "{}", p.body);
    assert_eq!(count(&ops, "store"), 3, "{}", p.body);
    let text = p.body.to_string();
    for needle in [
        "if program_id(2).eq(0)",
        "if program_id(2).eq(num_programs(2) - 1)",
    ] {
        let at = format!("tpu_kernel_tests.rs:{}:5", line_of(needle));
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("if ") && l.ends_with(&at)),
            "{at}: {text}"
        );
    }
}

#[test]
fn a_range_loop_is_one_fori_region_carrying_the_tile() {
    let p = chunk_program(chunk_sum::launch());
    let ops = ops(&p);
    assert_eq!(
        (
            count(&ops, "fori"),
            count(&ops, "load_slice"),
            count(&ops, "add")
        ),
        (1, 1, 1),
        "{}",
        p.body
    );
    let text = p.body.to_string();
    let fori = text
        .lines()
        .find(|l| l.contains("= fori"))
        .expect("a fori line");
    let carried = fori
        .split(" iter(")
        .nth(1)
        .and_then(|rest| rest.split(')').next());
    assert_eq!(
        carried.map(|c| c.split(',').count()),
        Some(1),
        "one carried value: {fori}"
    );
    assert!(
        text.contains("} : tile<8x128xf32>"),
        "the loop yields the tile: {text}"
    );
}

#[test]
fn if_else_with_a_result_yields_the_result_and_the_carried_tile() {
    let p = elementwise(first_block_doubles::launch(), DType::F32, 1).expect("traces");
    let text = p.body.to_string();
    let if_line = text
        .lines()
        .find(|l| l.contains("= if "))
        .expect("an if with results");
    assert_eq!(
        if_line.split(" = ").next().map(|r| r.split(',').count()),
        Some(2),
        "{text}"
    );
    assert!(
        text.contains("} : tile<8x128xf32>, tile<8x128xf32>"),
        "{text}"
    );
}

#[test]
fn element_generic_kernels_trace_for_any_dtype() {
    for dtype in [DType::Bool, DType::I32, DType::BF16] {
        let p = elementwise(pick::launch(), dtype, 2).expect("traces");
        assert_eq!(p.dtype, Some(dtype));
        assert_eq!(count(&ops(&p), "select"), 1, "{p}");
    }
}

#[test]
fn an_if_inside_a_range_loop_is_an_if_region_inside_the_fori_region() {
    let p = chunk_program(alternating_sum::launch());
    let text = p.body.to_string();
    let (fori, if_) = (
        text.find("= fori").expect("a fori"),
        text.find("= if").expect("an if"),
    );
    assert!(fori < if_, "the if is inside the loop: {text}");
    let if_line = text
        .lines()
        .find(|l| l.contains("= if "))
        .expect("an if with results");
    assert_eq!(
        if_line.split(" = ").next().map(|r| r.split(',').count()),
        Some(1),
        "{text}"
    );
}

#[test]
fn rust_control_flow_runs_at_trace_time() {
    let p = elementwise(unrolled::launch(), DType::F32, 1).expect("traces");
    let ops = ops(&p);
    assert_eq!(
        (count(&ops, "mul"), count(&ops, "add"), count(&ops, "sub")),
        (3, 1, 0),
        "{}",
        p.body
    );
    assert_eq!(count(&ops, "if") + count(&ops, "fori"), 0, "{}", p.body);
}

#[test]
fn a_traced_if_changing_a_rust_value_is_reported_at_the_if() {
    let error =
        elementwise(changes_rust_value::launch(), DType::F32, 1).expect_err("must not trace");
    let loc = error.loc();
    assert!(matches!(error, TraceError::NotTraced { .. }), "{error}");
    assert!(loc.file.ends_with("tpu_kernel_tests.rs"), "{error}");
    assert_eq!(loc.line, line_of("scale = 2.0;") - 1, "{error}");
}

// ---- Numbers: the reference interpreter vs float64 references. ----

/// Deterministic inputs in [-1, 1) (a small LCG: no extra dependency).
fn random(dtype: DType, shape: &[usize], seed: u64) -> HostTensor {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let values: Vec<f64> = (0..shape.iter().product::<usize>())
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect();
    HostTensor::from_f64(dtype, shape.to_vec(), &values)
}

fn run(program: &KernelProgram, inputs: &[HostTensor]) -> Vec<f64> {
    let outputs = tessera_lowering::interp::run(program, inputs).expect("interprets");
    outputs[0].to_f64_vec()
}

/// Asserts `|got - want| <= tol * max(1, |want|)` everywhere.
fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn add_and_silu_compute_the_reference() {
    for (dtype, tol) in [(DType::F32, 1e-6), (DType::BF16, 1e-2)] {
        let (x, y) = (random(dtype, &[16, 128], 1), random(dtype, &[16, 128], 2));
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        let p = elementwise(add::launch(), dtype, 2).expect("traces");
        let want: Vec<f64> = xs.iter().zip(&ys).map(|(a, b)| a + b).collect();
        assert_close(&run(&p, &[x.clone(), y]), &want, tol);
        let p = elementwise(silu::launch(), dtype, 1).expect("traces");
        let want: Vec<f64> = xs.iter().map(|v| v / (1.0 + (-v).exp())).collect();
        assert_close(&run(&p, &[x]), &want, tol);
    }
}

#[test]
fn matmul_computes_the_reference() {
    let (m, k, n) = (256, 384, 256);
    let (x, y) = (
        random(DType::F32, &[m, k], 3),
        random(DType::F32, &[k, n], 4),
    );
    let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
    let want: Vec<f64> = (0..m * n)
        .map(|e| {
            (0..k)
                .map(|l| xs[(e / n) * k + l] * ys[l * n + e % n])
                .sum()
        })
        .collect();
    assert_close(&run(&matmul_program(DType::F32), &[x, y]), &want, 1e-4);
}

#[test]
fn loops_and_ifs_compute_the_reference() {
    let x = random(DType::F32, &[16, 512], 5);
    let xs = x.to_f64_vec();
    // Chunk `c` of output element `e`, and the sign `alternating_sum` gives it.
    let chunk = |e: usize, c: usize| xs[(e / 128) * 512 + c * 128 + e % 128];
    let sign = |c: usize| [1.0, -1.0][c % 2];
    let sums: Vec<f64> = (0..16 * 128)
        .map(|e| (0..4).map(|c| chunk(e, c)).sum())
        .collect();
    let alternating: Vec<f64> = (0..16 * 128)
        .map(|e| (0..4).map(|c| sign(c) * chunk(e, c)).sum())
        .collect();
    let p = chunk_program(alternating_sum::launch());
    assert_close(&run(&p, std::slice::from_ref(&x)), &alternating, 1e-6);
    let p = chunk_program(chunk_sum::launch());
    let want = sums;
    assert_close(&run(&p, &[x]), &want, 1e-6);

    let x = random(DType::F32, &[16, 128], 6);
    let xs = x.to_f64_vec();
    // Block 0 (rows 0..8) takes the `then` branch: 2t + 2t; the other block: t + t.
    let want: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(e, t)| if e < 8 * 128 { 4.0 * t } else { 2.0 * t })
        .collect();
    let p = elementwise(first_block_doubles::launch(), DType::F32, 1).expect("traces");
    assert_close(&run(&p, std::slice::from_ref(&x)), &want, 1e-6);
    let want: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(e, t)| if e < 8 * 128 { *t } else { 2.0 * t })
        .collect();
    let p = elementwise(store_either::launch(), DType::F32, 1).expect("traces");
    assert_eq!(count(&ops(&p), "store"), 2, "{}", p.body);
    assert_close(&run(&p, std::slice::from_ref(&x)), &want, 1e-6);
    let want: Vec<f64> = xs.iter().map(|t| t * 8.0 + 1.0).collect();
    let p = elementwise(unrolled::launch(), DType::F32, 1).expect("traces");
    assert_close(&run(&p, &[x]), &want, 1e-6);
}

#[test]
fn softmax_computes_the_reference() {
    for (dtype, tol) in [(DType::F32, 1e-5), (DType::BF16, 1e-2)] {
        let x = random(dtype, &[16, 128], 7);
        let xs = x.to_f64_vec();
        let want: Vec<f64> = xs
            .chunks(128)
            .flat_map(|row| {
                let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
                row.iter().map(move |v| (v - max).exp() / total)
            })
            .collect();
        let p = elementwise(softmax::launch(), dtype, 1).expect("traces");
        assert_close(&run(&p, &[x]), &want, tol);
    }
}

#[test]
fn a_launch_is_located_at_the_callers_launch_call() {
    let (launch, line) = (add::launch(), line!());
    assert_eq!((launch.loc().file, launch.loc().line), (file!(), line));
}
