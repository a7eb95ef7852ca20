//! The thread-local graph that tracer handles point into. A trace session pushes a builder,
//! vocabulary calls record ops into its innermost open region, and the session pops it.

use super::error::TraceError;
use crate::ir::{check_op, Func, Literal, Loc, OpKind, Operation, Region, Type, ValueId};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

/// A handle's identity: which trace it belongs to and its SSA value there.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Val {
    pub(crate) trace: u32,
    pub(crate) id: ValueId,
}

struct OpenRegion {
    scope: u32,
    args: Vec<ValueId>,
    ops: Vec<Operation>,
    /// A `fori`/`while` body or condition (its ops run once per iteration).
    is_loop: bool,
}

/// The graph under construction (opaque; public only because `Operand` names it).
#[doc(hidden)]
pub struct Builder {
    trace: u32,
    values: Vec<Type>,
    /// The region scope that defines each value (checked on use: no escaping a branch).
    scope_of: Vec<u32>,
    regions: Vec<OpenRegion>,
    next_scope: u32,
    errors: Vec<TraceError>,
    /// `Some(rank)` in kernel bodies, `None` in index maps (no program_id there).
    pub(crate) grid_rank: Option<usize>,
    /// The key of the latest `prng_seed` and where it was called.
    pub(crate) prng_key: Option<(Val, Loc)>,
    /// `prng_random_bits` calls traced so far (the next draw's site number).
    pub(crate) prng_sites: u32,
}

thread_local! {
    static STACK: RefCell<Vec<Builder>> = const { RefCell::new(Vec::new()) };
}

static NEXT_TRACE: AtomicU32 = AtomicU32::new(1);

/// Runs `f` on the innermost active builder.
///
/// # Panics
/// When no kernel or index map is being traced on this thread: tracer values exist only
/// inside `Kernel::trace` or an index map, so this is a misuse of the API, not bad input.
pub(crate) fn with<R>(f: impl FnOnce(&mut Builder) -> R) -> R {
    STACK.with(|s| {
        let mut stack = s.borrow_mut();
        let b = stack.last_mut().expect("tessera tracer value used outside a kernel trace (call it from a kernel body or an index map)");
        f(b)
    })
}

/// One trace: a function being built. Dropping it without `finish` discards it.
pub(crate) struct Session {
    depth: usize,
}

impl Session {
    /// Starts a function whose params have `params` types; returns their handles.
    pub(crate) fn begin(params: &[Type], grid_rank: Option<usize>) -> (Session, Vec<Val>) {
        let trace = NEXT_TRACE.fetch_add(1, Ordering::Relaxed);
        let mut b = Builder {
            trace,
            values: Vec::new(),
            scope_of: Vec::new(),
            regions: vec![OpenRegion {
                scope: 0,
                args: Vec::new(),
                ops: Vec::new(),
                is_loop: false,
            }],
            next_scope: 1,
            errors: Vec::new(),
            grid_rank,
            prng_key: None,
            prng_sites: 0,
        };
        let args: Vec<Val> = params.iter().map(|t| b.new_value(t.clone())).collect();
        b.regions[0].args = args.iter().map(|v| v.id).collect();
        let depth = STACK.with(|s| {
            let mut s = s.borrow_mut();
            s.push(b);
            s.len()
        });
        (Session { depth }, args)
    }

    /// Closes the function with `yields` as its results; the first recorded error wins.
    pub(crate) fn finish(self, name: &str, loc: Loc, yields: &[Val]) -> Result<Func, TraceError> {
        let mut b = STACK
            .with(|s| s.borrow_mut().pop())
            .expect("session owns the top builder");
        let ids: Vec<ValueId> = yields.iter().map(|&v| b.id(v, "yield", loc)).collect();
        std::mem::forget(self);
        if let Some(e) = b.errors.into_iter().next() {
            return Err(e);
        }
        let top = b.regions.pop().expect("top region");
        Ok(Func {
            name: name.to_string(),
            values: b.values,
            body: Region {
                args: top.args,
                ops: top.ops,
                yields: ids,
            },
            loc,
        })
    }
}

impl Drop for Session {
    // Unwinding out of a trace (a panic in user code) must not leave a stale builder behind.
    fn drop(&mut self) {
        STACK.with(|s| s.borrow_mut().truncate(self.depth - 1));
    }
}

