//! The Mosaic module of a program: the kernel `func` (grid indices, the scalar-prefetch
//! arrays in SMEM, one VMEM window per operand, scratch; Pallas' attributes) and one
//! `transform_i` func per operand, the operand's traced index map (grid indices and the
//! prefetch arrays -> block indices).

use super::body::Lower;
use super::error::MosaicError;
use super::printer::{result_types, Flavor, Printer, V};
use super::types::{dense_array, memref, mlir_type};
use super::MOSAIC_VERSION;
use crate::dtype::DType;
use crate::ir::MemorySpace;
use crate::ir::{BlockOperand, Func, KernelProgram, Literal, OpKind, ValueId};
use crate::stablehlo::mlir_string;

/// The whole module as text in `flavor`.
pub(crate) fn print_module(program: &KernelProgram, flavor: Flavor) -> Result<String, MosaicError> {
    let mut p = Printer::new(flavor);
    let pad = padded_axes(program);
    kernel_func(&mut p, program, pad)?;
    let operands = program.inputs.iter().chain(&program.outputs);
    // HBM operands have no window, so no transform func (as Pallas).
    for (i, o) in operands
        .enumerate()
        .filter(|(_, o)| o.space != MemorySpace::Any)
    {
        transform_func(&mut p, o, &format!("transform_{i}"), &program.grid, pad)?;
    }
    let mut text =
        format!("module attributes {{stable_mosaic.version = {MOSAIC_VERSION} : i64}} {{\n");
    for line in p.finish() {
        text += &format!("  {line}\n");
    }
    text += "}\n";
    Ok(text)
}

/// Grid axes of extent 1 added in front of the launch's: Mosaic takes window params only with
/// explicit (non-empty) iteration bounds ("window attributes can only be specified when
/// explicit iteration_bounds are used", libtpu 0.0.4x), so a gridless kernel runs on a grid
/// of one step, which changes nothing else (Pallas instead leaves both attributes out of a
/// grid-free call, which it allows only with whole-array blocks).
fn padded_axes(program: &KernelProgram) -> usize {
    usize::from(program.grid.is_empty())
}

fn kernel_func(p: &mut Printer, program: &KernelProgram, pad: usize) -> Result<(), MosaicError> {
    let body = &program.body;
    let padding: Vec<V> = (0..pad).map(|_| p.fresh("i32".into())).collect();
    let grid_args: Vec<V> = program.grid.iter().map(|_| p.fresh("i32".into())).collect();
    let mut lower = Lower::new(p, body, &program.grid, &grid_args);
    let mut refs = lower.fresh_args(body.params());
    // A squeezed operand's window keeps its size-1 dims, as Pallas' does; the body's ops
    // address it through `Lower::squeeze`.
    let operands = program.inputs.iter().chain(&program.outputs);
    for (k, o) in operands.enumerate() {
        if !o.squeezed.is_empty() {
            let at = program.input_param(k);
            refs[at].ty = memref(o.dtype, &o.block_shape, MemorySpace::Vmem);
            lower.squeeze(body.params()[at], o.squeezed.clone());
        }
    }
    lower.bind(body.params(), &refs);
    let args: Vec<V> = padding
        .iter()
        .chain(&grid_args)
        .chain(&refs)
        .cloned()
        .collect();
    lower.p.begin_block(&args);
    lower.region_ops(&body.body)?;
    lower.p.op("func.return", &[], "", &[]);
    let region = lower.p.end_block();

    let semantics: Vec<String> = std::iter::repeat_n("arbitrary", pad)
        .chain(program.semantics.iter().map(|s| s.name()))
        .map(|s| format!("#tpu.dimension_semantics<{s}>"))
        .collect();
    let bounds: Vec<usize> = std::iter::repeat_n(1, pad)
        .chain(program.grid.iter().copied())
        .collect();
    let windows: Vec<String> = program
        .inputs
        .iter()
        .chain(&program.outputs)
        .enumerate()
        .map(|(i, o)| match o.space {
            MemorySpace::Any => "{}".to_string(),
            // As Pallas: a `pipeline_mode` only where the BlockSpec gives a depth.
            _ => format!(
                "{{{}transform_indices = @transform_{i}, window_bounds = {}{}}}",
                match o.buffers {
                    Some(1) => "pipeline_mode = #tpu.pipeline_mode<synchronous>, ",
                    Some(_) => "pipeline_mode = #tpu.pipeline_mode<double_buffered>, ",
                    None => "",
                },
                dense_array("i64", &o.block_shape),
                element_window(o)
            ),
        })
        .collect();
    let arg_types: Vec<String> = args.iter().map(|a| a.ty.clone()).collect();
    let attrs = [
        format!("dimension_semantics = [{}]", semantics.join(", ")),
        format!("function_type = ({}) -> ()", arg_types.join(", ")),
        format!("iteration_bounds = {}", dense_array("i64", &bounds)),
        format!("scalar_prefetch = {} : i64", program.prefetch.len()),
        format!("scratch_operands = {} : i64", program.scratch.len()),
        format!("sym_name = {}", mlir_string(&program.name)),
        "tpu.core_type = #tpu.core_type<tc>".to_string(),
        format!("window_params = [{}]", windows.join(", ")),
    ];
    p.op_with_regions("func.func", &[], &attrs.join(", "), &[], vec![region]);
    Ok(())
}

