//! The verifier: types and shapes of every op, region arities, and SSA scoping (a value is
//! used only after its definition, in its region or a region nested in it).

use super::func::Func;
use super::loc::Loc;
use super::op::{DmaCopy, Literal, Offset, OpKind, Operation, Region, ValueId};
use super::types::{MemorySpace, Type};
use crate::dtype::DType;

/// An op (or the function itself, `op = "func"`) that breaks an IR rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{loc}: `{op}`: {message}")]
pub struct VerifyError {
    pub op: &'static str,
    pub loc: Loc,
    pub message: String,
}

/// Checks the whole function.
pub fn verify(func: &Func) -> Result<(), VerifyError> {
    let mut scope = Scope {
        defined: vec![false; func.values.len()],
        func,
    };
    let err = |message: String| VerifyError {
        op: "func",
        loc: func.loc,
        message,
    };
    let mut top = Vec::new();
    for &p in &func.body.args {
        scope.define(p, &mut top).map_err(err)?;
    }
    scope.region(&func.body, top)
}

struct Scope<'f> {
    defined: Vec<bool>,
    func: &'f Func,
}

impl Scope<'_> {
    fn define(&mut self, v: ValueId, frame: &mut Vec<ValueId>) -> Result<(), String> {
        match self.defined.get_mut(v.0 as usize) {
            None => Err(format!("{v} has no type in the value table")),
            Some(d) if *d => Err(format!("{v} is defined twice")),
            Some(d) => {
                *d = true;
                frame.push(v);
                Ok(())
            }
        }
    }

    fn used(&self, v: ValueId) -> Result<(), String> {
        match self.defined.get(v.0 as usize) {
            Some(true) => Ok(()),
            _ => Err(format!(
                "{v} is used outside the region that defines it (or before its definition)"
            )),
        }
    }

    /// Verifies a region whose args are already in `frame`; undefines them all on exit.
    fn region(&mut self, region: &Region, mut frame: Vec<ValueId>) -> Result<(), VerifyError> {
        let result = self.region_ops(region, &mut frame);
        for v in frame {
            self.defined[v.0 as usize] = false;
        }
        result
    }

    fn region_ops(&mut self, region: &Region, frame: &mut Vec<ValueId>) -> Result<(), VerifyError> {
        for op in &region.ops {
            let err = |message: String| VerifyError {
                op: op.kind.name(),
                loc: op.loc,
                message,
            };
            for v in op.kind.operands() {
                self.used(v).map_err(err)?;
            }
            check_op(op, &self.func.values).map_err(err)?;
            for r in op.kind.regions() {
                let mut inner = Vec::new();
                for &a in &r.args {
                    self.define(a, &mut inner).map_err(err)?;
                }
                self.region(r, inner)?;
            }
            for &r in &op.results {
                self.define(r, frame).map_err(err)?;
            }
        }
        for &y in &region.yields {
            self.used(y).map_err(|message| VerifyError {
                op: "yield",
                loc: self.func.loc,
                message,
            })?;
        }
        Ok(())
    }
}

