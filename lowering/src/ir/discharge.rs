//! Ref state discharged (as `jax/_src/state/discharge.py` does for Pallas' HLO interpreter):
//! each ref becomes a chain of SSA versions, so a function over refs becomes a function over
//! values that array backends translate op for op. A whole load is the ref's current version,
//! a whole store makes the stored value the next one; a windowed load is a slice of the
//! version, a windowed store an update of it into a new version. `if`, `fori` and `while`
//! carry the versions of the refs their regions store as extra results (and loop args), in
//! ref order, after their own. A ref param's first version is the param itself; a scoped
//! buffer's is its arg, zero-filled. A DMA is a window read then a window write (the array
//! backends copy synchronously; the wait does nothing there).
//!
//! Mosaic keeps the ref IR: refs are memory there.
//!
//! The discharged IR can hold ops a rewrite makes, not only the traced ones: an op's kind and
//! its windows' offsets are borrowed from the traced op where discharge keeps them, and owned
//! where a pass builds them (`Cow`); a new value's type is pushed onto `values`.

use super::func::Func;
use super::op::{Offset, OpKind, Operation, Region as RefRegion, ValueId};
use super::types::Type;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// A broken ref discipline (the verifier rules it out, so only a bug reaches it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DischargeError {
    #[error("ref {0} is used before it has contents")]
    NoContents(ValueId),
}

/// A function with its refs discharged; its values are `func`'s, then the versions and
/// windows discharge adds.
#[derive(Clone, Debug)]
pub struct Discharged<'a> {
    pub func: &'a Func,
    pub values: Vec<Type>,
    pub body: Region<'a>,
    /// The version each ref param holds when the body ends.
    pub finals: BTreeMap<ValueId, ValueId>,
}

impl Discharged<'_> {
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.values[v.0 as usize]
    }

    /// The last version of ref param `r`.
    pub fn final_version(&self, r: ValueId) -> Result<ValueId, DischargeError> {
        self.finals
            .get(&r)
            .copied()
            .ok_or(DischargeError::NoContents(r))
    }
}

#[derive(Clone, Debug, Default)]
pub struct Region<'a> {
    pub args: Vec<ValueId>,
    pub ops: Vec<Op<'a>>,
    pub yields: Vec<ValueId>,
}

/// An op over values; `origin` is the traced op it comes from (its line, its name in errors),
/// also for an op a pass made in its place.
#[derive(Clone, Debug)]
pub struct Op<'a> {
    pub origin: &'a Operation,
    pub kind: Kind<'a>,
    pub results: Vec<ValueId>,
}

#[derive(Clone, Debug)]
pub enum Kind<'a> {
    /// An op of values only (no ref operand, no region): `origin`'s kind as traced
    /// (borrowed), or one a pass made (owned).
    Value(Cow<'a, OpKind>),
    /// The result is `x` (a whole load).
    Alias(ValueId),
    /// The result is zeros of its type (a scoped buffer's first version).
    Zeros,
    /// The window of `x` at `starts` of `sizes`.
    Window {
        x: ValueId,
        starts: Cow<'a, [Offset]>,
        sizes: Vec<usize>,
    },
    /// The element of `x` at `indices`, a scalar.
    Element {
        x: ValueId,
        indices: Cow<'a, [Offset]>,
    },
    /// `x` with `value` written at `starts` (a scalar written as a window of ones).
    Update {
        x: ValueId,
        starts: Cow<'a, [Offset]>,
        value: ValueId,
    },
    If {
        cond: ValueId,
        then_region: Region<'a>,
        else_region: Region<'a>,
    },
    /// `body`'s args are the index, then the carried values.
    Fori {
        lo: ValueId,
        hi: ValueId,
        init: Vec<ValueId>,
        body: Region<'a>,
    },
    While {
        init: Vec<ValueId>,
        cond: Region<'a>,
        body: Region<'a>,
    },
}

