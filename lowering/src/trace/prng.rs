//! Random bits in a kernel (Pallas' `pltpu.prng_seed` / `pltpu.prng_random_bits`). On a TPU
//! they come from the hardware PRNG; the interpreter and the StableHLO forms share the
//! counter-based generator of `ir::prng` (so they agree exactly with each other, not with
//! a TPU's bits).

use super::builder::with;
use super::index::IndexList;
use super::value::{Tile, Traced};
use crate::dtype::DType;
use crate::ir::{Loc, OpKind, Type};

/// Seeds the PRNG with one or more `i32` scalars, static or traced (`prng_seed((seed,
/// program_id(0)))`); several are mixed into one key. Draws after it depend on the seeds
/// and on their position in the kernel; the same seeds replay the same bits.
#[track_caller]
pub fn prng_seed(seeds: impl IndexList) {
    let loc = Loc::caller();
    with(|b| {
        let seeds: Vec<_> = seeds
            .into_indices()
            .into_iter()
            .map(|s| {
                let v = s.to_val(b, loc);
                b.id(v, "prng_seed", loc)
            })
            .collect();
        if seeds.is_empty() {
            b.op_error("prng_seed", "needs at least one seed", loc);
            return;
        }
        let key = b.emit1(OpKind::PrngSeed { seeds }, Type::index(), loc);
        b.prng_key = Some((key, loc));
    })
}

/// An `i32` tile of `shape` (rank >= 2, as the TPU draws them) of uniformly random bits,
/// from the PRNG as the latest `prng_seed` left it. Errors at this line: no seed yet, a seed
/// set inside an `if` or loop that has ended, or a draw inside a loop whose seed was set
/// outside it (seed inside the loop, e.g. with its index, so iterations differ).
#[track_caller]
pub fn prng_random_bits(shape: impl Into<Vec<usize>>) -> Tile<i32> {
    let (loc, shape) = (Loc::caller(), shape.into());
    Tile::from_val(with(|b| {
        let fail = |b: &mut super::builder::Builder, message: String| {
            b.op_error("prng_random_bits", message, loc);
            b.emit1(
                OpKind::Constant {
                    value: crate::ir::Literal::Int(0),
                },
                Type::tile(DType::I32, shape.clone()),
                loc,
            )
        };
        if shape.len() < 2 {
            return fail(
                b,
                format!("shape {shape:?}: the TPU's PRNG draws tiles of rank >= 2"),
            );
        }
        let Some((key, seeded_at)) = b.prng_key else {
            return fail(b, "no `prng_seed` before it in the kernel".into());
        };
        match b.defined_outside_an_open_loop(key) {
            None => {
                return fail(
                    b,
                    format!(
                        "the `prng_seed` at {seeded_at} is inside an `if` or loop that has \
                         ended; seed again here"
                    ),
                )
            }
            Some(true) => {
                return fail(
                    b,
                    format!(
                        "a draw inside a loop needs a seed set inside the loop (e.g. \
                         `prng_seed((seed, i))`); the `prng_seed` at {seeded_at} is outside, \
                         so every iteration would draw the same bits off the TPU"
                    ),
                )
            }
            Some(false) => {}
        }
        let site = b.prng_sites;
        b.prng_sites += 1;
        let key = b.id(key, "prng_random_bits", loc);
        b.emit1(
            OpKind::PrngRandomBits { key, site },
            Type::tile(DType::I32, shape.clone()),
            loc,
        )
    }))
}
