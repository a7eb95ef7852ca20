//! Elementwise kernels (add, silu): `[br, bc]` blocks on a 2-D grid.

use super::{Block, Rule, TuningSpec};
use crate::{add::add, silu::silu};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_runtime::autotune::Config;

pub(super) const ADD: TuningSpec = TuningSpec {
    kernel: "add",
    blocks,
    default,
    launch: |s, c| launch(add::launch(), 2, s, c),
};
pub(super) const SILU: TuningSpec = TuningSpec {
    kernel: "silu",
    blocks,
    default,
    launch: |s, c| launch(silu::launch(), 1, s, c),
};

fn blocks(shape: &[usize]) -> Vec<Block> {
    vec![
        Block {
            name: "br",
            dim: shape[0],
            rule: Rule::Sublane,
        },
        Block {
            name: "bc",
            dim: shape[1],
            rule: Rule::Lane,
        },
    ]
}

fn default(p: &KernelProgram) -> Config {
    let b = &p.inputs[0].block_shape;
    Config::new([("br", b[0] as i64), ("bc", b[1] as i64)])
}

/// `inputs` operands and one output, all cut into `[br, bc]` blocks.
fn launch(base: Launch, inputs: usize, shape: &[usize], c: &Config) -> Result<Launch, String> {
    let (rows, cols, br, bc) = (shape[0], shape[1], c.usize("br")?, c.usize("bc")?);
    if br == 0 || bc == 0 {
        return Err(format!("config `{c}` has an empty block"));
    }
    let spec = || BlockSpec::new([br, bc], |i, j| [i, j]);
    let launch = (0..inputs).fold(base.grid([rows / br, cols / bc]), |l, _| l.input(spec()));
    Ok(launch.output(spec(), [rows, cols]))
}
