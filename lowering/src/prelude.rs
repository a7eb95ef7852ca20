//! What a kernel author imports: `use tessera_lowering::prelude::*;`.

pub use crate::dtype::DType;
pub use crate::trace::DimensionSemantics::{self, Arbitrary, CoreParallel, Parallel};
pub use crate::trace::{
    abs, argmax, argmin, async_copy, ceil, cos, cumsum, dot, dot_general, dot_i8, dot_t, erf, exp,
    floor, fori_loop, full, iota, log, max, maximum, min, minimum, num_programs, prng_random_bits,
    prng_seed, program_id, range, rsqrt, run_scoped, scalar, sigmoid, sin, sqrt, sum, tanh, when,
    where_, while_loop, zeros, zeros_like, AsyncCopy, BlockSpec, DmaSemaphore, DmaSemaphores,
    Element, Float, Int, Launch, Numeric, Prefetch, Ref, RefMut, RefWindow, Scalar, Scratch, Smem,
    Tile, Traced, Vmem,
};
pub use half::{bf16, f16};
