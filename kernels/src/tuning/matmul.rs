//! Matmul: block sizes bm, bn, bk of the `(m/bm, n/bn, k/bk)` grid.

use super::{Block, Rule, TuningSpec};
use crate::matmul::launch_with_blocks;
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_runtime::autotune::Config;

pub(super) const SPEC: TuningSpec = TuningSpec {
    kernel: "matmul",
    blocks,
    default,
    launch,
};

fn blocks(shape: &[usize]) -> Vec<Block> {
    let (m, n, k) = (shape[0], shape[1], shape[2]);
    // k is x's lane dim (and y's sublane dim): the lane rule is the stricter one.
    vec![
        Block {
            name: "bm",
            dim: m,
            rule: Rule::Sublane,
        },
        Block {
            name: "bn",
            dim: n,
            rule: Rule::Lane,
        },
        Block {
            name: "bk",
            dim: k,
            rule: Rule::Lane,
        },
    ]
}

/// x's block is `[bm, bk]`, y's `[bk, bn]`.
fn default(p: &KernelProgram) -> Config {
    let (x, y) = (&p.inputs[0].block_shape, &p.inputs[1].block_shape);
    Config::new([
        ("bm", x[0] as i64),
        ("bn", y[1] as i64),
        ("bk", x[1] as i64),
    ])
}

fn launch(shape: &[usize], c: &Config) -> Result<Launch, String> {
    let (m, n, k) = (shape[0], shape[1], shape[2]);
    let (bm, bn, bk) = (c.usize("bm")?, c.usize("bn")?, c.usize("bk")?);
    if bm == 0 || bn == 0 || bk == 0 {
        return Err(format!("config `{c}` has an empty block"));
    }
    Ok(launch_with_blocks([m, n, k], [bm, bn, bk]))
}
