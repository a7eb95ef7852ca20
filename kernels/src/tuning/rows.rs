//! Row-blocked kernels (softmax, layer norm): `br` whole rows per grid step.

use super::{Block, Rule, TuningSpec};
use crate::{layer_norm::layer_norm, softmax::softmax};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_runtime::autotune::Config;

pub(super) const SOFTMAX: TuningSpec = TuningSpec {
    kernel: "softmax",
    blocks,
    default,
    launch: softmax_launch,
};
pub(super) const LAYER_NORM: TuningSpec = TuningSpec {
    kernel: "layer_norm",
    blocks,
    default,
    launch: layer_norm_launch,
};

fn blocks(shape: &[usize]) -> Vec<Block> {
    vec![Block {
        name: "br",
        dim: shape[0],
        rule: Rule::Sublane,
    }]
}

fn default(p: &KernelProgram) -> Config {
    Config::new([("br", p.inputs[0].block_shape[0] as i64)])
}

/// Rows, cols, rows per block and the `[br, cols]` block spec.
fn row_block(shape: &[usize], c: &Config) -> Result<(usize, usize, usize, BlockSpec), String> {
    let (rows, cols, br) = (shape[0], shape[1], c.usize("br")?);
    if br == 0 {
        return Err(format!("config `{c}` has an empty block"));
    }
    Ok((rows, cols, br, BlockSpec::new([br, cols], |i| (i, 0))))
}

fn softmax_launch(shape: &[usize], c: &Config) -> Result<Launch, String> {
    let (rows, cols, br, block) = row_block(shape, c)?;
    Ok(softmax::launch()
        .grid([rows / br])
        .input(block.clone())
        .output(block, [rows, cols]))
}

fn layer_norm_launch(shape: &[usize], c: &Config) -> Result<Launch, String> {
    let (rows, cols, br, block) = row_block(shape, c)?;
    // Every step reads the whole weight and bias.
    let whole = || BlockSpec::new([cols], |_i| [0]);
    Ok(layer_norm::launch()
        .grid([rows / br])
        .input(block.clone())
        .input(whole())
        .input(whole())
        .output(block, [rows, cols]))
}