/// Type rules of one op, given the value table of its function. The tracer calls this on
/// every op it records, so these messages are what users see for shape and dtype mistakes.
pub fn check_op(op: &Operation, types: &[Type]) -> Result<(), String> {
    let ty = |v: ValueId| {
        types
            .get(v.0 as usize)
            .ok_or_else(|| format!("{v} has no type"))
    };
    let results: Vec<&Type> = op
        .results
        .iter()
        .map(|r| ty(*r))
        .collect::<Result<_, _>>()?;
    let one = |n: usize| -> Result<(), String> {
        if results.len() == n {
            Ok(())
        } else {
            Err(format!("has {} results, expected {n}", results.len()))
        }
    };
    match &op.kind {
        OpKind::Constant { value } => {
            one(1)?;
            let (dtype, _) = value_of(results[0], "result")?;
            match (value, dtype) {
                (Literal::Bool(_), DType::Bool) => Ok(()),
                (Literal::Int(_), d) if d.is_int() || d.is_float() => Ok(()),
                (Literal::Float(x), d) if d.is_float() || (d.is_int() && x.fract() == 0.0) => {
                    Ok(())
                }
                (v, d) => Err(format!("constant {v} cannot be a {d}")),
            }
        }
        OpKind::ProgramId { .. } | OpKind::NumPrograms { .. } => {
            one(1)?;
            expect_index(results[0], "result")
        }
        OpKind::Load { src } => {
            one(1)?;
            let (dtype, shape) = accessed(ty(*src)?, "source")?;
            same(results[0], &Type::tile(dtype, shape), "result")
        }
        OpKind::Store { dst, value } => {
            one(0)?;
            let (dtype, shape) = accessed(ty(*dst)?, "destination")?;
            same(ty(*value)?, &Type::tile(dtype, shape), "stored value")
        }
        OpKind::StoreMasked { dst, mask, value } => {
            one(0)?;
            let (dtype, shape) = accessed(ty(*dst)?, "destination")?;
            same(ty(*value)?, &Type::tile(dtype, shape), "stored value")?;
            same(ty(*mask)?, &Type::tile(DType::Bool, shape), "mask")
        }
        OpKind::PrngSeed { seeds } => {
            one(1)?;
            if seeds.is_empty() {
                return Err("needs at least one seed".into());
            }
            for s in seeds {
                same(ty(*s)?, &Type::index(), "seed")?;
            }
            same(results[0], &Type::index(), "key")
        }
        OpKind::PrngRandomBits { key, .. } => {
            one(1)?;
            same(ty(*key)?, &Type::index(), "key")?;
            match results[0] {
                Type::Value {
                    dtype: DType::I32,
                    shape,
                } if shape.len() >= 2 => Ok(()),
                other => Err(format!(
                    "draws an i32 tile of rank >= 2 (as the TPU's PRNG), not {other}"
                )),
            }
        }
        OpKind::LoadSlice { src, starts, sizes } => {
            one(1)?;
            let (dtype, shape) = accessed(ty(*src)?, "source")?;
            check_window(shape, starts, sizes, types)?;
            same(results[0], &Type::tile(dtype, sizes.clone()), "result")
        }
        OpKind::StoreSlice { dst, starts, value } => {
            one(0)?;
            let (dtype, shape) = accessed(ty(*dst)?, "destination")?;
            let (vd, vs) = value_of(ty(*value)?, "stored value")?;
            if vd != dtype {
                return Err(format!("stores {vd} into a ref of {dtype}"));
            }
            check_window(shape, starts, vs, types)
        }
        OpKind::LoadElement { src, indices } => {
            one(1)?;
            let (dtype, shape) = accessed(ty(*src)?, "source")?;
            check_window(shape, indices, &vec![1; shape.len()], types)?;
            same(results[0], &Type::scalar(dtype), "result")
        }
        OpKind::StoreElement {
            dst,
            indices,
            value,
        } => {
            one(0)?;
            let (dtype, shape) = accessed(ty(*dst)?, "destination")?;
            check_window(shape, indices, &vec![1; shape.len()], types)?;
            same(ty(*value)?, &Type::scalar(dtype), "stored value")
        }
        OpKind::Unary { op: u, x } => {
            one(1)?;
            let x = ty(*x)?;
            let (dtype, _) = value_of(x, "operand")?;
            if !u.info().domain.admits(dtype) {
                return Err(format!("not defined for {dtype}"));
            }
            same(results[0], x, "result")
        }
        OpKind::Binary { op: b, lhs, rhs } => {
            one(1)?;
            let (l, r) = (ty(*lhs)?, ty(*rhs)?);
            let (dtype, _) = value_of(l, "lhs")?;
            same(r, l, "rhs")?;
            if !b.info().domain.admits(dtype) {
                return Err(format!("not defined for {dtype}"));
            }
            same(results[0], l, "result")
        }
        OpKind::Compare { lhs, rhs, .. } => {
            one(1)?;
            let (l, r) = (ty(*lhs)?, ty(*rhs)?);
            let (_, shape) = value_of(l, "lhs")?;
            same(r, l, "rhs")?;
            same(results[0], &Type::tile(DType::Bool, shape), "result")
        }
        OpKind::Select {
            cond,
            on_true,
            on_false,
        } => {
            one(1)?;
            let (t, f) = (ty(*on_true)?, ty(*on_false)?);
            let (_, shape) = value_of(t, "true value")?;
            same(f, t, "false value")?;
            same(ty(*cond)?, &Type::tile(DType::Bool, shape), "condition")?;
            same(results[0], t, "result")
        }
        OpKind::Cast { x } => {
            one(1)?;
            let (_, shape) = value_of(ty(*x)?, "operand")?;
            let (_, rshape) = value_of(results[0], "result")?;
            if shape != rshape {
                return Err(format!("changes shape {shape:?} to {rshape:?}"));
            }
            Ok(())
        }
        OpKind::AssumeMultiple { x, multiple } => {
            one(1)?;
            if *multiple == 0 {
                return Err("a multiple of 0".to_string());
            }
            let (dtype, shape) = value_of(ty(*x)?, "operand")?;
            if !shape.is_empty() || !dtype.is_int() {
                return Err(format!("takes an integer scalar, got {}", ty(*x)?));
            }
            same(results[0], ty(*x)?, "result")
        }
        OpKind::Bitcast { x } => {
            one(1)?;
            let (from, shape) = value_of(ty(*x)?, "operand")?;
            let (to, rshape) = value_of(results[0], "result")?;
            if from == DType::Bool || to == DType::Bool {
                return Err(format!(
                    "cannot reinterpret {from} as {to}: bool has no bit pattern to share"
                ));
            }
            let want = bitcast_shape(shape, from, to)?;
            if rshape != want.as_slice() {
                return Err(format!(
                    "{from} {shape:?} reinterpreted as {to} is {want:?}, not {rshape:?}"
                ));
            }
            Ok(())
        }
        OpKind::Slice { x, starts, strides } => {
            one(1)?;
            let (dtype, shape) = value_of(ty(*x)?, "operand")?;
            let (_, sizes) = value_of(results[0], "result")?;
            slice_in_bounds(shape, starts, sizes, strides)?;
            same(results[0], &Type::tile(dtype, sizes.to_vec()), "result")
        }
        OpKind::Iota { dim } => {
            one(1)?;
            let (dtype, shape) = value_of(results[0], "result")?;
            if *dim >= shape.len() {
                return Err(format!("dimension {dim} out of range for shape {shape:?}"));
            }
            if dtype == DType::Bool {
                return Err("iota of bool".into());
            }
            Ok(())
        }
        OpKind::Broadcast { x, dims } => {
            one(1)?;
            let (dtype, shape) = value_of(ty(*x)?, "operand")?;
            let (rdtype, rshape) = value_of(results[0], "result")?;
            if rdtype != dtype {
                return Err(format!("changes dtype {dtype} to {rdtype}"));
            }
            if dims.len() != shape.len() {
                return Err(format!(
                    "operand of rank {} needs {} broadcast dims, got {dims:?}",
                    shape.len(),
                    shape.len()
                ));
            }
            for (i, (&d, &n)) in dims.iter().zip(shape).enumerate() {
                if d >= rshape.len() || (i > 0 && d <= dims[i - 1]) {
                    return Err(format!(
                        "broadcast dims {dims:?} must increase and be below the result rank {}",
                        rshape.len()
                    ));
                }
                if n != 1 && n != rshape[d] {
                    return Err(format!("cannot broadcast shape {shape:?} to {rshape:?}"));
                }
            }
            Ok(())
        }
        OpKind::Reshape { x } => {
            one(1)?;
            let x = ty(*x)?;
            let (dtype, shape) = value_of(x, "operand")?;
            let (rdtype, rshape) = value_of(results[0], "result")?;
            if rdtype != dtype || x.num_elements() != results[0].num_elements() {
                return Err(format!(
                    "cannot reshape {shape:?} ({dtype}) to {rshape:?} ({rdtype})"
                ));
            }
            Ok(())
        }
        OpKind::Transpose { x, perm } => {
            one(1)?;
            let (dtype, shape) = value_of(ty(*x)?, "operand")?;
            let mut seen = vec![false; shape.len()];
            for &p in perm {
                match seen.get_mut(p) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(format!(
                            "{perm:?} is not a permutation of the {} dims of {shape:?}",
                            shape.len()
                        ))
                    }
                }
            }
            if perm.len() != shape.len() {
                return Err(format!(
                    "{perm:?} is not a permutation of the {} dims of {shape:?}",
                    shape.len()
                ));
            }
            let permuted: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            same(results[0], &Type::tile(dtype, permuted), "result")
        }
        OpKind::Reduce {
            op: r,
            x,
            axes,
            keepdims,
        } => {
            one(1)?;
            let (dtype, shape) = value_of(ty(*x)?, "operand")?;
            let rshape = reduced_shape(shape, axes, *keepdims)?;
            if dtype == DType::Bool {
                return Err(format!("{} of bool", r.name()));
            }
            same(results[0], &Type::tile(dtype, rshape), "result")
        }
        OpKind::Scan { op: r, x, axis } => {
            one(1)?;
            let x = ty(*x)?;
            let (dtype, shape) = value_of(x, "operand")?;
            if *axis >= shape.len() {
                return Err(format!(
                    "axis {axis} is out of range for shape {shape:?} (a scan needs a tile)"
                ));
            }
            if !r.info().domain.admits(dtype) {
                return Err(format!("not defined for {dtype}"));
            }
            same(results[0], x, "result")
        }
        OpKind::Dot {
            lhs,
            rhs,
            transpose_lhs,
            transpose_rhs,
        } => {
            one(1)?;
            let (ld, ls) = value_of(ty(*lhs)?, "lhs")?;
            let (rd, rs) = value_of(ty(*rhs)?, "rhs")?;
            if ls.len() != 2 || rs.len() != 2 {
                return Err(format!("needs 2-D operands, got {ls:?} and {rs:?}"));
            }
            if ld != rd {
                return Err(format!("operands have different dtypes {ld} and {rd}"));
            }
            let acc = dot_accumulator(ld)
                .ok_or_else(|| format!("not defined for {ld} (floats and i8 only)"))?;
            let (m, k) = if *transpose_lhs {
                (ls[1], ls[0])
            } else {
                (ls[0], ls[1])
            };
            let (k2, n) = if *transpose_rhs {
                (rs[1], rs[0])
            } else {
                (rs[0], rs[1])
            };
            if k != k2 {
                return Err(format!(
                    "contracting dims differ: lhs {ls:?} gives {k}, rhs {rs:?} gives {k2}"
                ));
            }
            same(results[0], &Type::tile(acc, vec![m, n]), "result")
        }
        OpKind::If {
            cond,
            then_region,
            else_region,
        } => {
            same(ty(*cond)?, &Type::scalar(DType::Bool), "condition")?;
            for (name, r) in [("then", then_region), ("else", else_region)] {
                if !r.args.is_empty() {
                    return Err(format!(
                        "{name} region takes {} args, expected none",
                        r.args.len()
                    ));
                }
                region_yields(r, &results, types, name)?;
            }
            Ok(())
        }
        OpKind::Fori { lo, hi, init, body } => {
            expect_index(ty(*lo)?, "lower bound")?;
            expect_index(ty(*hi)?, "upper bound")?;
            if body.args.len() != init.len() + 1 {
                return Err(format!(
                    "body takes {} args, expected the index and {} carried values",
                    body.args.len(),
                    init.len()
                ));
            }
            expect_index(ty(body.args[0])?, "loop index")?;
            let init_types: Vec<&Type> = init.iter().map(|v| ty(*v)).collect::<Result<_, _>>()?;
            for (i, (a, t)) in body.args[1..].iter().zip(&init_types).enumerate() {
                same(ty(*a)?, t, &format!("body arg {}", i + 1))?;
            }
            region_yields(body, &init_types, types, "body")?;
            if results.len() != init.len() {
                return Err(format!(
                    "has {} results for {} carried values",
                    results.len(),
                    init.len()
                ));
            }
            for (r, t) in results.iter().zip(&init_types) {
                same(r, t, "result")?;
            }
            Ok(())
        }
        OpKind::RunScoped { body } => {
            for (i, a) in body.args.iter().enumerate() {
                match ty(*a)? {
                    Type::Ref { space, .. } if *space != MemorySpace::Any => {}
                    t => {
                        return Err(format!(
                            "scoped buffer #{i} has type {t}; scoped scratch is a VMEM, SMEM or \
                             semaphore ref"
                        ))
                    }
                }
            }
            let yields: Vec<&Type> = results.clone();
            region_yields(body, &yields, types, "body")
        }
        OpKind::DmaStart(c) | OpKind::DmaWait(c) => {
            one(0)?;
            check_dma(c, types)
        }
        OpKind::While { init, cond, body } => {
            let init_types: Vec<&Type> = init.iter().map(|v| ty(*v)).collect::<Result<_, _>>()?;
            for (name, r) in [("condition", cond), ("body", body)] {
                if r.args.len() != init.len() {
                    return Err(format!(
                        "{name} region takes {} args, expected the {} carried values",
                        r.args.len(),
                        init.len()
                    ));
                }
                for (i, (a, t)) in r.args.iter().zip(&init_types).enumerate() {
                    same(ty(*a)?, t, &format!("{name} arg {i}"))?;
                }
            }
            region_yields(cond, &[&Type::scalar(DType::Bool)], types, "condition")?;
            region_yields(body, &init_types, types, "body")?;
            if results.len() != init.len() {
                return Err(format!(
                    "has {} results for {} carried values",
                    results.len(),
                    init.len()
                ));
            }
            for (r, t) in results.iter().zip(&init_types) {
                same(r, t, "result")?;
            }
            Ok(())
        }
    }
}

