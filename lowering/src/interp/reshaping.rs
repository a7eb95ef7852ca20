//! Bit reinterpretation (with Pallas' packing along the second-minor dim) and static
//! strided slices of tile values, element by element on the interpreter's f64 arrays.

use super::array::{from_bits, strides, to_bits, unravel, Array};
use crate::dtype::DType;

/// `x`'s bits as `to` elements of `shape` (the verified result shape). Of one width:
/// element by element. Narrow to wide (packing `p`): word row `i` holds rows `p*i + k`,
/// row `k` in bits `k*narrow ..`; wide to narrow is the inverse. This is the order Pallas'
/// `pltpu.bitcast` gives off TPU (split rows into `[.., rows/p, p, cols]`, move `p` last,
/// `bitcast_convert_type`, whose last dim is little-endian).
pub(super) fn bitcast(x: &Array, to: DType, shape: Vec<usize>) -> Array {
    let (fb, tb) = (x.dtype.bits(), to.bits());
    if fb == tb {
        let data = x
            .data
            .iter()
            .map(|&v| from_bits(to, to_bits(x.dtype, v)))
            .collect();
        return Array::new(to, shape, data);
    }
    let rank = shape.len();
    let cols = shape[rank - 1];
    let n: usize = shape.iter().product();
    let mut data = Vec::with_capacity(n);
    if fb < tb {
        // Each output element gathers `p` input rows.
        let p = tb / fb;
        let mask = (1u64 << fb) - 1;
        for flat in 0..n {
            let (row_block, c) = (flat / cols, flat % cols);
            let mut word = 0u64;
            for k in 0..p {
                let src = (row_block * p + k) * cols + c;
                word |= (to_bits(x.dtype, x.data[src]) & mask) << (k * fb);
            }
            data.push(from_bits(to, word));
        }
    } else {
        // Each output row `p*i + k` takes bits `k*tb ..` of input row `i`.
        let p = fb / tb;
        let mask = (1u64 << tb) - 1;
        for flat in 0..n {
            let (row, c) = (flat / cols, flat % cols);
            let src = (row / p) * cols + c;
            let word = to_bits(x.dtype, x.data[src]);
            data.push(from_bits(to, (word >> ((row % p) * tb)) & mask));
        }
    }
    Array::new(to, shape, data)
}

/// The static window of `x` starting at `starts` with `strides`, of `shape`.
pub(super) fn slice(x: &Array, starts: &[usize], strides_: &[usize], shape: Vec<usize>) -> Array {
    let xs = strides(&x.shape);
    let n: usize = shape.iter().product();
    let mut idx = vec![0; shape.len()];
    let data = (0..n)
        .map(|f| {
            unravel(f, &shape, &mut idx);
            let src: usize = (0..shape.len())
                .map(|d| (starts[d] + idx[d] * strides_[d]) * xs[d])
                .sum();
            x.data[src]
        })
        .collect();
    Array::new(x.dtype, shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_consecutive_rows_low_bits_first_and_unpacks_back() {
        // bf16 [4, 2] -> u32 [2, 2]: rows 0 and 1 share word row 0, row 0 in the low half.
        let rows: Vec<f64> = [1.0, 2.0, -1.0, 0.5, 3.0, 4.0, 8.0, -2.0].to_vec();
        let x = Array::new(DType::BF16, vec![4, 2], rows.clone());
        let packed = bitcast(&x, DType::U32, vec![2, 2]);
        let bits = |v: f64| u64::from(half::bf16::from_f64(v).to_bits());
        assert_eq!(
            packed.data[0] as u64,
            bits(1.0) | (bits(-1.0) << 16),
            "word (0, 0) holds rows 0 and 1 of column 0"
        );
        assert_eq!(packed.data[3] as u64, bits(4.0) | (bits(-2.0) << 16));
        // i8 [4, 1] -> i32 [1, 1]: four rows, row 0 lowest byte.
        let bytes = Array::new(DType::I8, vec![4, 1], vec![1.0, -1.0, 0.0, 127.0]);
        let word = bitcast(&bytes, DType::I32, vec![1, 1]);
        assert_eq!(word.data[0] as i64, 0x7f00_ff01);
        let back = bitcast(&packed, DType::BF16, vec![4, 2]);
        assert_eq!(back.data, rows);
    }
}
