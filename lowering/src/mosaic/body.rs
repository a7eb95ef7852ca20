//! Lowers an IR function's ops (kernel body or index map) to Mosaic ops, one IR op at a
//! time: memory and control flow here, arithmetic in `elementwise.rs`, shapes in `shape.rs`.

use super::error::MosaicError;
use super::printer::{Printer, V};
use super::types::{literal, mlir_type, vector};
use crate::dtype::DType;
use crate::ir::{Func, Literal, MemorySpace, Offset, OpKind, Operation, Region, Type, ValueId};
use std::collections::HashMap;

/// Lowering state of one function: the printer and the Mosaic value of each IR value.
pub(crate) struct Lower<'a> {
    pub p: &'a mut Printer,
    pub func: &'a Func,
    /// Grid extents (for `num_programs`) and the grid index values (for `program_id`).
    pub grid: &'a [usize],
    pub grid_args: &'a [V],
    vals: HashMap<ValueId, V>,
    /// Refs whose memref keeps dims the IR ref lacks (squeezed block dims, size 1).
    squeezed: HashMap<ValueId, Vec<usize>>,
}

impl<'a> Lower<'a> {
    pub fn new(
        p: &'a mut Printer,
        func: &'a Func,
        grid: &'a [usize],
        grid_args: &'a [V],
    ) -> Lower<'a> {
        Lower {
            p,
            func,
            grid,
            grid_args,
            vals: HashMap::new(),
            squeezed: HashMap::new(),
        }
    }

    /// Marks `r`'s memref as having size-1 dims at `dims` (sorted) that its IR type lacks.
    pub fn squeeze(&mut self, r: ValueId, dims: Vec<usize>) {
        self.squeezed.insert(r, dims);
    }

    pub fn is_squeezed(&self, r: ValueId) -> bool {
        self.squeezed.contains_key(&r)
    }

    /// `shape` and `offsets` of an access to `r` as its memref sees them (squeezed dims back,
    /// at offset 0); whole-block accesses (no offsets) stay without offsets.
    fn unsqueezed(
        &self,
        r: ValueId,
        shape: &[usize],
        offsets: &[Offset],
    ) -> (Vec<usize>, Vec<Offset>) {
        let Some(dims) = self.squeezed.get(&r) else {
            return (shape.to_vec(), offsets.to_vec());
        };
        let mut shape = shape.to_vec();
        let mut offsets = offsets.to_vec();
        for &d in dims {
            shape.insert(d, 1);
            if !offsets.is_empty() {
                offsets.insert(d, Offset::Static(0));
            }
        }
        (shape, offsets)
    }

    /// `v` (of `shape`) shape-cast to `to` where they differ.
    fn cast_shape(&mut self, v: V, dtype: DType, shape: &[usize], to: &[usize]) -> V {
        if shape == to {
            return v;
        }
        self.p
            .op1("vector.shape_cast", &[&v], "", vector(dtype, to))
    }

    /// Binds IR values (function params, region args) to printed values.
    pub fn bind(&mut self, ids: &[ValueId], vs: &[V]) {
        for (id, v) in ids.iter().zip(vs) {
            self.vals.insert(*id, v.clone());
        }
    }

    /// A fresh printed value for each IR value, of its type (block arguments).
    pub fn fresh_args(&mut self, ids: &[ValueId]) -> Vec<V> {
        ids.iter()
            .map(|id| self.p.fresh(mlir_type(self.func.ty(*id))))
            .collect()
    }

    pub fn ty(&self, id: ValueId) -> &'a Type {
        self.func.ty(id)
    }

    /// The printed value of an IR value. The IR is verified, so every operand is bound
    /// before use; a miss is an internal error reported at the op.
    pub fn val(&self, id: ValueId, op: &Operation) -> Result<V, MosaicError> {
        self.vals.get(&id).cloned().ok_or_else(|| {
            unsupported(
                op,
                format!("operand {id} is not defined before use (unverified IR?)"),
            )
        })
    }

    pub fn region_ops(&mut self, region: &Region) -> Result<Vec<V>, MosaicError> {
        for op in &region.ops {
            // Every Mosaic op printed for `op` (its regions' ops have their own) names the
            // user's line, so libtpu's diagnostics do.
            let outer = self.p.set_loc(Some(op.loc));
            let lowered = self.op(op);
            self.p.set_loc(outer);
            lowered?;
        }
        region
            .yields
            .iter()
            .map(|y| {
                self.vals
                    .get(y)
                    .cloned()
                    .ok_or_else(|| MosaicError::Unsupported {
                        op: "yield",
                        reason: format!("{y} is not defined"),
                        loc: self.func.loc,
                    })
            })
            .collect()
    }

    fn op(&mut self, op: &Operation) -> Result<(), MosaicError> {
        let results: Vec<V> = match &op.kind {
            OpKind::Constant { value } => {
                let (dtype, shape) = self.value_type(op.results.first().copied(), op)?;
                vec![self.constant(*value, dtype, &shape)]
            }
            OpKind::ProgramId { axis } => match self.grid_args.get(*axis) {
                Some(v) => vec![v.clone()],
                None => {
                    return Err(unsupported(
                        op,
                        format!("grid axis {axis} outside the grid {:?}", self.grid),
                    ))
                }
            },
            OpKind::NumPrograms { axis } => match self.grid.get(*axis) {
                Some(&n) => vec![self.constant(Literal::Int(n as i64), DType::I32, &[])],
                None => {
                    return Err(unsupported(
                        op,
                        format!("grid axis {axis} outside the grid {:?}", self.grid),
                    ))
                }
            },
            OpKind::Load { src } => vec![self.load(op, *src, &[], None)?],
            OpKind::LoadSlice { src, starts, sizes } => {
                vec![self.load(op, *src, starts, Some(sizes))?]
            }
            OpKind::Store { dst, value } => {
                self.store(op, *dst, &[], *value).map(|()| Vec::new())?
            }
            OpKind::StoreSlice { dst, starts, value } => {
                self.store(op, *dst, starts, *value).map(|()| Vec::new())?
            }
            // The TPU's hardware PRNG, as Pallas' `prng_seed` / `prng_random_bits` lower;
            // the key (the interpreter's and StableHLO's generator state) is unused here.
            OpKind::PrngSeed { seeds } => {
                let seeds = seeds
                    .iter()
                    .map(|s| self.val(*s, op))
                    .collect::<Result<Vec<V>, _>>()?;
                let refs: Vec<&V> = seeds.iter().collect();
                self.p.op("tpu.prng_set_seed_32", &refs, "", &[]);
                vec![self.constant(Literal::Int(0), DType::I32, &[])]
            }
            OpKind::PrngRandomBits { .. } => {
                let (dtype, shape) = self.value_type(op.results.first().copied(), op)?;
                vec![self
                    .p
                    .op1("tpu.prng_random_bits", &[], "", vector(dtype, &shape))]
            }
            OpKind::StoreMasked { dst, mask, value } => self
                .store_masked(op, *dst, *mask, *value)
                .map(|()| Vec::new())?,
            OpKind::LoadElement { src, indices } => vec![self.load_element(op, *src, indices)?],
            OpKind::StoreElement {
                dst,
                indices,
                value,
            } => self
                .store_element(op, *dst, indices, *value)
                .map(|()| Vec::new())?,
            OpKind::Unary { op: u, x } => vec![self.unary(op, *u, *x)?],
            OpKind::Binary { op: b, lhs, rhs } => vec![self.binary(op, *b, *lhs, *rhs)?],
            OpKind::Compare { op: c, lhs, rhs } => vec![self.compare(op, *c, *lhs, *rhs)?],
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => {
                let (c, t, f) = (
                    self.val(*cond, op)?,
                    self.val(*on_true, op)?,
                    self.val(*on_false, op)?,
                );
                let ty = t.ty.clone();
                vec![self.p.op1("arith.select", &[&c, &t, &f], "", ty)]
            }
            OpKind::Cast { x } => vec![self.cast_op(op, *x)?],
            // As Pallas' `pl.multiple_of`: the promise libtpu's alignment proofs use.
            OpKind::AssumeMultiple { x, multiple } => {
                let v = self.val(*x, op)?;
                let ty = v.ty.clone();
                let attrs = format!("multiple = {multiple} : i32");
                vec![self.p.op1("tpu.assume_multiple", &[&v], &attrs, ty)]
            }
            OpKind::Bitcast { x } => {
                let (to, shape) = self.value_type(op.results.first().copied(), op)?;
                let v = self.val(*x, op)?;
                // Vectors through `tpu.bitcast`, scalars through `arith.bitcast` (as Pallas).
                let name = if shape.is_empty() {
                    "arith.bitcast"
                } else {
                    "tpu.bitcast"
                };
                vec![self.p.op1(name, &[&v], "", vector(to, &shape))]
            }
            OpKind::Iota { dim } => vec![self.iota(op, *dim)?],
            OpKind::Broadcast { x, dims } => vec![self.broadcast(op, *x, dims)?],
            OpKind::Reshape { x } => vec![self.reshape(op, *x)?],
            OpKind::Transpose { x, perm } => vec![self.transpose(op, *x, perm)?],
            OpKind::Slice { x, starts, strides } => {
                vec![self.slice_value(op, *x, starts, strides)?]
            }
            OpKind::Reduce { op: r, x, axes, .. } => vec![self.reduce(op, *r, *x, axes)?],
            OpKind::Scan { op: r, x, axis } => vec![self.scan(op, *r, *x, *axis)?],
            OpKind::Dot {
                lhs,
                rhs,
                transpose_lhs,
                transpose_rhs,
            } => {
                vec![self.dot(op, *lhs, *rhs, *transpose_lhs, *transpose_rhs)?]
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => self.if_op(op, *cond, then_region, else_region)?,
            OpKind::Fori { lo, hi, init, body } => self.fori(op, *lo, *hi, init, body)?,
            OpKind::While { init, cond, body } => self.while_op(op, init, cond, body)?,
            OpKind::RunScoped { body } => self.run_scoped(op, body)?,
            OpKind::DmaStart(c) => self.dma(op, c, true).map(|()| Vec::new())?,
            OpKind::DmaWait(c) => self.dma(op, c, false).map(|()| Vec::new())?,
        };
        if results.len() != op.results.len() {
            return Err(unsupported(
                op,
                format!(
                    "lowered to {} results, the IR has {}",
                    results.len(),
                    op.results.len()
                ),
            ));
        }
        self.bind(&op.results, &results);
        Ok(())
    }

    /// Dtype and shape of a value-typed IR value.
    pub fn value_type(
        &self,
        id: Option<ValueId>,
        op: &Operation,
    ) -> Result<(DType, Vec<usize>), MosaicError> {
        match id.map(|id| self.ty(id)) {
            Some(Type::Value { dtype, shape }) => Ok((*dtype, shape.clone())),
            _ => Err(unsupported(op, "expected a value result".into())),
        }
    }

    /// `arith.constant`: a scalar, or a splat `dense<..>` vector.
    pub fn constant(&mut self, value: Literal, dtype: DType, shape: &[usize]) -> V {
        let ty = vector(dtype, shape);
        let lit = literal(value, dtype);
        let attr = if shape.is_empty() {
            format!("value = {lit} : {ty}")
        } else {
            format!("value = dense<{lit}> : {ty}")
        };
        self.p.op1("arith.constant", &[], &attr, ty)
    }

    fn index_const(&mut self, n: usize) -> V {
        self.p.op1(
            "arith.constant",
            &[],
            &format!("value = {n} : index"),
            "index".into(),
        )
    }

    /// Slice starts and element indices as `index` values.
    fn indices(
        &mut self,
        op: &Operation,
        offsets: &[Offset],
        rank: usize,
    ) -> Result<Vec<V>, MosaicError> {
        if offsets.is_empty() {
            // Whole-block access: one zero, shared by every dim (as Pallas does).
            let zero = self.index_const(0);
            return Ok(vec![zero; rank]);
        }
        offsets
            .iter()
            .map(|o| match o {
                Offset::Static(n) => Ok(self.index_const(*n)),
                Offset::Dynamic(v) => {
                    let v = self.val(*v, op)?;
                    Ok(self.p.op1("arith.index_cast", &[&v], "", "index".into()))
                }
            })
            .collect()
    }

    fn ref_type(
        &self,
        op: &Operation,
        r: ValueId,
    ) -> Result<(DType, Vec<usize>, MemorySpace), MosaicError> {
        match self.ty(r) {
            Type::Ref {
                dtype,
                shape,
                space,
            } => Ok((*dtype, shape.clone(), *space)),
            other => Err(unsupported(op, format!("expected a ref, got {other}"))),
        }
    }

    /// `vector.load` of the whole block or of a slice (`sizes`). VMEM only: SMEM holds scalars.
    fn load(
        &mut self,
        op: &Operation,
        src: ValueId,
        starts: &[Offset],
        sizes: Option<&Vec<usize>>,
    ) -> Result<V, MosaicError> {
        let (dtype, shape, space) = self.ref_type(op, src)?;
        let r = self.val(src, op)?;
        if space == MemorySpace::Smem && shape.is_empty() {
            return Ok(self.p.op1("memref.load", &[&r], "", vector(dtype, &[])));
        }
        vector_memory(op, space, &shape)?;
        let sizes = sizes.cloned().unwrap_or_else(|| shape.clone());
        let (full, starts) = self.unsqueezed(src, &shape, starts);
        let (full_sizes, _) = self.unsqueezed(src, &sizes, &[]);
        let idx = self.indices(op, &starts, full.len())?;
        let mut operands = vec![&r];
        operands.extend(idx.iter());
        let v = self
            .p
            .op1("vector.load", &operands, "", vector(dtype, &full_sizes));
        Ok(self.cast_shape(v, dtype, &full_sizes, &sizes))
    }

    fn store(
        &mut self,
        op: &Operation,
        dst: ValueId,
        starts: &[Offset],
        value: ValueId,
    ) -> Result<(), MosaicError> {
        let (dtype, shape, space) = self.ref_type(op, dst)?;
        let (r, v) = (self.val(dst, op)?, self.val(value, op)?);
        if space == MemorySpace::Smem && shape.is_empty() {
            self.p.op("memref.store", &[&v, &r], "", &[]);
            return Ok(());
        }
        vector_memory(op, space, &shape)?;
        let (full, starts) = self.unsqueezed(dst, &shape, starts);
        let value_shape = self.ty(value).shape().to_vec();
        let (full_value, _) = self.unsqueezed(dst, &value_shape, &[]);
        let v = self.cast_shape(v, dtype, &value_shape, &full_value);
        let idx = self.indices(op, &starts, full.len())?;
        let mut operands = vec![&v, &r];
        operands.extend(idx.iter());
        self.p.op("vector.store", &operands, "", &[]);
        Ok(())
    }

    /// A masked `tpu.vector_store` of the whole block, as Pallas lowers `pl.store(..,
    /// mask=)`. Mosaic's masked store takes 32-bit data only (Pallas refuses other widths);
    /// for those the block is loaded, merged with `arith.select` and stored whole, which is
    /// the same within a grid step (the window belongs to this step).
    fn store_masked(
        &mut self,
        op: &Operation,
        dst: ValueId,
        mask: ValueId,
        value: ValueId,
    ) -> Result<(), MosaicError> {
        let (dtype, shape, space) = self.ref_type(op, dst)?;
        vector_memory(op, space, &shape)?;
        let (r, m, v) = (
            self.val(dst, op)?,
            self.val(mask, op)?,
            self.val(value, op)?,
        );
        let (full, _) = self.unsqueezed(dst, &shape, &[]);
        let idx = self.indices(op, &[], full.len())?;
        if dtype.bits() != 32 {
            let old = self.load(op, dst, &[], None)?;
            let merged = self
                .p
                .op1("arith.select", &[&m, &v, &old], "", vector(dtype, &shape));
            let merged = self.cast_shape(merged, dtype, &shape, &full);
            let mut operands = vec![&merged, &r];
            operands.extend(idx.iter());
            self.p.op("vector.store", &operands, "", &[]);
            return Ok(());
        }
        let v = self.cast_shape(v, dtype, &shape, &full);
        let m = self.cast_shape(m, DType::Bool, &shape, &full);
        let mut operands = vec![&v, &r];
        operands.extend(idx.iter());
        operands.push(&m);
        let attrs = format!(
            "operandSegmentSizes = array<i32: 1, 1, {}, 1>, strides = array<i32>",
            idx.len()
        );
        self.p.op("tpu.vector_store", &operands, &attrs, &[]);
        Ok(())
    }

    /// SMEM: `memref.load`. VMEM: a 1x..x1 `vector.load` and `vector.extract` (Mosaic has
    /// no scalar loads from VMEM).
    fn load_element(
        &mut self,
        op: &Operation,
        src: ValueId,
        indices: &[Offset],
    ) -> Result<V, MosaicError> {
        let (dtype, shape, space) = self.ref_type(op, src)?;
        let (shape, indices) = self.unsqueezed(src, &shape, indices);
        let r = self.val(src, op)?;
        let idx = self.indices(op, &indices, shape.len())?;
        let mut operands = vec![&r];
        operands.extend(idx.iter());
        if space == MemorySpace::Smem {
            return Ok(self.p.op1("memref.load", &operands, "", vector(dtype, &[])));
        }
        vector_memory(op, space, &shape)?;
        let ones = vec![1; shape.len()];
        let one = self
            .p
            .op1("vector.load", &operands, "", vector(dtype, &ones));
        Ok(self.extract_scalar(&one, dtype, ones.len()))
    }

    fn store_element(
        &mut self,
        op: &Operation,
        dst: ValueId,
        indices: &[Offset],
        value: ValueId,
    ) -> Result<(), MosaicError> {
        let (dtype, shape, space) = self.ref_type(op, dst)?;
        let (shape, indices) = self.unsqueezed(dst, &shape, indices);
        let (r, v) = (self.val(dst, op)?, self.val(value, op)?);
        let idx = self.indices(op, &indices, shape.len())?;
        if space == MemorySpace::Smem {
            let mut operands = vec![&v, &r];
            operands.extend(idx.iter());
            self.p.op("memref.store", &operands, "", &[]);
            return Ok(());
        }
        vector_memory(op, space, &shape)?;
        let one = self.p.op1(
            "vector.broadcast",
            &[&v],
            "",
            vector(dtype, &vec![1; shape.len()]),
        );
        let mut operands = vec![&one, &r];
        operands.extend(idx.iter());
        self.p.op("vector.store", &operands, "", &[]);
        Ok(())
    }

    /// The only element of a 1x..x1 vector of rank `rank`.
    pub fn extract_scalar(&mut self, v: &V, dtype: DType, rank: usize) -> V {
        let pos = super::types::dense_array("i64", &vec![0; rank]);
        self.p.op1(
            "vector.extract",
            &[v],
            &format!("static_position = {pos}"),
            vector(dtype, &[]),
        )
    }

    /// `scf.if` with both regions yielding the op's results.
    fn if_op(
        &mut self,
        op: &Operation,
        cond: ValueId,
        then_region: &Region,
        else_region: &Region,
    ) -> Result<Vec<V>, MosaicError> {
        let c = self.val(cond, op)?;
        let results: Vec<String> = op.results.iter().map(|r| mlir_type(self.ty(*r))).collect();
        let mut regions = Vec::new();
        for region in [then_region, else_region] {
            self.p.begin_block(&[]);
            let ys = self.region_ops(region)?;
            let refs: Vec<&V> = ys.iter().collect();
            self.p.op("scf.yield", &refs, "", &[]);
            regions.push(self.p.end_block());
        }
        Ok(self
            .p
            .op_with_regions("scf.if", &[&c], "", &results, regions))
    }

    /// `scf.for` over i32 bounds with step 1; the body's args are the counter and the
    /// carried values, as in the IR.
    fn fori(
        &mut self,
        op: &Operation,
        lo: ValueId,
        hi: ValueId,
        init: &[ValueId],
        body: &Region,
    ) -> Result<Vec<V>, MosaicError> {
        let (l, h) = (self.val(lo, op)?, self.val(hi, op)?);
        let step = self.constant(Literal::Int(1), DType::I32, &[]);
        let inits = init
            .iter()
            .map(|v| self.val(*v, op))
            .collect::<Result<Vec<_>, _>>()?;
        let args = self.fresh_args(&body.args);
        self.bind(&body.args, &args);
        self.p.begin_block(&args);
        let ys = self.region_ops(body)?;
        let refs: Vec<&V> = ys.iter().collect();
        self.p.op("scf.yield", &refs, "", &[]);
        let region = self.p.end_block();
        let mut operands = vec![&l, &h, &step];
        operands.extend(inits.iter());
        let results: Vec<String> = op.results.iter().map(|r| mlir_type(self.ty(*r))).collect();
        Ok(self
            .p
            .op_with_regions("scf.for", &operands, "", &results, vec![region]))
    }

    /// `scf.while`: the `before` region computes the condition from the carried values and
    /// passes them on unchanged (`scf.condition`), the `after` region is the body.
    fn while_op(
        &mut self,
        op: &Operation,
        init: &[ValueId],
        cond: &Region,
        body: &Region,
    ) -> Result<Vec<V>, MosaicError> {
        let inits = init
            .iter()
            .map(|v| self.val(*v, op))
            .collect::<Result<Vec<_>, _>>()?;
        let args = self.fresh_args(&cond.args);
        self.bind(&cond.args, &args);
        self.p.begin_block(&args);
        let c = self.region_ops(cond)?;
        let mut operands: Vec<&V> = c.iter().take(1).collect();
        operands.extend(args.iter());
        self.p.op("scf.condition", &operands, "", &[]);
        let before = self.p.end_block();
        let args = self.fresh_args(&body.args);
        self.bind(&body.args, &args);
        self.p.begin_block(&args);
        let ys = self.region_ops(body)?;
        let refs: Vec<&V> = ys.iter().collect();
        self.p.op("scf.yield", &refs, "", &[]);
        let after = self.p.end_block();
        let operands: Vec<&V> = inits.iter().collect();
        let results: Vec<String> = op.results.iter().map(|r| mlir_type(self.ty(*r))).collect();
        Ok(self
            .p
            .op_with_regions("scf.while", &operands, "", &results, vec![before, after]))
    }
}

/// Vector loads and stores need a VMEM ref of rank 1 or more.
fn vector_memory(op: &Operation, space: MemorySpace, shape: &[usize]) -> Result<(), MosaicError> {
    match space {
        MemorySpace::Smem => Err(unsupported(
            op,
            "vector access to SMEM; SMEM holds scalars (use element loads and stores)".into(),
        )),
        MemorySpace::Any => Err(unsupported(
            op,
            "access to a ref in HBM (`Any`); copy it into VMEM first".into(),
        )),
        MemorySpace::Semaphore => Err(unsupported(
            op,
            "access to a DMA semaphore array; semaphores are for `async_copy` only".into(),
        )),
        MemorySpace::Vmem if shape.is_empty() => Err(unsupported(
            op,
            "a rank-0 VMEM ref; use a [1, 1] block".into(),
        )),
        MemorySpace::Vmem => Ok(()),
    }
}

pub(crate) fn unsupported(op: &Operation, reason: String) -> MosaicError {
    MosaicError::Unsupported {
        op: op.kind.name(),
        reason,
        loc: op.loc,
    }
}
