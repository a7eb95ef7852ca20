//! `BlockSpec`: a block shape plus an index map (grid indices -> block indices), given as a
//! Rust closure of the grid's arity and traced into an IR function.

use super::index::{IndexList, IndexValue};
use super::refs::Prefetch;
use super::value::Scalar;
use crate::ir::{Loc, MemorySpace};
use std::fmt;
use std::sync::Arc;

type DynIndexMap = dyn Fn(&[Scalar<i32>], &[Prefetch<i32>]) -> Vec<IndexValue> + Send + Sync;

/// How one operand is cut into blocks: block `b` (the index map's result, in block units)
/// covers elements `b[d] * block_shape[d] ..` of dim `d`; for the dims of
/// [`BlockSpec::element`] the map's result is the element offset itself.
#[derive(Clone)]
pub struct BlockSpec {
    pub(crate) block_shape: Vec<usize>,
    /// Grid indices the map takes; `None` for [`BlockSpec::prefetch`] maps, which take the
    /// grid as a slice of whatever rank it has.
    pub(crate) arity: Option<usize>,
    pub(crate) map: Arc<DynIndexMap>,
    pub(crate) loc: Loc,
    /// Block dims the kernel does not see (Pallas' `None`).
    pub(crate) squeezed: Vec<usize>,
    /// `Vmem` for blocked operands; `Any` for [`BlockSpec::any`] (left in HBM, whole).
    pub(crate) space: MemorySpace,
    /// [`BlockSpec::buffered`]'s depth and where it was given.
    pub(crate) buffers: Option<(usize, Loc)>,
    /// [`BlockSpec::padded`]: the array need not be a multiple of the block.
    pub(crate) padded: bool,
    /// [`BlockSpec::element`]'s dims (sorted, deduplicated) and where they were given;
    /// checked against the block when the launch is traced.
    pub(crate) element: Option<(Vec<usize>, Loc)>,
}

impl fmt::Debug for BlockSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BlockSpec({:?}, index map of {} grid indices at {})",
            self.block_shape,
            self.arity.map_or("all".to_string(), |a| a.to_string()),
            self.loc
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
            arity: Some(F::ARITY),
            map: Arc::new(move |grid, _| index_map.call(grid)),
            loc: Loc::caller(),
            squeezed: Vec::new(),
            space: MemorySpace::Vmem,
            buffers: None,
            padded: false,
            element: None,
        }
    }

    /// An operand left in HBM (Pallas' `BlockSpec(memory_space=pl.ANY)`): no blocks and no
    /// pipeline; the kernel gets a ref to the whole array, which it may not load or store,
    /// only copy from or to with `async_copy` (manual DMA).
    #[track_caller]
    pub fn any() -> BlockSpec {
        BlockSpec {
            block_shape: Vec::new(),
            arity: None,
            map: Arc::new(|_, _| Vec::new()),
            loc: Loc::caller(),
            squeezed: Vec::new(),
            space: MemorySpace::Any,
            buffers: None,
            padded: false,
            element: None,
        }
    }

    /// A data-dependent index map (Pallas' scalar-prefetch index maps): `index_map` gets the
    /// grid indices (one per grid axis) and the kernel's scalar-prefetch arrays (in parameter
    /// order), and may read the arrays with `load_scalar`:
    /// `BlockSpec::prefetch([8, 128], |g, p| (p[0].load_scalar([g[0]]), 0))`.
    #[track_caller]
    pub fn prefetch<R: IndexList>(
        block_shape: impl Into<Vec<usize>>,
        index_map: impl Fn(&[Scalar<i32>], &[Prefetch<i32>]) -> R + Send + Sync + 'static,
    ) -> BlockSpec {
        BlockSpec {
            block_shape: block_shape.into(),
            arity: None,
            map: Arc::new(move |grid, prefetch| index_map(grid, prefetch).into_indices()),
            loc: Loc::caller(),
            squeezed: Vec::new(),
            space: MemorySpace::Vmem,
            buffers: None,
            padded: false,
            element: None,
        }
    }

    /// Squeezes block dims (Pallas' `None` in a block shape): each must have block size 1,
    /// and the kernel's ref lacks it (`BlockSpec::new([1, bm, bk], ..).squeeze([0])` hands the
    /// body `[bm, bk]` blocks), while the index map still yields one block index per dim.
    pub fn squeeze(mut self, dims: impl Into<Vec<usize>>) -> BlockSpec {
        let mut dims = dims.into();
        dims.sort_unstable();
        dims.dedup();
        self.squeezed = dims;
        self
    }

    /// How many VMEM buffers the implicit pipeline keeps for this operand (Pallas'
    /// `pipeline_mode=pl.Buffered(n)`): 2 (the default) fetches the next block while the body
    /// works on this one; 1 (Mosaic's `synchronous`) halves the window's VMEM for blocks that
    /// rarely change (weights, a block index constant over the grid) at the cost of no
    /// overlap. Mosaic's pipeline has only these two modes, so other depths are an error at
    /// this call (Pallas TPU refuses them too).
    #[track_caller]
    pub fn buffered(mut self, n: usize) -> BlockSpec {
        self.buffers = Some((n, Loc::caller()));
        self
    }

    /// Lets the array's dims be any size, not only multiples of the block (Pallas' padded
    /// edge blocks): the grid covers the array with `ceil(array / block)` blocks per dim, the
    /// last one sticking out. What a kernel reads past the array's end is unspecified (NaN
    /// for floats and 0 for integers on the interpreter, 0 on the CPU forms, whatever VMEM
    /// holds on a TPU: mask it, e.g. with `load_masked`), and what it writes there is
    /// dropped, never stored into the array.
    pub fn padded(mut self) -> BlockSpec {
        self.padded = true;
        self
    }

    /// Makes the index map's results for `dims` element offsets instead of block indices
    /// (Pallas' `pl.Element`): `BlockSpec::new([8, 128], |i| (i * 4, 0)).element([0])` has
    /// step `i` see rows `4i .. 4i + 8`. Windows may overlap or leave gaps, and the array's
    /// dim need not be a multiple of the block's; an offset must keep the whole block inside
    /// the array (`0 ..= array - block`), checked over the grid when the launch is traced.
    /// Not with `padded()` or `BlockSpec::any()`, nor on squeezed dims (their block size is
    /// 1, so their index already is an element offset): the launch refuses those, naming
    /// this call.
    #[track_caller]
    pub fn element(mut self, dims: impl Into<Vec<usize>>) -> BlockSpec {
        let mut dims = dims.into();
        dims.sort_unstable();
        dims.dedup();
        self.element = Some((dims, Loc::caller()));
        self
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
