//! The Mosaic module of a program: the kernel `func` (grid indices, one VMEM window per
//! operand, scratch; Pallas' attributes) and one `transform_i` func per operand, the
//! operand's traced index map.

use super::body::Lower;
use super::error::MosaicError;
use super::printer::{result_types, Flavor, Printer, V};
use super::types::{dense_array, mlir_type};
use super::MOSAIC_VERSION;
use crate::ir::Func;
use crate::ir::KernelProgram;
use crate::stablehlo::mlir_string;

/// The whole module as text in `flavor`.
pub(crate) fn print_module(program: &KernelProgram, flavor: Flavor) -> Result<String, MosaicError> {
    let mut p = Printer::new(flavor);
    kernel_func(&mut p, program)?;
    let operands = program.inputs.iter().chain(&program.outputs);
    for (i, o) in operands.enumerate() {
        transform_func(
            &mut p,
            &o.index_map,
            &format!("transform_{i}"),
            &program.grid,
        )?;
    }
    let mut text =
        format!("module attributes {{stable_mosaic.version = {MOSAIC_VERSION} : i64}} {{\n");
    for line in p.finish() {
        text += &format!("  {line}\n");
    }
    text += "}\n";
    Ok(text)
}

fn kernel_func(p: &mut Printer, program: &KernelProgram) -> Result<(), MosaicError> {
    let body = &program.body;
    let grid_args: Vec<V> = program.grid.iter().map(|_| p.fresh("i32".into())).collect();
    let mut lower = Lower::new(p, body, &program.grid, &grid_args);
    let refs = lower.fresh_args(body.params());
    lower.bind(body.params(), &refs);
    let args: Vec<V> = grid_args.iter().chain(&refs).cloned().collect();
    lower.p.begin_block(&args);
    lower.region_ops(&body.body)?;
    lower.p.op("func.return", &[], "", &[]);
    let region = lower.p.end_block();

    let semantics: Vec<String> = program
        .semantics
        .iter()
        .map(|s| format!("#tpu.dimension_semantics<{}>", s.name()))
        .collect();
    let windows: Vec<String> = program
        .inputs
        .iter()
        .chain(&program.outputs)
        .enumerate()
        .map(|(i, o)| {
            format!(
                "{{transform_indices = @transform_{i}, window_bounds = {}}}",
                dense_array("i64", &o.block_shape)
            )
        })
        .collect();
    let arg_types: Vec<String> = args.iter().map(|a| a.ty.clone()).collect();
    let attrs = [
        format!("dimension_semantics = [{}]", semantics.join(", ")),
        format!("function_type = ({}) -> ()", arg_types.join(", ")),
        format!("iteration_bounds = {}", dense_array("i64", &program.grid)),
        "scalar_prefetch = 0 : i64".to_string(),
        format!("scratch_operands = {} : i64", program.scratch.len()),
        format!("sym_name = {}", mlir_string(&program.name)),
        "tpu.core_type = #tpu.core_type<tc>".to_string(),
        format!("window_params = [{}]", windows.join(", ")),
    ];
    p.op_with_regions("func.func", &[], &attrs.join(", "), &[], vec![region]);
    Ok(())
}

/// `(grid indices: i32...) -> (block indices: i32...)`.
fn transform_func(
    p: &mut Printer,
    index_map: &Func,
    name: &str,
    grid: &[usize],
) -> Result<(), MosaicError> {
    let mut lower = Lower::new(p, index_map, grid, &[]);
    let args = lower.fresh_args(index_map.params());
    lower.bind(index_map.params(), &args);
    lower.p.begin_block(&args);
    let results = lower.region_ops(&index_map.body)?;
    let refs: Vec<&V> = results.iter().collect();
    lower.p.op("func.return", &refs, "", &[]);
    let region = lower.p.end_block();
    let params: Vec<String> = index_map.param_types().iter().map(mlir_type).collect();
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
