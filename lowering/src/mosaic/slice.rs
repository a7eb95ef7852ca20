//! Static slices of tile values -> `vector.extract_strided_slice` (as Pallas lowers
//! `lax.slice`).

use super::body::{unsupported, Lower};
use super::error::MosaicError;
use super::printer::V;
use super::types::vector;
use crate::ir::{Operation, ValueId};

/// `[a, b]` as an `I64ArrayAttr` (the attribute kind `vector.extract_strided_slice` takes).
fn i64_list(xs: &[usize]) -> String {
    let parts: Vec<String> = xs.iter().map(|x| format!("{x} : i64")).collect();
    format!("[{}]", parts.join(", "))
}

impl Lower<'_> {
    pub(crate) fn slice_value(
        &mut self,
        op: &Operation,
        x: ValueId,
        starts: &[usize],
        strides: &[usize],
    ) -> Result<V, MosaicError> {
        let (dtype, sizes) = self.value_type(op.results.first().copied(), op)?;
        if strides.iter().any(|&s| s != 1) {
            // Mosaic's layout pass implements unit strides only.
            return Err(unsupported(
                op,
                format!(
                    "strides {strides:?}: Mosaic slices tile values with unit strides only \
                     (slice, then pick rows with a reshape, or load a strided ref slice)"
                ),
            ));
        }
        if sizes.is_empty() {
            return Err(unsupported(op, "a slice of a scalar".into()));
        }
        let v = self.val(x, op)?;
        let attrs = format!(
            "offsets = {}, sizes = {}, strides = {}",
            i64_list(starts),
            i64_list(&sizes),
            i64_list(strides)
        );
        Ok(self.p.op1(
            "vector.extract_strided_slice",
            &[&v],
            &attrs,
            vector(dtype, &sizes),
        ))
    }
}
