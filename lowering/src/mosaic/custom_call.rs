//! The StableHLO module that runs a Mosaic kernel: `main` passes its arguments (whole
//! arrays, in HBM) to `stablehlo.custom_call @tpu_custom_call`, whose `backend_config`
//! carries the base64 Mosaic body; XLA's TPU backend pipelines the blocks.

use super::error::MosaicError;
use super::MosaicKernel;
use crate::ir::KernelProgram;
use crate::stablehlo::{mlir_string, FuncBuilder, Module, TensorType};
use base64::Engine;

/// The `backend_config` JSON, formatted like jax's `tpu_custom_call.py` (XLA parses it
/// as a proto in JSON form, so key names matter and the layout does not).
pub fn backend_config(kernel: &MosaicKernel) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(kernel.serialized.as_bytes());
    let mut json = format!(
        "{{\"custom_call_config\": {{\"body\": \"{body}\", \"cost_estimate\": {}, \"serialization_format\": 1, \"needs_layout_passes\": true}}",
        kernel.cost.to_json()
    );
    if let Some(limit) = kernel.vmem_limit_bytes() {
        // Memory space 1 is VMEM.
        json += &format!(", \"scoped_memory_configs\": [{{\"memory_space\": 1, \"offset\": 0, \"size\": {limit}}}]");
    }
    json + "}"
}

/// `func.func public @main(inputs) -> outputs` calling the kernel; operand and result
/// layouts are row-major (`minor_to_major = [rank-1, .., 0]`).
pub fn tpu_custom_call(
    program: &KernelProgram,
    kernel: &MosaicKernel,
) -> Result<Module, MosaicError> {
    let wrap = |e: crate::stablehlo::BuildError| MosaicError::Wrapper {
        message: e.to_string(),
        loc: program.launch_loc,
    };
    let mut f = FuncBuilder::new("main");
    // Scalar-prefetch arrays are the call's first operands, as in Pallas.
    let arrays: Vec<(&Vec<usize>, crate::DType)> = program
        .prefetch
        .iter()
        .map(|p| (&p.shape, p.dtype))
        .chain(program.inputs.iter().map(|o| (&o.array_shape, o.dtype)))
        .collect();
    let args: Vec<_> = arrays
        .iter()
        .map(|(shape, dtype)| f.arg(TensorType::new(shape.to_vec(), *dtype)))
        .collect();
    let results: Vec<TensorType> = program
        .outputs
        .iter()
        .map(|o| TensorType::new(o.array_shape.clone(), o.dtype))
        .collect();
    let layouts = |shapes: Vec<&Vec<usize>>| {
        let each: Vec<String> = shapes.into_iter().map(|s| row_major(s.len())).collect();
        format!("[{}]", each.join(", "))
    };
    let attrs = [
        ("kernel_name", mlir_string(&kernel.name)),
        (
            "operand_layouts",
            layouts(arrays.iter().map(|(shape, _)| *shape).collect()),
        ),
        (
            "result_layouts",
            layouts(program.outputs.iter().map(|o| &o.array_shape).collect()),
        ),
    ];
    // Aliases name the call's operands, scalar-prefetch arrays included, and its results
    // (a tuple when there are several).
    let aliases: Vec<String> = program
        .aliases
        .iter()
        .map(|&(i, o)| {
            let output = if program.outputs.len() == 1 {
                String::new()
            } else {
                o.to_string()
            };
            format!(
                "#stablehlo.output_operand_alias<output_tuple_indices = [{output}], operand_index = {}, operand_tuple_indices = []>",
                program.prefetch.len() + i
            )
        })
        .collect();
    let mut attrs = attrs.to_vec();
    if !aliases.is_empty() {
        attrs.push((
            "output_operand_aliases",
            format!("[{}]", aliases.join(", ")),
        ));
    }
    let operands: Vec<_> = args.iter().collect();
    let outs = f
        .custom_call(
            "tpu_custom_call",
            &operands,
            results,
            &backend_config(kernel),
            &attrs,
        )
        .map_err(wrap)?;
    let refs: Vec<_> = outs.iter().collect();
    f.finish(&refs).map_err(wrap)
}

/// `dense<[1, 0]> : tensor<2xindex>` for rank 2.
fn row_major(rank: usize) -> String {
    let dims: Vec<String> = (0..rank).rev().map(|d| d.to_string()).collect();
    match rank {
        0 => "dense<> : tensor<0xindex>".to_string(),
        1 => "dense<0> : tensor<1xindex>".to_string(),
        _ => format!("dense<[{}]> : tensor<{rank}xindex>", dims.join(", ")),
    }
}