/// The accumulation (and result) dtype of `dot` on `dtype` operands: f32 for every float,
/// as on the TPU (f64 is not a TPU type; it is accumulated in f32 like the others).
pub fn dot_accumulator(dtype: DType) -> Option<DType> {
    match dtype {
        d if d.is_float() => Some(DType::F32),
        // The MXU's integer mode: int8 products summed exactly in int32.
        DType::I8 => Some(DType::I32),
        _ => None,
    }
}

/// The shape after reducing `axes` of `shape`.
pub fn reduced_shape(
    shape: &[usize],
    axes: &[usize],
    keepdims: bool,
) -> Result<Vec<usize>, String> {
    if axes.is_empty()
        || axes.windows(2).any(|w| w[0] >= w[1])
        || axes.iter().any(|&a| a >= shape.len())
    {
        return Err(format!(
            "axes {axes:?} must be non-empty, increasing and below the rank {} of {shape:?}",
            shape.len()
        ));
    }
    Ok(shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect())
}

fn region_yields(r: &Region, expected: &[&Type], types: &[Type], name: &str) -> Result<(), String> {
    if r.yields.len() != expected.len() {
        return Err(format!(
            "{name} region yields {} values, expected {}",
            r.yields.len(),
            expected.len()
        ));
    }
    for (i, (y, t)) in r.yields.iter().zip(expected).enumerate() {
        let yt = types
            .get(y.0 as usize)
            .ok_or_else(|| format!("{y} has no type"))?;
        same(yt, t, &format!("{name} region yield #{i}"))?;
    }
    Ok(())
}