impl Builder {
    fn new_value(&mut self, ty: Type) -> Val {
        let id = ValueId(self.values.len() as u32);
        self.values.push(ty);
        self.scope_of
            .push(self.regions.last().map_or(0, |r| r.scope));
        Val {
            trace: self.trace,
            id,
        }
    }

    pub(crate) fn error(&mut self, e: TraceError) {
        self.errors.push(e);
    }

    pub(crate) fn op_error(&mut self, op: &'static str, message: impl Into<String>, loc: Loc) {
        self.error(TraceError::Op {
            op,
            message: message.into(),
            loc,
        });
    }

    /// The SSA id of a handle, after checking it belongs to this trace and to a region still
    /// open. On failure records an error and returns a placeholder index value.
    pub(crate) fn id(&mut self, v: Val, op: &'static str, loc: Loc) -> ValueId {
        let problem = if v.trace != self.trace {
            Some("uses a value from another trace (a tracer value kept from an earlier kernel or index map)")
        } else {
            let scope = self.scope_of[v.id.0 as usize];
            (!self.regions.iter().any(|r| r.scope == scope))
                .then_some("uses a value defined inside an `if` branch or loop body outside of it; carry it out as a result")
        };
        match problem {
            None => v.id,
            Some(p) => {
                self.op_error(op, p, loc);
                self.new_value(Type::index()).id
            }
        }
    }

    /// The type of a handle's value (a placeholder scalar for a foreign handle).
    pub(crate) fn ty(&self, v: Val) -> Type {
        if v.trace == self.trace {
            self.values[v.id.0 as usize].clone()
        } else {
            Type::index()
        }
    }

    /// Records an op (after checking its types) and returns handles to its results. A bad op
    /// is reported at `loc` and its results become unconnected placeholders.
    pub(crate) fn emit(&mut self, kind: OpKind, result_types: Vec<Type>, loc: Loc) -> Vec<Val> {
        let results: Vec<Val> = result_types
            .into_iter()
            .map(|t| self.new_value(t))
            .collect();
        let op = Operation {
            results: results.iter().map(|v| v.id).collect(),
            kind,
            loc,
        };
        match check_op(&op, &self.values) {
            Ok(()) => self.regions.last_mut().expect("open region").ops.push(op),
            Err(message) => self.op_error(op.kind.name(), message, loc),
        }
        results
    }

    pub(crate) fn emit1(&mut self, kind: OpKind, result_type: Type, loc: Loc) -> Val {
        self.emit(kind, vec![result_type], loc)[0]
    }

    pub(crate) fn constant(&mut self, value: Literal, ty: Type, loc: Loc) -> Val {
        self.emit1(OpKind::Constant { value }, ty, loc)
    }

    /// Opens a nested region with args of the given types.
    pub(crate) fn begin_region(&mut self, arg_types: Vec<Type>) -> Vec<Val> {
        self.open_region(arg_types, false)
    }

    /// [`Builder::begin_region`] for a loop's body or condition.
    pub(crate) fn begin_loop_region(&mut self, arg_types: Vec<Type>) -> Vec<Val> {
        self.open_region(arg_types, true)
    }

    /// Whether `v` was defined outside a loop region that is open now (so a use of it runs
    /// once per iteration of that loop); `None` when its region has ended.
    pub(crate) fn defined_outside_an_open_loop(&self, v: Val) -> Option<bool> {
        let scope = self.scope_of[v.id.0 as usize];
        let at = self.regions.iter().position(|r| r.scope == scope)?;
        Some(self.regions[at + 1..].iter().any(|r| r.is_loop))
    }

    fn open_region(&mut self, arg_types: Vec<Type>, is_loop: bool) -> Vec<Val> {
        let scope = self.next_scope;
        self.next_scope += 1;
        self.regions.push(OpenRegion {
            scope,
            args: Vec::new(),
            ops: Vec::new(),
            is_loop,
        });
        let args: Vec<Val> = arg_types.into_iter().map(|t| self.new_value(t)).collect();
        self.regions.last_mut().expect("just pushed").args = args.iter().map(|v| v.id).collect();
        args
    }

    pub(crate) fn end_region(&mut self, yields: &[Val], op: &'static str, loc: Loc) -> Region {
        let ids: Vec<ValueId> = yields.iter().map(|&v| self.id(v, op, loc)).collect();
        let r = self.regions.pop().expect("begin_region before end_region");
        Region {
            args: r.args,
            ops: r.ops,
            yields: ids,
        }
    }
}