/// As Pallas for a `pl.Element` block (jax 0.10.2's `lower_jaxpr_into_pipelined_module`):
/// `window_kind = #tpu.element_window<[pad low per dim], [pad high per dim]>`, which makes
/// Mosaic read the transform's results as element offsets, in every dim of the window.
/// Tessera has no element padding, so both lists are zeros. Nothing for other windows.
fn element_window(o: &BlockOperand) -> String {
    if o.element.is_empty() {
        return String::new();
    }
    let zeros = vec!["0"; o.block_shape.len()].join(", ");
    format!(", window_kind = #tpu.element_window<[{zeros}], [{zeros}]>")
}

/// The integer constants among the top-level ops of `f`.
fn int_constants(f: &Func) -> std::collections::HashMap<ValueId, i64> {
    f.body
        .ops
        .iter()
        .filter_map(|op| match (&op.kind, op.results.as_slice()) {
            (
                OpKind::Constant {
                    value: Literal::Int(c),
                },
                [v],
            ) => Some((*v, *c)),
            _ => None,
        })
        .collect()
}

/// `(grid indices: i32..., prefetch arrays: memref<.., smem>...) -> (block indices: i32...)`.
/// For a window with element dims Mosaic takes element offsets in all its dims (Pallas
/// refuses to mix `pl.Element` with blocked dims), so the other dims' block indices are
/// multiplied by their block size here (not for size-1 blocks, e.g. squeezed dims, where
/// they are equal).
fn transform_func(
    p: &mut Printer,
    o: &BlockOperand,
    name: &str,
    grid: &[usize],
    pad: usize,
) -> Result<(), MosaicError> {
    let index_map = &o.index_map;
    let padding: Vec<V> = (0..pad).map(|_| p.fresh("i32".into())).collect();
    let mut lower = Lower::new(p, index_map, grid, &[]);
    let args = lower.fresh_args(index_map.params());
    lower.bind(index_map.params(), &args);
    let all: Vec<V> = padding.iter().chain(&args).cloned().collect();
    lower.p.begin_block(&all);
    let mut results = lower.region_ops(&index_map.body)?;
    if !o.element.is_empty() {
        let constants = int_constants(index_map);
        for (d, (r, v)) in results.iter_mut().zip(index_map.results()).enumerate() {
            let b = o.block_shape[d] as i64;
            if o.is_element(d) || b == 1 {
                continue;
            }
            // A constant block index becomes a constant offset (Pallas' `0` stays a constant).
            *r = match constants.get(v) {
                Some(&c) => lower.constant(Literal::Int(c * b), DType::I32, &[]),
                None => {
                    let size = lower.constant(Literal::Int(b), DType::I32, &[]);
                    lower.p.op1("arith.muli", &[r, &size], "", "i32".into())
                }
            };
        }
    }
    let refs: Vec<&V> = results.iter().collect();
    lower.p.op("func.return", &refs, "", &[]);
    let region = lower.p.end_block();
    let params: Vec<String> = std::iter::repeat_n("i32".to_string(), pad)
        .chain(index_map.param_types().iter().map(mlir_type))
        .collect();
    let outs: Vec<String> = index_map.result_types().iter().map(mlir_type).collect();
    let attrs = format!(
        "function_type = ({}) -> {}, sym_name = {}",
        params.join(", "),
        result_types(&outs),
        mlir_string(name)
    );
    p.op_with_regions("func.func", &[], &attrs, &[], vec![region]);
    Ok(())
}