fn check_window(
    shape: &[usize],
    starts: &[Offset],
    sizes: &[usize],
    types: &[Type],
) -> Result<(), String> {
    if starts.len() != shape.len() || sizes.len() != shape.len() {
        return Err(format!(
            "ref of shape {shape:?} needs {} starts and sizes, got {} and {}",
            shape.len(),
            starts.len(),
            sizes.len()
        ));
    }
    for (i, ((s, &n), &d)) in starts.iter().zip(sizes).zip(shape).enumerate() {
        match s {
            Offset::Static(s) if s + n > d => {
                return Err(format!(
                    "dim {i}: window {s}..{} exceeds the ref's size {d}",
                    s + n
                ));
            }
            Offset::Dynamic(v) => {
                let t = types
                    .get(v.0 as usize)
                    .ok_or_else(|| format!("{v} has no type"))?;
                expect_index(t, &format!("start of dim {i}"))?;
                if n > d {
                    return Err(format!(
                        "dim {i}: window of size {n} exceeds the ref's size {d}"
                    ));
                }
            }
            Offset::Static(_) => {}
        }
    }
    Ok(())
}

fn value_of<'t>(t: &'t Type, what: &str) -> Result<(DType, &'t [usize]), String> {
    match t {
        Type::Value { dtype, shape } => Ok((*dtype, shape)),
        Type::Ref { .. } => Err(format!("{what} is a ref ({t}); load it first")),
    }
}

