//! Block refs: `Ref<E>` (an input block), `RefMut<E>` (an output block), `Scratch<E>`
//! (a VMEM/SMEM buffer that persists across grid steps) and `Prefetch<E>` (a whole
//! scalar-prefetch array in SMEM, also handed to index maps). All are `Copy` handles; every
//! method takes `&self` so several closures may use one ref.

use super::builder::{with, Builder, Val};
use super::dma::{DmaSemaphore, RefWindow};
use super::element::Element;
use super::index::{IndexList, IntoIndex};
use super::operand::{broadcast_to, Operand};
use super::value::{Scalar, Tile, Traced};
use crate::ir::{Loc, OpKind, Type};
use std::fmt;
use std::marker::PhantomData;

macro_rules! ref_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<E> {
            pub(crate) v: Val,
            _e: PhantomData<fn() -> E>,
        }
        impl<E> Clone for $name<E> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<E> Copy for $name<E> {}
        impl<E: Element> fmt::Debug for $name<E> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}<{}>({})", stringify!($name), E::DTYPE, self.v.id)
            }
        }
        impl<E: Element> $name<E> {
            pub(crate) fn new(v: Val) -> Self {
                $name { v, _e: PhantomData }
            }

            /// The block shape.
            pub fn shape(&self) -> Vec<usize> {
                with(|b| b.ty(self.v).shape().to_vec())
            }

            /// The whole block.
            #[track_caller]
            pub fn load(&self) -> Tile<E> {
                let loc = Loc::caller();
                Tile::from_val(with(|b| {
                    let ty = b.ty(self.v);
                    let src = b.id(self.v, "load", loc);
                    b.emit1(OpKind::Load { src }, Type::tile(E::DTYPE, ty.shape().to_vec()), loc)
                }))
            }

            /// The whole block where `mask` is true and `other` elsewhere (Pallas'
            /// `pl.load(.., mask=, other=)`): a load and a select, as a VMEM window is always
            /// readable. `mask` and `other` broadcast to the block shape; a mask of another
            /// shape is an error at this line.
            #[track_caller]
            pub fn load_masked(&self, mask: impl Operand<bool>, other: impl Operand<E>) -> Tile<E> {
                let loc = Loc::caller();
                let all = Tile::<E>::from_val(with(|b| {
                    let ty = b.ty(self.v);
                    let src = b.id(self.v, "load_masked", loc);
                    b.emit1(OpKind::Load { src }, Type::tile(E::DTYPE, ty.shape().to_vec()), loc)
                }));
                let (m, o) = with(|b| {
                    let shape = b.ty(self.v).shape().to_vec();
                    let m = mask.operand(b, loc);
                    let o = other.operand(b, loc);
                    (
                        broadcast_to(b, m, &shape, "load_masked", loc),
                        broadcast_to(b, o, &shape, "load_masked", loc),
                    )
                });
                super::shape_ops::select_at(Tile::<bool>::from_val(m), all, Tile::<E>::from_val(o), loc)
            }

            /// `self[starts .. starts + sizes]`: static sizes, starts static or traced.
            #[track_caller]
            pub fn load_slice(&self, starts: impl IndexList, sizes: impl Into<Vec<usize>>) -> Tile<E> {
                let (loc, sizes) = (Loc::caller(), sizes.into());
                Tile::from_val(with(|b| {
                    let starts = offsets(b, starts, "load_slice", loc);
                    let src = b.id(self.v, "load_slice", loc);
                    b.emit1(OpKind::LoadSlice { src, starts, sizes: sizes.clone() }, Type::tile(E::DTYPE, sizes), loc)
                }))
            }

            /// The window `self[starts ..][..sizes]`, as one side of an `async_copy`.
            #[track_caller]
            pub fn at(&self, starts: impl IndexList, sizes: impl Into<Vec<usize>>) -> RefWindow<E> {
                super::dma::window(self.v, starts, sizes.into(), Loc::caller())
            }

            /// The whole ref, as one side of an `async_copy`.
            pub fn all(&self) -> RefWindow<E> {
                super::dma::whole(self.v)
            }

            /// One element as a scalar (the way to read SMEM).
            #[track_caller]
            pub fn load_scalar(&self, indices: impl IndexList) -> Scalar<E> {
                let loc = Loc::caller();
                Scalar::from_val(with(|b| {
                    let indices = offsets(b, indices, "load_element", loc);
                    let src = b.id(self.v, "load_element", loc);
                    b.emit1(OpKind::LoadElement { src, indices }, Type::scalar(E::DTYPE), loc)
                }))
            }
        }
    };
}

