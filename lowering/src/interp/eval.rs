//! Evaluates one IR function: values in f64, rounded to the op's dtype after every op.

use super::array::{convert, round, strides, unravel, Array};
use super::dma::{DmaState, Transfer};
use super::error::InterpError;
use super::ops::{binary, copy_window, dot, paste_window, reduce, scan, unary_fn};
use crate::dtype::DType;
use crate::ir::{DmaCopy, Func, Loc, Offset, OpKind, Operation, Region, ValueId};
use std::rc::Rc;

#[derive(Clone, Debug)]
pub(crate) enum Rt {
    Val(Rc<Array>),
    /// Index into the machine's buffers (the program's, then the scoped ones).
    Ref(usize),
}

/// Runs `func` with `args` bound to its params; returns its results.
pub(crate) struct Machine<'a> {
    pub func: &'a Func,
    buffers: &'a mut [Array],
    /// Buffers of the `run_scoped` regions now open, innermost last.
    scoped: Vec<Array>,
    pub grid: &'a [usize],
    pub grid_index: &'a [usize],
    /// Manual DMAs of this call (one grid step).
    pub dma: DmaState,
    env: Vec<Option<Rt>>,
}

type Res<T> = Result<T, InterpError>;

/// A `while` loop that runs more trips than this in one grid step is reported instead of
/// hanging the interpreter (a condition that never turns false is a bug in the kernel; a
/// million sequential trips per step is far beyond what a TPU kernel runs in practice).
pub(crate) const MAX_WHILE_TRIPS: u64 = 1 << 20;

fn invalid(op: &Operation, message: impl Into<String>) -> InterpError {
    InterpError::Invalid {
        op: op.kind.name(),
        message: message.into(),
        loc: op.loc,
    }
}

