//! The `tpu_custom_call` wrapper: a StableHLO `main` that hands whole arrays to the Mosaic
//! kernel, with the base64 body, cost estimate, layouts and (when needed) a VMEM limit.

mod common;
mod mosaic_support;

use base64::Engine;
use mosaic_support::*;
use tessera_lowering::mosaic::{backend_config, lower_to_mosaic, tpu_custom_call, TpuGeneration};
use tessera_lowering::prelude::*;

/// The JSON inside `backend_config = "..."` of the wrapper's text (an MLIR string).
fn config_of(text: &str) -> serde_json::Value {
    let start =
        text.find("backend_config = \"").expect("a backend_config") + "backend_config = \"".len();
    let mut json = String::new();
    let mut chars = text[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => json.extend(chars.next()),
            c => json.push(c),
        }
    }
    serde_json::from_str(&json).expect("backend_config is JSON")
}

#[test]
fn matmul_wrapper_calls_the_kernel_with_row_major_layouts() {
    let p = matmul_program(DType::F32, 256, 256, 384, 128);
    let k = lower_to_mosaic(&p, TpuGeneration::V5e).expect("lowers");
    let module = tpu_custom_call(&p, &k).expect("wraps");
    let text = module.text();
    for needle in [
        "func.func public @main(%arg0: tensor<256x384xf32>, %arg1: tensor<384x256xf32>) -> (tensor<256x256xf32>)",
        "\"stablehlo.custom_call\"(%arg0, %arg1) {call_target_name = \"tpu_custom_call\"",
        "kernel_name = \"matmul\"",
        "operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>]",
        "result_layouts = [dense<[1, 0]> : tensor<2xindex>]",
        ": (tensor<256x384xf32>, tensor<384x256xf32>) -> tensor<256x256xf32>",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
    let config = config_of(text);
    let cc = &config["custom_call_config"];
    assert_eq!(cc["serialization_format"], 1);
    assert_eq!(cc["needs_layout_passes"], true);
    let body = base64::engine::general_purpose::STANDARD
        .decode(cc["body"].as_str().expect("body"))
        .expect("base64");
    assert_eq!(String::from_utf8(body).expect("utf-8"), k.serialized);
    // 2*m*n*k flops; x is read once per (i, k) block, y per (k, j), o written per (i, j).
    assert_eq!(
        cc["cost_estimate"]["flops"],
        2 * 256 * 256 * 384 + 256 * 256 * 3
    );
    assert_eq!(cc["cost_estimate"]["transcendentals"], 0);
    assert_eq!(
        cc["cost_estimate"]["bytes_accessed"],
        (256 * 384 + 384 * 256 + 256 * 256) * 4
    );
    assert!(
        config.get("scoped_memory_configs").is_none(),
        "fits the default scoped VMEM"
    );
}

#[test]
fn softmax_cost_counts_transcendentals_per_element() {
    let p = softmax_program(DType::F32, 64, 256, 16);
    let k = lower_to_mosaic(&p, TpuGeneration::V6e).expect("lowers");
    assert_eq!(k.cost.transcendentals, 64 * 256);
    assert_eq!(k.cost.bytes_accessed, 2 * 64 * 256 * 4);
    assert!(k.cost.flops >= 4 * 64 * 256, "{:?}", k.cost);
}

#[test]
fn big_windows_raise_the_scoped_vmem_limit() {
    let p = add_program(DType::F32, 2048, 2048, 1024, 1024);
    let k = lower_to_mosaic(&p, TpuGeneration::V5e).expect("fits v5e");
    let config: serde_json::Value = serde_json::from_str(&backend_config(&k)).expect("JSON");
    let scoped = &config["scoped_memory_configs"][0];
    assert_eq!(scoped["memory_space"], 1);
    assert_eq!(scoped["size"], 30 << 20);
}

#[test]
fn multi_operand_wrappers_list_every_layout() {
    let (_, p) = all_programs()
        .into_iter()
        .find(|(n, _)| n.starts_with("bf16_ops/"))
        .expect("bf16_ops");
    let k = lower_to_mosaic(&p, TpuGeneration::Tpu7x).expect("lowers");
    let text = tpu_custom_call(&p, &k).expect("wraps").into_text();
    assert!(
        text.contains("operand_layouts = [dense<[2, 1, 0]> : tensor<3xindex>]"),
        "{text}"
    );
    assert!(text.contains("tensor<2x16x128xbf16>"), "{text}");
    let (_, p) = all_programs()
        .into_iter()
        .find(|(n, _)| n.starts_with("layer_norm/f32"))
        .expect("layer_norm");
    let k = lower_to_mosaic(&p, TpuGeneration::V5e).expect("lowers");
    let text = tpu_custom_call(&p, &k).expect("wraps").into_text();
    assert_eq!(
        text.matches("dense<[1, 0]> : tensor<2xindex>").count(),
        4,
        "3 operands + 1 result:\n{text}"
    );
}