macro_rules! writable {
    ($name:ident) => {
        impl<E: Element> $name<E> {
            /// Overwrites the whole block; `value` broadcasts to the block shape (so a
            /// literal or `zeros()` fills it).
            #[track_caller]
            pub fn store(&self, value: impl Operand<E>) {
                let loc = Loc::caller();
                with(|b| {
                    let shape = b.ty(self.v).shape().to_vec();
                    let v = value.operand(b, loc);
                    let v = broadcast_to(b, v, &shape, "store", loc);
                    let kind = OpKind::Store {
                        dst: b.id(self.v, "store", loc),
                        value: b.id(v, "store", loc),
                    };
                    b.emit(kind, vec![], loc);
                })
            }

            /// Writes `value` only where `mask` is true (Pallas' `pl.store(.., mask=)`); the
            /// other elements keep what the block holds. `mask` and `value` broadcast to the
            /// block shape; a mask of another shape is an error at this line (its dtype is
            /// `bool` by type).
            #[track_caller]
            pub fn store_masked(&self, mask: impl Operand<bool>, value: impl Operand<E>) {
                let loc = Loc::caller();
                with(|b| {
                    let shape = b.ty(self.v).shape().to_vec();
                    let m = mask.operand(b, loc);
                    let m = broadcast_to(b, m, &shape, "store_masked", loc);
                    let v = value.operand(b, loc);
                    let v = broadcast_to(b, v, &shape, "store_masked", loc);
                    let kind = OpKind::StoreMasked {
                        dst: b.id(self.v, "store_masked", loc),
                        mask: b.id(m, "store_masked", loc),
                        value: b.id(v, "store_masked", loc),
                    };
                    b.emit(kind, vec![], loc);
                })
            }

            /// `self[starts .. starts + shape(value)] = value`.
            #[track_caller]
            pub fn store_slice(&self, starts: impl IndexList, value: Tile<E>) {
                let loc = Loc::caller();
                with(|b| {
                    let starts = offsets(b, starts, "store_slice", loc);
                    let kind = OpKind::StoreSlice {
                        dst: b.id(self.v, "store_slice", loc),
                        starts,
                        value: b.id(value.v, "store_slice", loc),
                    };
                    b.emit(kind, vec![], loc);
                })
            }

            /// Writes one element.
            #[track_caller]
            pub fn store_scalar(&self, indices: impl IndexList, value: impl Operand<E>) {
                let loc = Loc::caller();
                with(|b| {
                    let indices = offsets(b, indices, "store_element", loc);
                    let v = value.operand(b, loc);
                    let kind = OpKind::StoreElement {
                        dst: b.id(self.v, "store_element", loc),
                        indices,
                        value: b.id(v, "store_element", loc),
                    };
                    b.emit(kind, vec![], loc);
                })
            }
        }
    };
}

fn offsets(
    b: &mut Builder,
    list: impl IndexList,
    op: &'static str,
    loc: Loc,
) -> Vec<crate::ir::Offset> {
    list.into_indices()
        .into_iter()
        .map(|i| i.to_offset(b, op, loc))
        .collect()
}

ref_type!(
    /// An input block (read-only).
    Ref
);
ref_type!(
    /// An output block.
    RefMut
);
ref_type!(
    /// A scratch buffer (VMEM or SMEM, as the launch says); it keeps its contents across
    /// grid steps, which is what makes accumulators work.
    Scratch
);
writable!(RefMut);
writable!(Scratch);

impl Scratch<i32> {
    /// Semaphore `index` of a DMA semaphore array (scratch `DmaSemaphores::new(n)`), for
    /// `async_copy`. An index beyond the array is reported at this line (static) or by the
    /// interpreter (traced).
    #[track_caller]
    pub fn sem(&self, index: impl IntoIndex) -> DmaSemaphore {
        super::dma::semaphore(self.v, index, Loc::caller())
    }
}
ref_type!(
    /// A scalar-prefetch array: the whole array, in SMEM, filled before the grid runs (Pallas'
    /// `PrefetchScalarGridSpec`). Read elements with `load_scalar`, in the body or in an index
    /// map given to [`BlockSpec::prefetch`](super::BlockSpec::prefetch).
    Prefetch
);

/// Element types a scalar-prefetch array may have: SMEM holds 32-bit words, and Mosaic
/// prefetches `i32` arrays.
#[diagnostic::on_unimplemented(
    message = "a scalar-prefetch array holds `i32`, not `{Self}`",
    label = "scalar prefetch takes `i32` arrays (block indices, offsets, lengths)",
    note = "pass floats as a blocked input (`&Ref<E>`) instead"
)]
pub trait PrefetchElement: Element {}
impl PrefetchElement for i32 {}
