//! A compiled function's replay plan, made from the graph its trace recorded: where each
//! program input comes from, which results it returns, which older tensors it writes.

use crate::error::{EagerError, Result};
use crate::graph::Src;
use crate::mode::EagerMode;
use crate::runtime::Runtime;
use crate::stats::{count, FlushReason};
use crate::tensor::{OpName, State, Storage, Tensor};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tessera_lowering::stablehlo::TensorType;
use tessera_ops::CheckKind;
use tessera_runtime::{Buffer, Executable};

/// Where a replayed program's input comes from.
enum Source {
    /// The function's argument.
    Arg(usize),
    /// The current value of a tensor the function captured (weights updated in place).
    Captured(Arc<Storage>),
    /// A value made during the trace (an uploaded constant).
    Const(Arc<Buffer>),
    /// A random op's key: a new one per replay ([`crate::rng`]).
    RngKey,
}

/// A tensor a replay writes.
enum Target {
    Arg(usize),
    Captured(Arc<Storage>),
}

impl Target {
    fn storage<'a>(&'a self, args: &'a [Tensor]) -> &'a Arc<Storage> {
        match self {
            Target::Arg(i) => &args[*i].storage,
            Target::Captured(s) => s,
        }
    }
}

/// A compiled function's program and how to feed and unpack it.
pub(crate) struct Replay {
    exe: Arc<Executable>,
    pub arg_types: Vec<TensorType>,
    sources: Vec<Source>,
    /// Per returned tensor: its position among the outputs, its type.
    outs: Vec<(usize, TensorType)>,
    /// Tensors that existed before the trace and that it wrote: output position, which,
    /// type.
    writes: Vec<(usize, Target, TensorType)>,
    ops: Vec<OpName>,
    /// The program's data checks (op name, kind); their flags are its outputs from
    /// `checks_at` on, read at the next sync point.
    checks: Arc<Vec<(String, CheckKind)>>,
    checks_at: usize,
}

impl Replay {
    /// Runs the program on `args` (no recording); None when a captured tensor's type changed
    /// since the trace (then the caller traces again).
    pub(crate) fn run(&self, rt: &mut Runtime, args: &[Tensor]) -> Result<Option<Vec<Tensor>>> {
        let mut bufs = Vec::with_capacity(self.sources.len());
        for src in &self.sources {
            let (ty, state) = match src {
                Source::Arg(i) => {
                    let c = args[*i].storage.lock();
                    (c.ty.clone(), c.state.clone())
                }
                Source::Captured(s) => {
                    let c = s.lock();
                    (c.ty.clone(), c.state.clone())
                }
                Source::Const(b) => {
                    bufs.push(b.clone());
                    continue;
                }
                Source::RngKey => {
                    bufs.push(rt.upload_buffer(&crate::rng::next_key())?);
                    continue;
                }
            };
            match state {
                State::Ready { buf, .. } if buf.shape() == ty.shape.as_slice() => bufs.push(buf),
                State::Failed { op, message } => return Err(EagerError::Failed { op, message }),
                _ => return Ok(None),
            }
        }
        if self
            .writes
            .iter()
            .any(|(_, t, ty)| t.storage(args).lock().ty != *ty)
        {
            return Ok(None);
        }
        let refs: Vec<&Buffer> = bufs.iter().map(|b| &**b).collect();
        let start = Instant::now();
        let outs = self.exe.execute(&refs);
        let nanos = start.elapsed().as_nanos() as u64;
        count(EagerMode::Compiled, |s| {
            s.launches += 1;
            s.cache_hits += 1;
            s.execute_nanos += nanos;
        });
        let outs: Vec<Arc<Buffer>> = outs
            .map_err(|e| EagerError::Device {
                op: format!("a compiled function of {} op(s)", self.ops.len()),
                args: String::new(),
                message: e.to_string(),
            })?
            .into_iter()
            .map(Arc::new)
            .collect();
        for ((op, kind), flag) in self.checks.iter().zip(outs.iter().skip(self.checks_at)) {
            rt.defer_checks(op.clone(), std::slice::from_ref(kind), vec![flag.clone()])?;
        }
        let last = self.ops.last().copied();
        for (at, t, ty) in &self.writes {
            let mut c = t.storage(args).lock();
            c.ty = ty.clone();
            c.state = State::Ready {
                buf: outs[*at].clone(),
                op: last,
            };
        }
        Ok(Some(
            self.outs
                .iter()
                .map(|(at, ty)| {
                    Tensor::from_state(
                        ty.clone(),
                        State::Ready {
                            buf: outs[*at].clone(),
                            op: last,
                        },
                        rt.kind,
                    )
                })
                .collect(),
        ))
    }
}

impl Runtime {
    /// Runs a compiled function's trace (the pending graph) and makes its replay plan:
    /// `args` are the function's inputs, `returns` its results, `since` the first storage
    /// serial of the trace (older storages the trace wrote are written again by each replay).
    /// None when the trace cannot be replayed as one program (a result that is not computed
    /// by it, a view argument).
    pub(crate) fn flush_traced(
        &mut self,
        args: &[Tensor],
        returns: &[Tensor],
        since: u64,
    ) -> Result<Option<Replay>> {
        let Some(f) = self.flush_graph(FlushReason::Compiled)? else {
            return Ok(None);
        };
        if args.iter().chain(returns).any(|t| t.is_view()) {
            return Ok(None);
        }
        let position = |s: &Arc<Storage>| {
            f.holders
                .iter()
                .find(|(_, h)| Arc::ptr_eq(h, s))
                .and_then(|(r, _)| f.live.binary_search(&(r.node, r.out)).ok())
        };
        let mut outs = Vec::new();
        for t in returns {
            let Some(at) = position(&t.storage) else {
                return Ok(None);
            };
            outs.push((at, t.ty()));
        }
        let mut writes = Vec::new();
        for (r, s) in &f.holders {
            let is_return = returns.iter().any(|t| Arc::ptr_eq(&t.storage, s));
            if s.serial < since && !is_return {
                let at = f.live.binary_search(&(r.node, r.out)).expect("live");
                let target = match args.iter().position(|a| Arc::ptr_eq(&a.storage, s)) {
                    Some(i) => Target::Arg(i),
                    None => Target::Captured(s.clone()),
                };
                writes.push((at, target, s.lock().ty.clone()));
            }
        }
        // A random op's key is its last argument, an input of its own.
        let keys: Vec<u32> = (f.graph.nodes.iter())
            .filter(|n| n.entry.random)
            .filter_map(|n| match n.args.last() {
                Some(Src::Input(i)) => Some(*i),
                _ => None,
            })
            .collect();
        let mut sources = Vec::new();
        for (i, (b, from)) in f.graph.inputs.iter().zip(&f.graph.input_from).enumerate() {
            if keys.contains(&(i as u32)) {
                sources.push(Source::RngKey);
                continue;
            }
            let from = from.as_ref().and_then(Weak::upgrade);
            let arg = from
                .as_ref()
                .and_then(|s| args.iter().position(|a| Arc::ptr_eq(&a.storage, s)));
            sources.push(match (arg, from) {
                (Some(i), _) => Source::Arg(i),
                (None, Some(s)) if s.serial < since => Source::Captured(s),
                _ => Source::Const(b.clone()),
            });
        }
        let ops = f.graph.nodes.iter().map(|n| n.entry.op()).collect();
        Ok(Some(Replay {
            exe: f.exe,
            arg_types: args.iter().map(Tensor::ty).collect(),
            sources,
            outs,
            writes,
            ops,
            checks: f.checks.clone(),
            checks_at: f.live.len(),
        }))
    }
}
