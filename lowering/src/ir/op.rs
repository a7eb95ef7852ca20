//! Operations of the kernel IR. Operands are SSA value ids; result types live in the
//! enclosing [`Func`](super::Func)'s value table.

use super::loc::Loc;
pub use super::op_info::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
use std::fmt;

/// An SSA value, numbered within one function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A constant's value before it is rounded to its result dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Literal {
    pub fn as_f64(self) -> f64 {
        match self {
            Literal::Bool(b) => f64::from(u8::from(b)),
            Literal::Int(i) => i as f64,
            Literal::Float(x) => x,
        }
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Float(x) => write!(f, "{x:?}"),
        }
    }
}

/// A slice start or element index: known at trace time, or an `i32` SSA value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Offset {
    Static(usize),
    Dynamic(ValueId),
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Offset::Static(s) => write!(f, "{s}"),
            Offset::Dynamic(v) => write!(f, "{v}"),
        }
    }
}

/// An async copy `src[src_starts ..][..sizes] -> dst[dst_starts ..][..sizes]` that signals
/// semaphore `sem[sem_index]` (Pallas' `make_async_copy`): `DmaStart` and `DmaWait` carry the
/// same description, as Mosaic's `enqueue_dma`/`wait_dma2` do. Both refs have one dtype; the
/// window is `sizes` in both (each ref's rank).
#[derive(Clone, Debug, PartialEq)]
pub struct DmaCopy {
    pub src: ValueId,
    pub src_starts: Vec<Offset>,
    pub dst: ValueId,
    pub dst_starts: Vec<Offset>,
    pub sizes: Vec<usize>,
    pub sem: ValueId,
    pub sem_index: Offset,
}

impl DmaCopy {
    fn operands(&self) -> Vec<ValueId> {
        let dynamic = |o: &Offset| match o {
            Offset::Dynamic(v) => Some(*v),
            Offset::Static(_) => None,
        };
        std::iter::once(self.src)
            .chain(self.src_starts.iter().filter_map(dynamic))
            .chain(std::iter::once(self.dst))
            .chain(self.dst_starts.iter().filter_map(dynamic))
            .chain(std::iter::once(self.sem))
            .chain(dynamic(&self.sem_index))
            .collect()
    }
}

/// A list of ops with block arguments and the values it yields to its parent.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Region {
    pub args: Vec<ValueId>,
    pub ops: Vec<Operation>,
    pub yields: Vec<ValueId>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub results: Vec<ValueId>,
    pub kind: OpKind,
    pub loc: Loc,
}