impl<'a> Machine<'a> {
    pub fn new(
        func: &'a Func,
        buffers: &'a mut [Array],
        grid: &'a [usize],
        grid_index: &'a [usize],
    ) -> Machine<'a> {
        Machine {
            func,
            buffers,
            scoped: Vec::new(),
            grid,
            grid_index,
            dma: DmaState::default(),
            env: vec![None; func.values.len()],
        }
    }

    pub fn call(&mut self, args: Vec<Rt>) -> Res<Vec<Rt>> {
        for (p, a) in self.func.body.args.iter().zip(args) {
            self.env[p.0 as usize] = Some(a);
        }
        let body = &self.func.body;
        self.region(body)
    }

    fn region(&mut self, r: &Region) -> Res<Vec<Rt>> {
        for op in &r.ops {
            self.op(op)?;
        }
        r.yields.iter().map(|&y| self.get(y, None)).collect()
    }

    fn get(&self, v: ValueId, op: Option<&Operation>) -> Res<Rt> {
        self.env
            .get(v.0 as usize)
            .cloned()
            .flatten()
            .ok_or_else(|| InterpError::Invalid {
                op: op.map_or("yield", |o| o.kind.name()),
                message: format!("{v} has no value"),
                loc: op.map_or(self.func.loc, |o| o.loc),
            })
    }

    fn val(&self, v: ValueId, op: &Operation) -> Res<Rc<Array>> {
        match self.get(v, Some(op))? {
            Rt::Val(a) => Ok(a),
            Rt::Ref(_) => Err(invalid(op, format!("{v} is a ref, expected a value"))),
        }
    }

    fn buffer(&self, v: ValueId, op: &Operation) -> Res<usize> {
        match self.get(v, Some(op))? {
            Rt::Ref(b) => Ok(b),
            Rt::Val(_) => Err(invalid(op, format!("{v} is a value, expected a ref"))),
        }
    }

    fn result_type(&self, op: &Operation) -> (DType, Vec<usize>) {
        let t = self.func.ty(op.results[0]);
        (t.dtype(), t.shape().to_vec())
    }

    fn set(&mut self, v: ValueId, a: Array) {
        self.env[v.0 as usize] = Some(Rt::Val(Rc::new(a)));
    }

    fn starts(&self, offsets: &[Offset], op: &Operation) -> Res<Vec<i64>> {
        offsets
            .iter()
            .map(|o| match o {
                Offset::Static(s) => Ok(*s as i64),
                Offset::Dynamic(v) => Ok(self.val(*v, op)?.scalar() as i64),
            })
            .collect()
    }

    /// Checks `starts .. starts + sizes` lies in `shape`; returns the starts as usize.
    fn window(
        op: &Operation,
        starts: &[i64],
        sizes: &[usize],
        shape: &[usize],
        loc: Loc,
    ) -> Res<Vec<usize>> {
        let ok = starts.len() == shape.len()
            && starts
                .iter()
                .zip(sizes)
                .zip(shape)
                .all(|((&s, &n), &d)| s >= 0 && s as usize + n <= d);
        if !ok {
            return Err(InterpError::SliceOutOfBounds {
                op: op.kind.name(),
                starts: starts.to_vec(),
                sizes: sizes.to_vec(),
                shape: shape.to_vec(),
                loc,
            });
        }
        Ok(starts.iter().map(|&s| s as usize).collect())
    }

    fn op(&mut self, op: &Operation) -> Res<()> {
        match &op.kind {
            OpKind::Constant { value } => {
                let (dtype, shape) = self.result_type(op);
                self.set(op.results[0], Array::filled(dtype, shape, value.as_f64()));
            }
            OpKind::ProgramId { axis } | OpKind::NumPrograms { axis } => {
                let source = if matches!(op.kind, OpKind::ProgramId { .. }) {
                    self.grid_index
                } else {
                    self.grid
                };
                let v = *source.get(*axis).ok_or_else(|| {
                    invalid(op, format!("axis {axis} beyond the grid {:?}", self.grid))
                })?;
                self.set(op.results[0], Array::filled(DType::I32, vec![], v as f64));
            }
            OpKind::Load { src } => {
                let b = self.buffer(*src, op)?;
                let shape = self.buf(b).shape.clone();
                self.dma
                    .check_read(b, &vec![0; shape.len()], &shape, op.loc)?;
                let a = self.buf(b).clone();
                self.set(op.results[0], a);
            }
            OpKind::Store { dst, value } => {
                let (b, v) = (self.buffer(*dst, op)?, self.val(*value, op)?);
                let shape = self.buf(b).shape.clone();
                let zeros = vec![0; shape.len()];
                self.dma
                    .check_write(b, &zeros, &shape, "store into", op.loc)?;
                self.buf_mut(b).data.clone_from(&v.data);
            }
            OpKind::StoreMasked { dst, mask, value } => {
                let (b, v) = (self.buffer(*dst, op)?, self.val(*value, op)?);
                let m = self.val(*mask, op)?;
                let shape = self.buf(b).shape.clone();
                let zeros = vec![0; shape.len()];
                // Only the masked-in elements are written, but a DMA into any part of the
                // block races with the store as the TPU issues it (one vector store).
                self.dma
                    .check_write(b, &zeros, &shape, "store into", op.loc)?;
                let buf = self.buf_mut(b);
                for ((d, &x), &keep) in buf.data.iter_mut().zip(&v.data).zip(&m.data) {
                    if keep != 0.0 {
                        *d = x;
                    }
                }
            }
            // The generator of `ir::prng` (the StableHLO forms compute the same bits).
            OpKind::PrngSeed { seeds } => {
                let seeds = seeds
                    .iter()
                    .map(|s| Ok(self.val(*s, op)?.data[0] as i32 as u32))
                    .collect::<Res<Vec<u32>>>()?;
                let key = crate::ir::prng::seed_key(&seeds) as i32;
                self.set(
                    op.results[0],
                    Array::filled(DType::I32, vec![], f64::from(key)),
                );
            }
            OpKind::PrngRandomBits { key, site } => {
                let key = self.val(*key, op)?.data[0] as i32 as u32;
                let stream = crate::ir::prng::stream_key(key, *site);
                let shape = self.func.ty(op.results[0]).shape().to_vec();
                let n: usize = shape.iter().product();
                let data = (0..n)
                    .map(|e| f64::from(crate::ir::prng::bits(stream, e as u32) as i32))
                    .collect();
                self.set(op.results[0], Array::new(DType::I32, shape, data));
            }
            OpKind::LoadSlice { src, starts, sizes } => {
                let b = self.buffer(*src, op)?;
                let starts = self.starts(starts, op)?;
                let buf = self.buf(b);
                let starts = Self::window(op, &starts, sizes, &buf.shape, op.loc)?;
                self.dma.check_read(b, &starts, sizes, op.loc)?;
                let data = copy_window(&buf.data, &buf.shape, &starts, sizes);
                let a = Array::new(buf.dtype, sizes.clone(), data);
                self.set(op.results[0], a);
            }
            OpKind::StoreSlice { dst, starts, value } => {
                let (b, v) = (self.buffer(*dst, op)?, self.val(*value, op)?);
                let starts = self.starts(starts, op)?;
                let shape = self.buf(b).shape.clone();
                let starts = Self::window(op, &starts, &v.shape, &shape, op.loc)?;
                self.dma
                    .check_write(b, &starts, &v.shape, "store into", op.loc)?;
                paste_window(
                    &mut self.buf_mut(b).data,
                    &shape,
                    &starts,
                    &v.shape,
                    &v.data,
                );
            }
            OpKind::LoadElement { src, indices } => {
                let b = self.buffer(*src, op)?;
                let idx = self.starts(indices, op)?;
                let buf = self.buf(b);
                let idx = Self::window(op, &idx, &vec![1; idx.len()], &buf.shape, op.loc)?;
                self.dma.check_read(b, &idx, &vec![1; idx.len()], op.loc)?;
                let flat: usize = idx
                    .iter()
                    .zip(strides(&buf.shape))
                    .map(|(i, s)| i * s)
                    .sum();
                let a = Array::new(buf.dtype, vec![], vec![buf.data[flat]]);
                self.set(op.results[0], a);
            }
            OpKind::StoreElement {
                dst,
                indices,
                value,
            } => {
                let (b, v) = (self.buffer(*dst, op)?, self.val(*value, op)?);
                let idx = self.starts(indices, op)?;
                let shape = self.buf(b).shape.clone();
                let idx = Self::window(op, &idx, &vec![1; idx.len()], &shape, op.loc)?;
                self.dma
                    .check_write(b, &idx, &vec![1; idx.len()], "store into", op.loc)?;
                let flat: usize = idx.iter().zip(strides(&shape)).map(|(i, s)| i * s).sum();
                self.buf_mut(b).data[flat] = v.scalar();
            }
            OpKind::Unary { op: u, x } => {
                let x = self.val(*x, op)?;
                let f = unary_fn(*u, x.dtype);
                let data = x.data.iter().map(|&v| round(x.dtype, f(v))).collect();
                self.set(op.results[0], Array::new(x.dtype, x.shape.clone(), data));
            }
            OpKind::Binary { op: bop, lhs, rhs } => {
                let (l, r) = (self.val(*lhs, op)?, self.val(*rhs, op)?);
                let dtype = l.dtype;
                let data = l
                    .data
                    .iter()
                    .zip(&r.data)
                    .map(|(&a, &b)| round(dtype, binary(*bop, dtype, a, b)))
                    .collect();
                self.set(op.results[0], Array::new(dtype, l.shape.clone(), data));
            }
            OpKind::Compare { op: cop, lhs, rhs } => {
                let (l, r) = (self.val(*lhs, op)?, self.val(*rhs, op)?);
                let data = l
                    .data
                    .iter()
                    .zip(&r.data)
                    .map(|(&a, &b)| f64::from(u8::from(cop.holds(a, b))))
                    .collect();
                self.set(
                    op.results[0],
                    Array::new(DType::Bool, l.shape.clone(), data),
                );
            }
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
                let data = c
                    .data
                    .iter()
                    .zip(t.data.iter().zip(&f.data))
                    .map(|(&c, (&t, &f))| if c != 0.0 { t } else { f })
                    .collect();
                self.set(op.results[0], Array::new(t.dtype, t.shape.clone(), data));
            }
            OpKind::Cast { x } => {
                let x = self.val(*x, op)?;
                let (dtype, _) = self.result_type(op);
                let data = x.data.iter().map(|&v| convert(dtype, v)).collect();
                self.set(op.results[0], Array::new(dtype, x.shape.clone(), data));
            }
            // The promise is checked: a broken one is the kernel's bug, which on TPU would
            // read or write the wrong window silently.
            OpKind::AssumeMultiple { x, multiple } => {
                let v = self.val(*x, op)?;
                if let Some(&bad) = v.data.iter().find(|&&e| e % *multiple as f64 != 0.0) {
                    return Err(InterpError::Invalid {
                        op: "multiple_of",
                        message: format!("{bad} is not a multiple of {multiple}, as promised"),
                        loc: op.loc,
                    });
                }
                self.env[op.results[0].0 as usize] = Some(Rt::Val(v));
            }
            OpKind::Bitcast { x } => {
                let x = self.val(*x, op)?;
                let (dtype, shape) = self.result_type(op);
                self.set(op.results[0], super::reshaping::bitcast(&x, dtype, shape));
            }
            OpKind::Slice { x, starts, strides } => {
                let x = self.val(*x, op)?;
                let (_, shape) = self.result_type(op);
                let out = super::reshaping::slice(&x, starts, strides, shape);
                self.set(op.results[0], out);
            }
            OpKind::Iota { dim } => {
                let (dtype, shape) = self.result_type(op);
                let mut idx = vec![0; shape.len()];
                let n: usize = shape.iter().product();
                let data = (0..n)
                    .map(|f| {
                        unravel(f, &shape, &mut idx);
                        round(dtype, idx[*dim] as f64)
                    })
                    .collect();
                self.set(op.results[0], Array::new(dtype, shape, data));
            }
            OpKind::Broadcast { x, dims } => {
                let x = self.val(*x, op)?;
                let (dtype, shape) = self.result_type(op);
                let xs = strides(&x.shape);
                let mut idx = vec![0; shape.len()];
                let n: usize = shape.iter().product();
                let data = (0..n)
                    .map(|f| {
                        unravel(f, &shape, &mut idx);
                        let src: usize = dims
                            .iter()
                            .enumerate()
                            .map(|(i, &d)| if x.shape[i] == 1 { 0 } else { idx[d] * xs[i] })
                            .sum();
                        x.data[src]
                    })
                    .collect();
                self.set(op.results[0], Array::new(dtype, shape, data));
            }
            OpKind::Reshape { x } => {
                let x = self.val(*x, op)?;
                let (dtype, shape) = self.result_type(op);
                self.set(op.results[0], Array::new(dtype, shape, x.data.clone()));
            }
            OpKind::Transpose { x, perm } => {
                let x = self.val(*x, op)?;
                let (dtype, shape) = self.result_type(op);
                let xs = strides(&x.shape);
                let mut idx = vec![0; shape.len()];
                let n: usize = shape.iter().product();
                let data = (0..n)
                    .map(|f| {
                        unravel(f, &shape, &mut idx);
                        x.data[perm
                            .iter()
                            .enumerate()
                            .map(|(i, &p)| idx[i] * xs[p])
                            .sum::<usize>()]
                    })
                    .collect();
                self.set(op.results[0], Array::new(dtype, shape, data));
            }
            OpKind::Reduce {
                op: rop, x, axes, ..
            } => {
                let x = self.val(*x, op)?;
                let a = reduce(*rop, &x, axes);
                let (dtype, shape) = self.result_type(op);
                self.set(op.results[0], Array::new(dtype, shape, a));
            }
            OpKind::Scan { op: sop, x, axis } => {
                let x = self.val(*x, op)?;
                let data = scan(*sop, &x, *axis);
                self.set(op.results[0], Array::new(x.dtype, x.shape.clone(), data));
            }
            OpKind::Dot {
                lhs,
                rhs,
                transpose_lhs,
                transpose_rhs,
            } => {
                let (l, r) = (self.val(*lhs, op)?, self.val(*rhs, op)?);
                let (dtype, shape) = self.result_type(op);
                let data = dot(&l, &r, *transpose_lhs, *transpose_rhs, &shape, dtype);
                self.set(op.results[0], Array::new(dtype, shape, data));
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => {
                let c = self.val(*cond, op)?.scalar() != 0.0;
                let results = self.region(if c { then_region } else { else_region })?;
                self.bind(op, results);
            }
            OpKind::Fori { lo, hi, init, body } => {
                let (lo, hi) = (
                    self.val(*lo, op)?.scalar() as i64,
                    self.val(*hi, op)?.scalar() as i64,
                );
                let mut carried = init
                    .iter()
                    .map(|v| self.get(*v, Some(op)))
                    .collect::<Res<Vec<_>>>()?;
                for i in lo..hi {
                    self.set(body.args[0], Array::new(DType::I32, vec![], vec![i as f64]));
                    for (a, c) in body.args[1..].iter().zip(carried) {
                        self.env[a.0 as usize] = Some(c);
                    }
                    carried = self.region(body)?;
                }
                self.bind(op, carried);
            }
            OpKind::While { init, cond, body } => {
                let mut carried = init
                    .iter()
                    .map(|v| self.get(*v, Some(op)))
                    .collect::<Res<Vec<_>>>()?;
                let mut trips: u64 = 0;
                loop {
                    for (a, c) in cond.args.iter().zip(&carried) {
                        self.env[a.0 as usize] = Some(c.clone());
                    }
                    let go = match self.region(cond)?.first() {
                        Some(Rt::Val(c)) => c.scalar() != 0.0,
                        _ => return Err(invalid(op, "the condition yields no bool")),
                    };
                    if !go {
                        break;
                    }
                    trips += 1;
                    if trips > MAX_WHILE_TRIPS {
                        return Err(InterpError::WhileLimit {
                            trips: MAX_WHILE_TRIPS,
                            loc: op.loc,
                        });
                    }
                    for (a, c) in body.args.iter().zip(carried) {
                        self.env[a.0 as usize] = Some(c);
                    }
                    carried = self.region(body)?;
                }
                self.bind(op, carried);
            }
            OpKind::RunScoped { body } => {
                // Each scoped buffer gets the next index past the open ones; floats start as
                // NaN so a read before any write shows.
                let base = self.buffers.len() + self.scoped.len();
                for (i, a) in body.args.iter().enumerate() {
                    let t = self.func.ty(*a);
                    let fill = if t.dtype().is_float() { f64::NAN } else { 0.0 };
                    self.scoped
                        .push(Array::filled(t.dtype(), t.shape().to_vec(), fill));
                    self.env[a.0 as usize] = Some(Rt::Ref(base + i));
                }
                let results = self.region(body)?;
                self.dma.end_scope(|b| b >= base, op.loc)?;
                self.scoped.truncate(base - self.buffers.len());
                self.bind(op, results);
            }
            OpKind::DmaStart(c) => {
                let t = self.transfer(op, c)?;
                let src = self.buf(t.src);
                let data = copy_window(&src.data, &src.shape, &t.src_starts, &t.sizes);
                self.dma.start(&t, op.loc)?;
                let dst = self.buf_mut(t.dst);
                let shape = dst.shape.clone();
                paste_window(&mut dst.data, &shape, &t.dst_starts, &t.sizes, &data);
                self.dma.started(t, op.loc);
            }
            OpKind::DmaWait(c) => {
                let t = self.transfer(op, c)?;
                self.dma.wait(&t, op.loc)?;
            }
        }
        Ok(())
    }

    /// Resolves a copy's refs, windows (bounds-checked) and semaphore index.
    fn transfer(&self, op: &Operation, c: &DmaCopy) -> Res<Transfer> {
        let (src, dst, sem) = (
            self.buffer(c.src, op)?,
            self.buffer(c.dst, op)?,
            self.buffer(c.sem, op)?,
        );
        let starts = self.starts(&c.src_starts, op)?;
        let src_starts = Self::window(op, &starts, &c.sizes, &self.buf(src).shape, op.loc)?;
        let starts = self.starts(&c.dst_starts, op)?;
        let dst_starts = Self::window(op, &starts, &c.sizes, &self.buf(dst).shape, op.loc)?;
        let index = self.starts(std::slice::from_ref(&c.sem_index), op)?[0];
        let count = self.buf(sem).shape[0];
        if index < 0 || index as usize >= count {
            return Err(InterpError::Dma {
                message: format!(
                    "semaphore index {index} is out of range for an array of {count} semaphores"
                ),
                loc: op.loc,
            });
        }
        Ok(Transfer {
            src,
            src_starts,
            dst,
            dst_starts,
            sizes: c.sizes.clone(),
            sem: (sem, index as usize),
        })
    }

    fn buf(&self, b: usize) -> &Array {
        match b.checked_sub(self.buffers.len()) {
            None => &self.buffers[b],
            Some(k) => &self.scoped[k],
        }
    }

    fn buf_mut(&mut self, b: usize) -> &mut Array {
        match b.checked_sub(self.buffers.len()) {
            None => &mut self.buffers[b],
            Some(k) => &mut self.scoped[k],
        }
    }

    fn bind(&mut self, op: &Operation, results: Vec<Rt>) {
        for (r, v) in op.results.iter().zip(results) {
            self.env[r.0 as usize] = Some(v);
        }
    }
}
