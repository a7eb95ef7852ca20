//! Default lowerings of ATen overloads to StableHLO, one file per family. Each family exports
//! `LOWERINGS: &[Lowering]`; [`all`] chains them (the registry indexes them by op name).
//!
//! Shared semantics live in [`promote`] (type promotion) and [`util`] (dims, scalars, casts).

pub mod promote;
pub mod util;

mod complex;
mod creation;
mod fft;
mod indexing;
mod linalg;
mod nn;
mod pointwise;
mod reduction;
mod shape;

use crate::lower::Lowering;

/// Every default lowering.
pub fn all() -> impl Iterator<Item = &'static Lowering> {
    [
        pointwise::LOWERINGS,
        reduction::LOWERINGS,
        linalg::LOWERINGS,
        shape::LOWERINGS,
        indexing::LOWERINGS,
        creation::LOWERINGS,
        nn::LOWERINGS,
        fft::LOWERINGS,
        complex::LOWERINGS,
        pointwise::COMPLEX_LOWERINGS,
        shape::COMPLEX_LOWERINGS,
        reduction::COMPLEX_LOWERINGS,
    ]
    .into_iter()
    .flatten()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_lowering_names_a_table_op_once() {
        let mut seen = std::collections::HashSet::new();
        for l in super::all() {
            assert!(
                crate::schema::find(l.op).is_some(),
                "{} is not in the op table",
                l.op
            );
            assert!(seen.insert(l.op), "{} is lowered twice", l.op);
        }
    }
}