/// What an op does. Where the result type cannot be derived from the operands (constants,
/// casts, iota, reshape, broadcast) it is the op's result type in the value table.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// A scalar, or a tile with every element equal to `value`.
    Constant {
        value: Literal,
    },
    /// This grid step's index along `axis` (i32).
    ProgramId {
        axis: usize,
    },
    /// The grid's extent along `axis` (i32).
    NumPrograms {
        axis: usize,
    },
    /// The whole block of a ref.
    Load {
        src: ValueId,
    },
    /// Overwrites the whole block of a ref; the value has the ref's shape and dtype.
    Store {
        dst: ValueId,
        value: ValueId,
    },
    /// Writes `value` into the block of a ref where `mask` is true and leaves the other
    /// elements as they are (Pallas' `pl.store(ref, idx, val, mask=)`); `value` has the
    /// ref's shape and dtype, `mask` is a bool tile of the ref's shape.
    StoreMasked {
        dst: ValueId,
        mask: ValueId,
        value: ValueId,
    },
    /// Seeds the kernel's PRNG (Pallas' `pltpu.prng_seed`) with `i32` scalars; the result
    /// is the key the interpreter and StableHLO forms draw from (`ir::prng`), unused on TPU.
    PrngSeed {
        seeds: Vec<ValueId>,
    },
    /// An `i32` tile of random bits (rank >= 2, as Mosaic draws them) from the PRNG seeded
    /// with `key`; `site` numbers the draw calls of the kernel in trace order.
    PrngRandomBits {
        key: ValueId,
        site: u32,
    },
    /// `src[starts .. starts + sizes]`; sizes are static, starts static or traced.
    LoadSlice {
        src: ValueId,
        starts: Vec<Offset>,
        sizes: Vec<usize>,
    },
    /// `dst[starts .. starts + shape(value)] = value`.
    StoreSlice {
        dst: ValueId,
        starts: Vec<Offset>,
        value: ValueId,
    },
    /// One element of a ref as a scalar (SMEM-style access).
    LoadElement {
        src: ValueId,
        indices: Vec<Offset>,
    },
    StoreElement {
        dst: ValueId,
        indices: Vec<Offset>,
        value: ValueId,
    },
    Unary {
        op: UnaryOp,
        x: ValueId,
    },
    Binary {
        op: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    Compare {
        op: CompareOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    /// `cond ? on_true : on_false`, elementwise; all three have one shape.
    Select {
        cond: ValueId,
        on_true: ValueId,
        on_false: ValueId,
    },
    /// Converts elements to the result dtype (floats to ints truncate toward zero).
    Cast {
        x: ValueId,
    },
    /// `x` (an integer scalar), promised a multiple of `multiple`: what lets libtpu accept it
    /// as a traced VMEM index (Pallas' `pl.multiple_of`; Mosaic's `tpu.assume_multiple`).
    /// The interpreter checks the promise; StableHLO passes `x` through.
    AssumeMultiple {
        x: ValueId,
        multiple: usize,
    },
    /// Reinterprets bits as the result dtype. Of the same width: element by element, same
    /// shape. Of another width (Pallas' `pltpu.bitcast`): packs or unpacks along the
    /// second-minor dim, whose size scales by `from bits / to bits`; rows `p*i .. p*i + p` of
    /// the narrow side share word row `i` of the wide side, row `p*i + k` in bits
    /// `k*narrow .. (k+1)*narrow` (low bits first), for packing `p`.
    Bitcast {
        x: ValueId,
    },
    /// The static window `x[starts[d] .. starts[d] + strides[d] * size[d] : strides[d]]` of a
    /// tile value, `size` being the result shape (StableHLO's `slice`).
    Slice {
        x: ValueId,
        starts: Vec<usize>,
        strides: Vec<usize>,
    },
    /// Tile whose elements are their index along `dim`.
    Iota {
        dim: usize,
    },
    /// StableHLO's broadcast_in_dim: operand dim `i` becomes result dim `dims[i]`; operand
    /// dims are 1 or equal to the result dim. A scalar operand has `dims = []`.
    Broadcast {
        x: ValueId,
        dims: Vec<usize>,
    },
    /// Same elements in row-major order, new shape.
    Reshape {
        x: ValueId,
    },
    /// Result dim `i` is operand dim `perm[i]`.
    Transpose {
        x: ValueId,
        perm: Vec<usize>,
    },
    /// Reduces `axes` (sorted, distinct); `keepdims` leaves them as size-1 dims.
    Reduce {
        op: ReduceOp,
        x: ValueId,
        axes: Vec<usize>,
        keepdims: bool,
    },
    /// Inclusive scan along `axis` (`cumsum`, `cummax`, `cummin`): element `i` along the
    /// axis combines elements `0..=i`. Same type as the operand.
    Scan {
        op: ReduceOp,
        x: ValueId,
        axis: usize,
    },
    /// 2-D matmul `op(lhs) @ op(rhs)` where `op` transposes when asked; products are
    /// accumulated in the result dtype, f32 (see [`dot_accumulator`](super::dot_accumulator)).
    Dot {
        lhs: ValueId,
        rhs: ValueId,
        transpose_lhs: bool,
        transpose_rhs: bool,
    },
    /// Runs one region; both yield values of the op's result types.
    If {
        cond: ValueId,
        then_region: Region,
        else_region: Region,
    },
    /// `for i in lo..hi`: the body's args are `i` then the carried values; it yields the
    /// next carried values. Results are the final carried values.
    Fori {
        lo: ValueId,
        hi: ValueId,
        init: Vec<ValueId>,
        body: Region,
    },
    /// `while cond(carried) { carried = body(carried) }`: `cond`'s args are the carried
    /// values and it yields one `bool` scalar; `body`'s args are the carried values and it
    /// yields the next ones. Results are the final carried values.
    While {
        init: Vec<ValueId>,
        cond: Region,
        body: Region,
    },
    /// Scoped scratch (Pallas' `pl.run_scoped`): `body`'s args are refs allocated for the
    /// region only (VMEM, SMEM or DMA semaphores, contents undefined on entry); it yields the
    /// op's results.
    RunScoped {
        body: Region,
    },
    /// Starts `copy`; its destination may not be read (nor its source written) until the
    /// matching `DmaWait`.
    DmaStart(DmaCopy),
    /// Waits for a started `copy` (same refs, window and semaphore).
    DmaWait(DmaCopy),
}

impl OpKind {
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Constant { .. } => "constant",
            OpKind::ProgramId { .. } => "program_id",
            OpKind::NumPrograms { .. } => "num_programs",
            OpKind::Load { .. } => "load",
            OpKind::Store { .. } => "store",
            OpKind::StoreMasked { .. } => "store_masked",
            OpKind::PrngSeed { .. } => "prng_seed",
            OpKind::PrngRandomBits { .. } => "prng_random_bits",
            OpKind::LoadSlice { .. } => "load_slice",
            OpKind::StoreSlice { .. } => "store_slice",
            OpKind::LoadElement { .. } => "load_element",
            OpKind::StoreElement { .. } => "store_element",
            OpKind::Unary { op, .. } => op.name(),
            OpKind::Binary { op, .. } => op.name(),
            OpKind::Compare { op, .. } => op.name(),
            OpKind::Select { .. } => "select",
            OpKind::Cast { .. } => "cast",
            OpKind::Bitcast { .. } => "bitcast",
            OpKind::Slice { .. } => "slice",
            OpKind::AssumeMultiple { .. } => "multiple_of",
            OpKind::Iota { .. } => "iota",
            OpKind::Broadcast { .. } => "broadcast",
            OpKind::Reshape { .. } => "reshape",
            OpKind::Transpose { .. } => "transpose",
            OpKind::Reduce {
                op: ReduceOp::Sum, ..
            } => "reduce_sum",
            OpKind::Reduce {
                op: ReduceOp::Max, ..
            } => "reduce_max",
            OpKind::Reduce {
                op: ReduceOp::Min, ..
            } => "reduce_min",
            OpKind::Scan {
                op: ReduceOp::Sum, ..
            } => "cumsum",
            OpKind::Scan {
                op: ReduceOp::Max, ..
            } => "cummax",
            OpKind::Scan {
                op: ReduceOp::Min, ..
            } => "cummin",
            OpKind::Dot { .. } => "dot",
            OpKind::If { .. } => "if",
            OpKind::Fori { .. } => "fori",
            OpKind::While { .. } => "while",
            OpKind::RunScoped { .. } => "run_scoped",
            OpKind::DmaStart(_) => "dma_start",
            OpKind::DmaWait(_) => "dma_wait",
        }
    }

    /// The SSA operands, in a fixed order (the order the hash and the printer use).
    pub fn operands(&self) -> Vec<ValueId> {
        fn dynamic(offsets: &[Offset]) -> impl Iterator<Item = ValueId> + '_ {
            offsets.iter().filter_map(|o| match o {
                Offset::Dynamic(v) => Some(*v),
                Offset::Static(_) => None,
            })
        }
        match self {
            OpKind::Constant { .. }
            | OpKind::ProgramId { .. }
            | OpKind::NumPrograms { .. }
            | OpKind::Iota { .. } => vec![],
            OpKind::Load { src } => vec![*src],
            OpKind::Store { dst, value } => vec![*dst, *value],
            OpKind::StoreMasked { dst, mask, value } => vec![*dst, *mask, *value],
            OpKind::PrngSeed { seeds } => seeds.clone(),
            OpKind::PrngRandomBits { key, .. } => vec![*key],
            OpKind::LoadSlice { src, starts, .. } => {
                std::iter::once(*src).chain(dynamic(starts)).collect()
            }
            OpKind::StoreSlice { dst, starts, value } => std::iter::once(*dst)
                .chain(dynamic(starts))
                .chain(std::iter::once(*value))
                .collect(),
            OpKind::LoadElement { src, indices } => {
                std::iter::once(*src).chain(dynamic(indices)).collect()
            }
            OpKind::StoreElement {
                dst,
                indices,
                value,
            } => std::iter::once(*dst)
                .chain(dynamic(indices))
                .chain(std::iter::once(*value))
                .collect(),
            OpKind::Unary { x, .. }
            | OpKind::Cast { x }
            | OpKind::Bitcast { x }
            | OpKind::Slice { x, .. }
            | OpKind::AssumeMultiple { x, .. }
            | OpKind::Broadcast { x, .. }
            | OpKind::Reshape { x }
            | OpKind::Transpose { x, .. }
            | OpKind::Reduce { x, .. }
            | OpKind::Scan { x, .. } => vec![*x],
            OpKind::Binary { lhs, rhs, .. }
            | OpKind::Compare { lhs, rhs, .. }
            | OpKind::Dot { lhs, rhs, .. } => {
                vec![*lhs, *rhs]
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => vec![*cond, *on_true, *on_false],
            OpKind::If { cond, .. } => vec![*cond],
            OpKind::Fori { lo, hi, init, .. } => {
                [*lo, *hi].into_iter().chain(init.iter().copied()).collect()
            }
            OpKind::While { init, .. } => init.clone(),
            OpKind::RunScoped { .. } => vec![],
            OpKind::DmaStart(c) | OpKind::DmaWait(c) => c.operands(),
        }
    }

    pub fn regions(&self) -> Vec<&Region> {
        match self {
            OpKind::If {
                then_region,
                else_region,
                ..
            } => vec![then_region, else_region],
            OpKind::Fori { body, .. } => vec![body],
            OpKind::While { cond, body, .. } => vec![cond, body],
            OpKind::RunScoped { body } => vec![body],
            _ => vec![],
        }
    }

    /// [`OpKind::regions`], for IR-to-IR rewrites.
    pub fn regions_mut(&mut self) -> Vec<&mut Region> {
        match self {
            OpKind::If {
                then_region,
                else_region,
                ..
            } => vec![then_region, else_region],
            OpKind::Fori { body, .. } => vec![body],
            OpKind::While { cond, body, .. } => vec![cond, body],
            OpKind::RunScoped { body } => vec![body],
            _ => vec![],
        }
    }
}
