//! Manual DMA: `DmaStart`/`DmaWait` as Mosaic's `tpu.enqueue_dma`/`tpu.wait_dma2`, on
//! `tpu.memref_slice` windows of the two refs and one semaphore of a semaphore array
//! (`tpu.memref_slice` + `tpu.memref_squeeze`), as Pallas' `dma_start`/`dma_wait` lowering
//! emits them (jax 0.10.2; `tools/pallas_structure.py --dma` shows the Pallas module).

use super::body::{unsupported, Lower};
use super::error::MosaicError;
use super::printer::{Flavor, V};
use super::types::memref;
use crate::dtype::DType;
use crate::ir::{DmaCopy, MemorySpace, Offset, Operation, Type, ValueId};

impl Lower<'_> {
    pub(super) fn dma(
        &mut self,
        op: &Operation,
        c: &DmaCopy,
        start: bool,
    ) -> Result<(), MosaicError> {
        let src = self.window(op, c.src, &c.src_starts, &c.sizes)?;
        let dst = self.window(op, c.dst, &c.dst_starts, &c.sizes)?;
        let sem = self.semaphore(op, c)?;
        if start {
            // Segments: source, source_semaphore, target, target_semaphore, device_id,
            // core_id, and (the current dialect only) priority; the serialized form is
            // version 11's six segments, which Mosaic's deserializer upgrades (as in the
            // bytes Pallas emits).
            let segments = match self.p.flavor() {
                Flavor::Serialized => "1, 0, 1, 1, 0, 0",
                Flavor::Readable => "1, 0, 1, 1, 0, 0, 0",
            };
            let attrs = format!(
                "operandSegmentSizes = array<i32: {segments}>, priority = 0 : i32, strict_ordering = false"
            );
            self.p
                .op("tpu.enqueue_dma", &[&src, &dst, &sem], &attrs, &[]);
        } else {
            // Segments: semaphore, src, dst, device_id, core_id.
            let attrs = "operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>, strict_ordering = false";
            self.p.op("tpu.wait_dma2", &[&sem, &src, &dst], attrs, &[]);
        }
        Ok(())
    }

    /// `r` itself when the window is the whole ref, else its `tpu.memref_slice`.
    fn window(
        &mut self,
        op: &Operation,
        r: ValueId,
        starts: &[Offset],
        sizes: &[usize],
    ) -> Result<V, MosaicError> {
        let Type::Ref {
            dtype,
            shape,
            space,
        } = self.ty(r).clone()
        else {
            return Err(unsupported(op, format!("DMA of a non-ref {r}")));
        };
        if self.is_squeezed(r) {
            return Err(unsupported(
                op,
                "a DMA into or out of a block with squeezed dims; give the block its size-1 dims"
                    .into(),
            ));
        }
        let v = self.val(r, op)?;
        let whole = sizes == shape.as_slice() && starts.iter().all(|s| *s == Offset::Static(0));
        if whole {
            return Ok(v);
        }
        self.slice(op, &v, starts, memref(dtype, sizes, space))
    }

    /// The `index`-th semaphore of the array, as a rank-0 semaphore memref.
    fn semaphore(&mut self, op: &Operation, c: &DmaCopy) -> Result<V, MosaicError> {
        let sems = self.val(c.sem, op)?;
        let one = self.slice(
            op,
            &sems,
            std::slice::from_ref(&c.sem_index),
            memref(DType::I32, &[1], MemorySpace::Semaphore),
        )?;
        let ty = memref(DType::I32, &[], MemorySpace::Semaphore);
        Ok(self.p.op1("tpu.memref_squeeze", &[&one], "", ty))
    }

    /// `tpu.memref_slice` at `i32` starts (what Mosaic's slice takes, not `index`).
    fn slice(
        &mut self,
        op: &Operation,
        r: &V,
        starts: &[Offset],
        ty: String,
    ) -> Result<V, MosaicError> {
        let mut idx = Vec::with_capacity(starts.len());
        for s in starts {
            idx.push(match s {
                Offset::Static(s) => self.p.op1(
                    "arith.constant",
                    &[],
                    &format!("value = {s} : i32"),
                    "i32".into(),
                ),
                Offset::Dynamic(v) => self.val(*v, op)?,
            });
        }
        let mut operands = vec![r];
        operands.extend(idx.iter());
        let attrs = format!("operandSegmentSizes = array<i32: 1, {}, 0>", idx.len());
        Ok(self.p.op1("tpu.memref_slice", &operands, &attrs, ty))
    }
}
