//! Manual DMA (Pallas' `pltpu.make_async_copy`): a window of one ref copied into a window
//! of another, signalling a DMA semaphore. HBM operands (`BlockSpec::any()`) are reached
//! this way only.
//!
//! ```text
//! let copy = async_copy(x_hbm.at((row, 0), [8, 128]), buf.at((0, 0), [8, 128]), sems.sem(0));
//! copy.start();
//! copy.wait();            // now `buf` may be read
//! ```

use super::builder::{with, Builder, Val};
use super::element::Element;
use super::index::{IndexList, IntoIndex};
use crate::ir::{DmaCopy, Loc, Offset, OpKind};

/// `ref[starts ..][..sizes]`, one side of a DMA (from `.at(..)` on any ref).
#[derive(Clone, Debug)]
pub struct RefWindow<E> {
    pub(crate) v: Val,
    pub(crate) starts: Vec<Offset>,
    pub(crate) sizes: Vec<usize>,
    pub(crate) _e: std::marker::PhantomData<fn() -> E>,
}

/// One semaphore of a DMA semaphore array (`sems.sem(i)` on a `DmaSemaphores` scratch).
#[derive(Clone, Copy, Debug)]
pub struct DmaSemaphore {
    pub(crate) v: Val,
    pub(crate) index: Offset,
}

/// A described copy; `start()` issues it and `wait()` waits for it (the same descriptor, or
/// one built the same way, as Pallas does).
#[derive(Clone, Debug)]
#[must_use = "a copy does nothing until `.start()`"]
pub struct AsyncCopy<E> {
    copy: Option<DmaCopy>,
    _e: std::marker::PhantomData<fn() -> E>,
}

pub(crate) fn window<E>(
    v: Val,
    starts: impl IndexList,
    sizes: Vec<usize>,
    loc: Loc,
) -> RefWindow<E> {
    let starts = with(|b| {
        starts
            .into_indices()
            .into_iter()
            .map(|i| i.to_offset(b, "async_copy", loc))
            .collect()
    });
    RefWindow {
        v,
        starts,
        sizes,
        _e: std::marker::PhantomData,
    }
}

pub(crate) fn whole<E>(v: Val) -> RefWindow<E> {
    let shape = with(|b| b.ty(v).shape().to_vec());
    RefWindow {
        v,
        starts: vec![Offset::Static(0); shape.len()],
        sizes: shape,
        _e: std::marker::PhantomData,
    }
}

pub(crate) fn semaphore(v: Val, index: impl IntoIndex, loc: Loc) -> DmaSemaphore {
    let index = with(|b| index.into_index().to_offset(b, "async_copy", loc));
    DmaSemaphore { v, index }
}

/// Describes a copy of `src` into `dst` (windows of one element type and one shape) that
/// signals `sem`. Misuse (shapes that differ, a wait on a copy never started, a second wait,
/// a read of the destination before the wait) is reported at the user's line.
#[track_caller]
pub fn async_copy<E: Element>(
    src: RefWindow<E>,
    dst: RefWindow<E>,
    sem: DmaSemaphore,
) -> AsyncCopy<E> {
    let loc = Loc::caller();
    let copy = with(|b: &mut Builder| {
        if src.sizes != dst.sizes {
            b.op_error(
                "async_copy",
                format!(
                    "copies a window of {:?} into a window of {:?}: a DMA copies one shape",
                    src.sizes, dst.sizes
                ),
                loc,
            );
            return None;
        }
        Some(DmaCopy {
            src: b.id(src.v, "async_copy", loc),
            src_starts: src.starts,
            dst: b.id(dst.v, "async_copy", loc),
            dst_starts: dst.starts,
            sizes: src.sizes,
            sem: b.id(sem.v, "async_copy", loc),
            sem_index: sem.index,
        })
    });
    AsyncCopy {
        copy,
        _e: std::marker::PhantomData,
    }
}

impl<E: Element> AsyncCopy<E> {
    /// Issues the copy (`tpu.enqueue_dma`).
    #[track_caller]
    pub fn start(&self) {
        self.emit(true, Loc::caller());
    }

    /// Waits until the copy is done (`tpu.wait_dma2`); only then may its destination be read.
    #[track_caller]
    pub fn wait(&self) {
        self.emit(false, Loc::caller());
    }

    fn emit(&self, start: bool, loc: Loc) {
        // A copy that failed to describe itself was reported at `async_copy`.
        let Some(c) = self.copy.clone() else { return };
        let kind = if start {
            OpKind::DmaStart(c)
        } else {
            OpKind::DmaWait(c)
        };
        with(|b| {
            b.emit(kind, vec![], loc);
        });
    }
}