fn ref_of<'t>(
    t: &'t Type,
    what: &str,
) -> Result<(DType, &'t [usize], super::types::MemorySpace), String> {
    match t {
        Type::Ref {
            dtype,
            shape,
            space,
        } => Ok((*dtype, shape, *space)),
        Type::Value { .. } => Err(format!("{what} must be a ref, got {t}")),
    }
}

/// A ref the body may load or store: HBM (`Any`) refs are reached by DMA only, and
/// semaphores only by DMA ops.
fn accessed<'t>(t: &'t Type, what: &str) -> Result<(DType, &'t [usize]), String> {
    let (dtype, shape, space) = ref_of(t, what)?;
    match space {
        MemorySpace::Any => Err(HBM_ACCESS.to_string()),
        MemorySpace::Semaphore => Err(format!(
            "{what} is a DMA semaphore array ({t}); semaphores are only signalled and waited \
             on by `async_copy(..).start()`/`.wait()`"
        )),
        MemorySpace::Vmem | MemorySpace::Smem => Ok((dtype, shape)),
    }
}

/// The message for a load or store of an HBM ref (the tracer reports it at the user's line).
pub const HBM_ACCESS: &str = "an HBM ref must be copied to VMEM by DMA before it is read (or \
     written): use `async_copy(hbm.at(..), vmem.at(..), sems.at(i))` with `.start()` and \
     `.wait()`";

