//! The typed ops of [`FuncBuilder`](super::FuncBuilder), one family per file. Each op checks
//! its operands (shapes, dtypes, attributes) per the StableHLO spec and infers its result type.

pub mod broadcast;
pub mod constant;
pub mod control;
pub mod conv;
pub mod custom;
pub mod dot;
pub mod elementwise;
pub mod fft;
pub mod indexing;
pub mod packing;
pub mod reduce;
pub mod shape;
pub mod sort;

/// `array<i64: 1, 2>`: the DenseI64ArrayAttr spelling of dimension lists.
pub(crate) fn i64_array<T: Copy + Into<i64>>(xs: &[T]) -> String {
    if xs.is_empty() {
        return "array<i64>".to_string();
    }
    let parts: Vec<String> = xs.iter().map(|&x| x.into().to_string()).collect();
    format!("array<i64: {}>", parts.join(", "))
}

/// `[1, 2]`: the list spelling inside `#stablehlo.dot<...>`/`#stablehlo.gather<...>`.
pub(crate) fn dim_list(xs: &[usize]) -> String {
    let parts: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// Dims as i64 for `i64_array` (usize has no `Into<i64>`).
pub(crate) fn as_i64(xs: &[usize]) -> Vec<i64> {
    xs.iter().map(|&x| x as i64).collect()
}

/// Checks that `axes` are distinct and each `< rank`.
pub(crate) fn check_axes(
    op: &'static str,
    axes: &[usize],
    rank: usize,
) -> Result<(), super::BuildError> {
    let mut seen = vec![false; rank];
    for &a in axes {
        if a >= rank {
            return Err(super::BuildError::AxisOutOfRange {
                op,
                axis: a as i64,
                rank,
            });
        }
        if std::mem::replace(&mut seen[a], true) {
            return Err(super::BuildError::shape(
                op,
                format!("axis {a} is listed twice"),
            ));
        }
    }
    Ok(())
}