/// `func` with its refs discharged.
pub fn discharge(func: &Func) -> Result<Discharged<'_>, DischargeError> {
    let mut d = Discharger {
        values: func.values.clone(),
        versions: func
            .params()
            .iter()
            .filter(|p| func.ty(**p).is_ref())
            .map(|&p| (p, p))
            .collect(),
    };
    let mut ops = Vec::new();
    d.ops(&func.body.ops, &mut ops)?;
    let finals = func
        .params()
        .iter()
        .filter_map(|p| d.versions.get(p).map(|v| (*p, *v)))
        .collect();
    Ok(Discharged {
        func,
        values: d.values,
        body: Region {
            args: func.body.args.clone(),
            ops,
            yields: func.body.yields.clone(),
        },
        finals,
    })
}

/// Refs written anywhere inside `region` (nested regions included).
fn stored_refs(region: &RefRegion) -> BTreeSet<ValueId> {
    let mut out = BTreeSet::new();
    for op in &region.ops {
        match &op.kind {
            OpKind::Store { dst, .. }
            | OpKind::StoreSlice { dst, .. }
            | OpKind::StoreElement { dst, .. }
            | OpKind::DmaStart(super::op::DmaCopy { dst, .. }) => {
                out.insert(*dst);
            }
            // Its own buffers die with it; what it writes outside is carried like a loop's.
            OpKind::RunScoped { body } => out.extend(
                stored_refs(body)
                    .into_iter()
                    .filter(|r| !body.args.contains(r)),
            ),
            k => k
                .regions()
                .into_iter()
                .for_each(|r| out.extend(stored_refs(r))),
        }
    }
    out
}

struct Discharger {
    values: Vec<Type>,
    /// Each live ref's current version.
    versions: BTreeMap<ValueId, ValueId>,
}

impl Discharger {
    fn current(&self, r: ValueId) -> Result<ValueId, DischargeError> {
        self.versions
            .get(&r)
            .copied()
            .ok_or(DischargeError::NoContents(r))
    }

    /// A new value of type `ty`.
    fn fresh(&mut self, ty: Type) -> ValueId {
        self.values.push(ty);
        ValueId(self.values.len() as u32 - 1)
    }

    /// A new version of ref `r` (not yet current).
    fn version(&mut self, r: ValueId) -> ValueId {
        let t = &self.values[r.0 as usize];
        let ty = Type::tile(t.dtype(), t.shape());
        self.fresh(ty)
    }

    fn versions_of(&mut self, refs: &[ValueId]) -> Vec<ValueId> {
        refs.iter().map(|&r| self.version(r)).collect()
    }

    fn set(&mut self, refs: &[ValueId], versions: &[ValueId]) {
        for (r, v) in refs.iter().zip(versions) {
            self.versions.insert(*r, *v);
        }
    }

    fn currents(&self, refs: &[ValueId]) -> Result<Vec<ValueId>, DischargeError> {
        refs.iter().map(|&r| self.current(r)).collect()
    }

