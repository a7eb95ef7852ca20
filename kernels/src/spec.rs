//! What the shipped launches share: reading a problem shape and choosing default blocks.
//!
//! Blocks follow the TPU's tiling rule (DESIGN.md section 4) so a default launch is also a
//! legal Mosaic launch: the last block dim is a multiple of 128 (lanes) and the one before a
//! multiple of 8 (sublanes), or else the whole array dim. Within that, the largest power of
//! two up to 128 that divides the dim.

use crate::ShippedKernel;
use tessera_lowering::prelude::*;

/// The largest block for a sublane (second to last) dim.
pub(crate) fn sublane_block(dim: usize) -> usize {
    largest_dividing(dim, 8)
}

/// The largest block for a lane (last) dim.
pub(crate) fn lane_block(dim: usize) -> usize {
    largest_dividing(dim, 128)
}

/// The largest power of two in `min..=128` dividing `dim`, else `dim` itself (a whole-dim
/// block is always legal).
fn largest_dividing(dim: usize, min: usize) -> usize {
    let mut b = 128;
    while b >= min {
        if dim.is_multiple_of(b) {
            return b;
        }
        b /= 2;
    }
    dim
}

/// `shape` as the `N` problem dims of `kernel`, or why it is not one.
pub(crate) fn problem<const N: usize>(
    kernel: &ShippedKernel,
    shape: &[usize],
) -> Result<[usize; N], String> {
    let names = kernel.problem_dims.join(", ");
    let dims: [usize; N] = shape.try_into().map_err(|_| {
        format!(
            "kernel `{}` takes a problem shape of {N} dims [{names}], got {} ({shape:?})",
            kernel.name,
            shape.len()
        )
    })?;
    if dims.contains(&0) {
        return Err(format!(
            "kernel `{}`: problem shape {shape:?} [{names}] has an empty dim",
            kernel.name
        ));
    }
    Ok(dims)
}

/// A 2-D elementwise launch of `launch`'s kernel: `inputs` operands and one output, all
/// `[rows, cols]`, cut into the same blocks.
pub(crate) fn elementwise(
    kernel: &ShippedKernel,
    launch: Launch,
    shape: &[usize],
    inputs: usize,
) -> Result<Launch, String> {
    let [rows, cols] = problem(kernel, shape)?;
    let (br, bc) = (sublane_block(rows), lane_block(cols));
    let spec = || BlockSpec::new([br, bc], |i, j| [i, j]);
    let launch = (0..inputs).fold(launch.grid([rows / br, cols / bc]), |l, _| l.input(spec()));
    Ok(launch.output(spec(), [rows, cols]))
}

/// Row-blocked launches (softmax, layer norm): blocks of whole rows, one grid axis.
pub(crate) fn row_blocks(rows: usize, cols: usize) -> (usize, BlockSpec) {
    let br = sublane_block(rows);
    (rows / br, BlockSpec::new([br, cols], |i| (i, 0)))
}
