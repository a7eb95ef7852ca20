//! `BlockSpec`: a block shape plus an index map (grid indices -> block indices), given as a
//! Rust closure of the grid's arity and traced into an IR function.

use super::index::{IndexList, IndexValue};
use super::value::Scalar;
use crate::ir::Loc;
use std::fmt;
use std::sync::Arc;

type DynIndexMap = dyn Fn(&[Scalar<i32>]) -> Vec<IndexValue> + Send + Sync;

/// How one operand is cut into blocks: block `b` (the index map's result, in block units)
/// covers elements `b[d] * block_shape[d] ..` of dim `d`.
#[derive(Clone)]
pub struct BlockSpec {
    pub(crate) block_shape: Vec<usize>,
    pub(crate) arity: usize,
    pub(crate) map: Arc<DynIndexMap>,
    pub(crate) loc: Loc,
}

impl fmt::Debug for BlockSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BlockSpec({:?}, index map of {} grid indices at {})",
            self.block_shape, self.arity, self.loc
        )
    }
}

impl BlockSpec {
    /// `index_map` takes one `Scalar<i32>` per grid axis and returns the block indices: an
    /// array (`[i, k]`), or a tuple mixing traced and constant indices (`(i, 0)`).
    #[track_caller]
    pub fn new<A, F: IndexMapFn<A>>(block_shape: impl Into<Vec<usize>>, index_map: F) -> BlockSpec {
        BlockSpec {
            block_shape: block_shape.into(),
            arity: F::ARITY,
            map: Arc::new(move |grid| index_map.call(grid)),
            loc: Loc::caller(),
        }
    }

    pub fn block_shape(&self) -> &[usize] {
        &self.block_shape
    }

    /// Where `BlockSpec::new` was called.
    pub fn loc(&self) -> Loc {
        self.loc
    }
}

/// Closures of 0 to 4 grid indices. `A` is a marker that makes the impls distinct.
#[diagnostic::on_unimplemented(
    message = "this closure is not an index map",
    label = "expected a closure taking one `Scalar<i32>` per grid axis (0 to 4) and returning block indices",
    note = "return an array (`[i, k]`) or, to mix traced and constant indices, a tuple (`(i, 0)`)"
)]
pub trait IndexMapFn<A>: Send + Sync + 'static {
    const ARITY: usize;
    #[doc(hidden)]
    fn call(&self, grid: &[Scalar<i32>]) -> Vec<IndexValue>;
}

macro_rules! index_map_fn {
    ($n:literal; $($i:literal),*) => {
        impl<F, R> IndexMapFn<[Scalar<i32>; $n]> for F
        where
            F: Fn($(index_map_fn!(@ty $i)),*) -> R + Send + Sync + 'static,
            R: IndexList,
        {
            const ARITY: usize = $n;
            fn call(&self, grid: &[Scalar<i32>]) -> Vec<IndexValue> {
                let _ = grid;
                self($(grid[$i]),*).into_indices()
            }
        }
    };
    (@ty $i:literal) => { Scalar<i32> };
}
index_map_fn!(0;);
index_map_fn!(1; 0);
index_map_fn!(2; 0, 1);
index_map_fn!(3; 0, 1, 2);
index_map_fn!(4; 0, 1, 2, 3);