/// Both refs have one dtype and one window shape (a DMA copies elements, it does not convert
/// or reshape); the semaphore is an index into a semaphore array.
fn check_dma(c: &DmaCopy, types: &[Type]) -> Result<(), String> {
    let ty = |v: ValueId| {
        types
            .get(v.0 as usize)
            .ok_or_else(|| format!("{v} has no type"))
    };
    let (sd, ss, sspace) = ref_of(ty(c.src)?, "DMA source")?;
    let (dd, ds, dspace) = ref_of(ty(c.dst)?, "DMA destination")?;
    if sd != dd {
        return Err(format!(
            "copies {sd} into {dd}: a DMA moves bytes, so both refs must have one dtype"
        ));
    }
    for (what, space) in [("source", sspace), ("destination", dspace)] {
        if space == MemorySpace::Semaphore {
            return Err(format!("the DMA {what} is a semaphore array"));
        }
    }
    check_window(ss, &c.src_starts, &c.sizes, types)
        .map_err(|e| format!("source window {:?}: {e}", c.sizes))?;
    check_window(ds, &c.dst_starts, &c.sizes, types)
        .map_err(|e| format!("destination window {:?}: {e}", c.sizes))?;
    let (_, sem_shape, space) = ref_of(ty(c.sem)?, "DMA semaphore")?;
    if space != MemorySpace::Semaphore || sem_shape.len() != 1 {
        return Err(format!(
            "the semaphore must be a 1-D DMA semaphore array (scratch `DmaSemaphores::new(n)`), \
             got {}",
            ty(c.sem)?
        ));
    }
    check_window(sem_shape, std::slice::from_ref(&c.sem_index), &[1], types)
        .map_err(|e| format!("semaphore index: {e}"))
}