    fn ops<'a>(
        &mut self,
        ops: &'a [Operation],
        out: &mut Vec<Op<'a>>,
    ) -> Result<(), DischargeError> {
        ops.iter().try_for_each(|op| self.op(op, out))
    }

    /// `region` with `stored`'s current versions yielded after its own values.
    fn region<'a>(
        &mut self,
        region: &'a RefRegion,
        args: Vec<ValueId>,
        stored: &[ValueId],
    ) -> Result<Region<'a>, DischargeError> {
        let mut ops = Vec::new();
        self.ops(&region.ops, &mut ops)?;
        let yields = [region.yields.clone(), self.currents(stored)?].concat();
        Ok(Region { args, ops, yields })
    }

    fn op<'a>(&mut self, op: &'a Operation, out: &mut Vec<Op<'a>>) -> Result<(), DischargeError> {
        let emit = |out: &mut Vec<Op<'a>>, kind: Kind<'a>, results: Vec<ValueId>| {
            out.push(Op {
                origin: op,
                kind,
                results,
            })
        };
        match &op.kind {
            OpKind::Load { src } => emit(out, Kind::Alias(self.current(*src)?), op.results.clone()),
            OpKind::Store { dst, value } => {
                self.versions.insert(*dst, *value);
            }
            OpKind::LoadSlice { src, starts, sizes } => {
                let x = self.current(*src)?;
                let (starts, sizes) = (Cow::Borrowed(&starts[..]), sizes.clone());
                emit(out, Kind::Window { x, starts, sizes }, op.results.clone())
            }
            OpKind::LoadElement { src, indices } => {
                let x = self.current(*src)?;
                let indices = Cow::Borrowed(&indices[..]);
                emit(out, Kind::Element { x, indices }, op.results.clone())
            }
            OpKind::StoreSlice { dst, starts, value }
            | OpKind::StoreElement {
                dst,
                indices: starts,
                value,
            } => {
                let x = self.current(*dst)?;
                let next = self.version(*dst);
                let (starts, value) = (Cow::Borrowed(&starts[..]), *value);
                emit(out, Kind::Update { x, starts, value }, vec![next]);
                self.versions.insert(*dst, next);
            }
            OpKind::DmaStart(c) => {
                let src = self.current(c.src)?;
                let window = Type::tile(self.values[c.src.0 as usize].dtype(), c.sizes.clone());
                let window = self.fresh(window);
                let (starts, sizes) = (Cow::Borrowed(&c.src_starts[..]), c.sizes.clone());
                emit(
                    out,
                    Kind::Window {
                        x: src,
                        starts,
                        sizes,
                    },
                    vec![window],
                );
                let x = self.current(c.dst)?;
                let next = self.version(c.dst);
                let starts = Cow::Borrowed(&c.dst_starts[..]);
                emit(
                    out,
                    Kind::Update {
                        x,
                        starts,
                        value: window,
                    },
                    vec![next],
                );
                self.versions.insert(c.dst, next);
            }
            OpKind::DmaWait(_) => {}
            // The buffers' ops run inline; the buffers die with the region.
            OpKind::RunScoped { body } => {
                for &a in &body.args {
                    emit(out, Kind::Zeros, vec![a]);
                    self.versions.insert(a, a);
                }
                self.ops(&body.ops, out)?;
                for (r, y) in op.results.iter().zip(&body.yields) {
                    emit(out, Kind::Alias(*y), vec![*r]);
                }
                for a in &body.args {
                    self.versions.remove(a);
                }
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => {
                let stored: Vec<ValueId> = stored_refs(then_region)
                    .union(&stored_refs(else_region))
                    .copied()
                    .collect();
                let before = self.versions.clone();
                let then_region = self.region(then_region, Vec::new(), &stored)?;
                self.versions = before.clone();
                let else_region = self.region(else_region, Vec::new(), &stored)?;
                self.versions = before;
                let kind = Kind::If {
                    cond: *cond,
                    then_region,
                    else_region,
                };
                self.carried_results(op, kind, &stored, out);
            }
            OpKind::Fori { lo, hi, init, body } => {
                let stored: Vec<ValueId> = stored_refs(body).into_iter().collect();
                let init = [init.clone(), self.currents(&stored)?].concat();
                let args = self.versions_of(&stored);
                self.set(&stored, &args);
                let body = self.region(body, [body.args.clone(), args].concat(), &stored)?;
                let kind = Kind::Fori {
                    lo: *lo,
                    hi: *hi,
                    init,
                    body,
                };
                self.carried_results(op, kind, &stored, out);
            }
            OpKind::While { init, cond, body } => {
                let stored: Vec<ValueId> = stored_refs(body).into_iter().collect();
                let init = [init.clone(), self.currents(&stored)?].concat();
                let args = self.versions_of(&stored);
                self.set(&stored, &args);
                let cond = self.region(cond, [cond.args.clone(), args].concat(), &[])?;
                let args = self.versions_of(&stored);
                self.set(&stored, &args);
                let body = self.region(body, [body.args.clone(), args].concat(), &stored)?;
                let kind = Kind::While { init, cond, body };
                self.carried_results(op, kind, &stored, out);
            }
            k => emit(out, Kind::Value(Cow::Borrowed(k)), op.results.clone()),
        }
        Ok(())
    }

    /// Emits `kind` with `op`'s results, then new versions of `stored`, which become current.
    fn carried_results<'a>(
        &mut self,
        op: &'a Operation,
        kind: Kind<'a>,
        stored: &[ValueId],
        out: &mut Vec<Op<'a>>,
    ) {
        let next = self.versions_of(stored);
        self.set(stored, &next);
        out.push(Op {
            origin: op,
            kind,
            results: [op.results.clone(), next].concat(),
        });
    }
}
