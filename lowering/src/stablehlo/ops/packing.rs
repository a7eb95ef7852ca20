//! Pallas' `pltpu.bitcast` off TPU: a width-changing reinterpretation that packs or unpacks
//! along the second-minor dim (`[.., p*n, m]` narrow <-> `[.., n, m]` wide, packing `p`).

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::Value;
use crate::dtype::DType;

impl FuncBuilder {
    /// `x` (rank >= 2) reinterpreted as `dtype`: rows `p*i .. p*i + p` of the narrow side
    /// share word row `i`, row `p*i + k` in bits `k*narrow ..` (low bits first), as the
    /// interpreter does. Narrow to wide: `[.., p*n, m]` -> `[.., n, p, m]` -> swap the last two
    /// -> `bitcast_convert` consumes the trailing `p`; wide to narrow is the inverse. Same
    /// width: a plain `bitcast_convert`.
    pub fn bitcast_packed(&mut self, x: &Value, dtype: DType) -> Result<Value, BuildError> {
        let (fb, tb) = (x.dtype().bits(), dtype.bits());
        let shape = x.shape().to_vec();
        let r = shape.len();
        if fb == tb {
            return self.bitcast_convert(x, dtype);
        }
        if r < 2 {
            return Err(BuildError::shape(
                "bitcast",
                format!("a width change packs along the second-minor dim: needs rank >= 2, got {shape:?}"),
            ));
        }
        let lead = &shape[..r - 2];
        let (rows, cols) = (shape[r - 2], shape[r - 1]);
        // `[.., a, b, c]` -> `[.., a, c, b]`.
        let swap_last_two = |rank: usize| -> Vec<usize> {
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.swap(rank - 1, rank - 2);
            perm
        };
        if fb < tb {
            let p = tb / fb;
            if !rows.is_multiple_of(p) {
                return Err(BuildError::shape(
                    "bitcast",
                    format!("{rows} rows do not pack by {p} into {dtype}"),
                ));
            }
            let split = self.reshape(x, &[lead, &[rows / p, p, cols]].concat())?;
            let moved = self.transpose(&split, &swap_last_two(r + 1))?;
            self.bitcast_convert(&moved, dtype)
        } else {
            let p = fb / tb;
            let words = self.bitcast_convert(x, dtype)?; // [.., rows, cols, p]
            let moved = self.transpose(&words, &swap_last_two(r + 1))?; // [.., rows, p, cols]
            self.reshape(&moved, &[lead, &[rows * p, cols]].concat())
        }
    }
}