fn same(actual: &Type, expected: &Type, what: &str) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("{what} has type {actual}, expected {expected}"))
    }
}

fn expect_index(t: &Type, what: &str) -> Result<(), String> {
    same(t, &Type::index(), what)
}

/// The shape of `shape` (of `from`) reinterpreted as `to`: the same where the widths agree,
/// else the second-minor dim scaled by the width ratio, as Pallas' `pltpu.bitcast` packs.
pub fn bitcast_shape(shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, String> {
    let (fb, tb) = (from.bits(), to.bits());
    if fb == tb {
        return Ok(shape.to_vec());
    }
    let rank = shape.len();
    if rank < 2 {
        return Err(format!(
            "cannot reinterpret {from} ({fb} bits) as {to} ({tb} bits) in a value of shape \
             {shape:?}: a width change packs along the second-minor dim, so it needs rank >= 2"
        ));
    }
    let rows = shape[rank - 2];
    if !(rows * fb).is_multiple_of(tb) {
        return Err(format!(
            "cannot pack {rows} rows of {from} ({fb} bits) into {to} ({tb} bits) rows: the \
             second-minor dim of {shape:?} must be a multiple of {}",
            tb / fb
        ));
    }
    let mut out = shape.to_vec();
    out[rank - 2] = rows * fb / tb;
    Ok(out)
}

/// Checks the static window `starts + strides * (sizes - 1) < shape` dim by dim.
pub fn slice_in_bounds(
    shape: &[usize],
    starts: &[usize],
    sizes: &[usize],
    strides: &[usize],
) -> Result<(), String> {
    if starts.len() != shape.len() || sizes.len() != shape.len() || strides.len() != shape.len() {
        return Err(format!(
            "a slice of a rank-{} value needs {} starts, sizes and strides, got {}, {} and {}",
            shape.len(),
            shape.len(),
            starts.len(),
            sizes.len(),
            strides.len()
        ));
    }
    for (d, (((&n, &start), &size), &stride)) in
        shape.iter().zip(starts).zip(sizes).zip(strides).enumerate()
    {
        if stride == 0 {
            return Err(format!("dim {d}: stride 0"));
        }
        let end = if size == 0 {
            start
        } else {
            start + stride * (size - 1) + 1
        };
        if size == 0 || end > n {
            return Err(format!(
                "dim {d}: {size} elements from {start} with stride {stride} do not fit in \
                 {n} (shape {shape:?})"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::reduced_shape;

    #[test]
    fn reduced_shapes() {
        assert_eq!(reduced_shape(&[8, 128], &[1], true).unwrap(), vec![8, 1]);
        assert_eq!(
            reduced_shape(&[8, 128], &[0, 1], false).unwrap(),
            Vec::<usize>::new()
        );
        assert!(reduced_shape(&[8, 128], &[2], false).is_err());
        assert!(reduced_shape(&[8, 128], &[1, 0], false).is_err());
    }
}
