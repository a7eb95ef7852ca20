//! DeferAndFuse: ops recorded into this thread's pending graph (their result types known at
//! record time from the lowering cache, so shape errors surface at the op), and run at a sync
//! point as ONE program whose outputs are only the values some tensor still holds. The
//! program is cached under a structural key (op entries, how they connect, which results
//! live), so a repeated loop body compiles once.

use crate::cache::OpEntry;
use crate::error::{EagerError, Result};
use crate::mode::EagerMode;
use crate::runtime::{Runtime, Val};
use crate::stats::{count, FlushReason};
use crate::tensor::{PendingRef, State, Storage, Tensor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;
use tessera_lowering::stablehlo::{FuncBuilder, TensorType, Value};
use tessera_ops::{lower_planned, result_values, Lower};
use tessera_runtime::{Buffer, CompileOptions, DeviceKind, Executable};

/// Where a node's argument comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// A device buffer the graph reads.
    Input(u32),
    /// Result `.1` of node `.0`.
    Node(u32, u32),
}

pub(crate) struct Node {
    pub entry: Arc<OpEntry>,
    pub args: Vec<Src>,
}

/// A graph is cut once it holds this many ops (TorchTPU's forced split of very large
/// graphs): compile time grows with size, and a loop without sync points must still run.
pub const MAX_PENDING_OPS: usize = 2048;

thread_local! {
    static SIZE_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_PENDING_OPS) };
}

/// Sets this thread's size limit of a pending graph (default [`MAX_PENDING_OPS`]).
pub fn set_max_pending_ops(n: usize) {
    SIZE_LIMIT.with(|c| c.set(n.max(1)));
}

/// The period of the tail of `ids`: the smallest `p` with the last `p` ids equal to the `p`
/// before them.
fn tail_period(ids: &[u64]) -> Option<usize> {
    let n = ids.len();
    (1..=n / 2).find(|&p| ids[n - p..] == ids[n - 2 * p..n - p])
}

pub(crate) struct Graph {
    /// Unique per graph (a flush starts a new one), so a stale pending reference is caught.
    pub id: u64,
    inputs: Vec<Arc<Buffer>>,
    /// The storage each input was read from (None: a view's base was read through ops).
    input_from: Vec<Option<Weak<Storage>>>,
    input_at: HashMap<usize, u32>,
    nodes: Vec<Node>,
    /// Storages that took a pending result; at a flush, those still alive and still holding
    /// it make that result an output.
    holders: Vec<(PendingRef, Weak<Storage>)>,
    /// The mode the graph was recorded in (its flush is counted there).
    mode: EagerMode,
}

/// A graph that ran, with its live results and their buffers.
struct Flushed {
    graph: Graph,
    live: Vec<(u32, u32)>,
    holders: Vec<(PendingRef, Arc<Storage>)>,
    exe: Arc<Executable>,
}

/// Where a replayed program's input comes from.
enum Source {
    /// The function's argument.
    Arg(usize),
    /// The current value of a tensor the function captured (weights updated in place).
    Captured(Arc<Storage>),
    /// A value made during the trace (an uploaded constant).
    Const(Arc<Buffer>),
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
    ops: Vec<&'static tessera_ops::OpSchema>,
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

/// One compiled fused program.
struct Fused {
    exe: Arc<Executable>,
}

type FusedMap = HashMap<Vec<u64>, Arc<Fused>>;

fn fused_cache() -> &'static Mutex<FusedMap> {
    static MAP: OnceLock<Mutex<FusedMap>> = OnceLock::new();
    MAP.get_or_init(Default::default)
}

impl Graph {
    pub fn new() -> Graph {
        static IDS: AtomicU64 = AtomicU64::new(1);
        Graph {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            inputs: Vec::new(),
            input_from: Vec::new(),
            input_at: HashMap::new(),
            nodes: Vec::new(),
            holders: Vec::new(),
            mode: EagerMode::DeferAndFuse,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether to cut the graph now (materialization rule "size limit, cut where a repeated
    /// loop body ends"): past the limit, the graph waits until its length is a whole number
    /// of the repeating tail's period, so a loop without sync points is cut at the same place
    /// in its body every time and every cut compiles to the same program. A graph twice the
    /// limit with no period is cut anyway.
    pub fn is_full(&self) -> bool {
        let limit = SIZE_LIMIT.with(|c| c.get());
        let n = self.nodes.len();
        if n < limit {
            return false;
        }
        if n >= 2 * limit {
            return true;
        }
        let ids: Vec<u64> = self.nodes.iter().map(|n| n.entry.id).collect();
        tail_period(&ids).is_some_and(|p| n % p == 0)
    }

    /// Appends a node; returns its results as pending values.
    pub fn record(
        &mut self,
        entry: &Arc<OpEntry>,
        inputs: Vec<(Val, Option<Weak<Storage>>)>,
        mode: EagerMode,
    ) -> Vec<Val> {
        if self.nodes.is_empty() {
            self.mode = mode;
        }
        let args = inputs
            .into_iter()
            .map(|(v, from)| match v {
                Val::Buf(b) => {
                    let key = Arc::as_ptr(&b) as usize;
                    let next = self.inputs.len() as u32;
                    let at = *self.input_at.entry(key).or_insert(next);
                    if at == next {
                        self.inputs.push(b);
                        self.input_from.push(from);
                    }
                    Src::Input(at)
                }
                Val::Pending(r) => Src::Node(r.node, r.out),
            })
            .collect();
        let node = self.nodes.len() as u32;
        self.nodes.push(Node {
            entry: entry.clone(),
            args,
        });
        (0..entry.results.len() as u32)
            .map(|out| {
                Val::Pending(PendingRef {
                    graph: self.id,
                    node,
                    out,
                })
            })
            .collect()
    }

    /// Notes that `s` may hold a pending value of this graph.
    pub fn hold(&mut self, s: &Arc<Storage>) {
        if let State::Pending(r) = s.lock().state {
            if r.graph == self.id {
                self.holders.push((r, Arc::downgrade(s)));
            }
        }
    }
}

/// The structural key of a flush: per node its entry and argument sources, then the live
/// results. Input buffers are named by first use, so their identity does not matter.
fn key_of(g: &Graph, live: &[(u32, u32)]) -> Vec<u64> {
    let mut k = Vec::with_capacity(g.nodes.len() * 4 + live.len() + 2);
    k.push(g.inputs.len() as u64);
    for n in &g.nodes {
        k.push(n.entry.id);
        k.push(n.args.len() as u64);
        for a in &n.args {
            k.push(match *a {
                Src::Input(i) => i as u64,
                Src::Node(n, o) => (1 << 63) | ((n as u64) << 24) | o as u64,
            });
        }
    }
    k.push(u64::MAX);
    k.extend(live.iter().map(|&(n, o)| ((n as u64) << 24) | o as u64));
    k
}

/// Elementwise ops whose fused code is slower on XLA CPU than their own kernels: a chain of
/// 50 `tanh` on 256x256 f32 took 15 ms as one program and 3.6 ms as one program per op
/// (strict: 4.8 ms); 50 `sin`, 58 ms vs 18 ms; fusing 50 `mul`s instead gained 10x. The
/// loss grows with the fused chain (cut every 5: 6 ms, every 10: 9 ms).
const SLOW_FUSED_ON_CPU: [&str; 10] = [
    "tanh", "sin", "cos", "tan", "exp", "log", "sigmoid", "erf", "asin", "atan",
];

/// Tensors smaller than this run transcendental ops fast enough fused (the launch saved
/// matters more).
const SLOW_FUSED_MIN_ELEMENTS: usize = 16384;

/// Materialization rule: whether the graph is cut right after this op (a transcendental
/// elementwise op on a large tensor, on the CPU plugin).
pub(crate) fn cut_after(entry: &OpEntry, device: DeviceKind) -> bool {
    device == DeviceKind::Cpu
        && SLOW_FUSED_ON_CPU.contains(&entry.op().name)
        && entry
            .results
            .first()
            .is_some_and(|t| t.num_elements() >= SLOW_FUSED_MIN_ELEMENTS)
}

/// Lowers every node of `g` into one function returning the `live` results.
fn build_module(
    g: &Graph,
    live: &[(u32, u32)],
    device: tessera_runtime::DeviceKind,
) -> Result<String> {
    let mut cx = Lower {
        f: FuncBuilder::new("main"),
        seed: 0,
        device,
    };
    let ins: Vec<Value> = g
        .inputs
        .iter()
        .map(|b| cx.f.arg(TensorType::new(b.shape(), b.dtype())))
        .collect();
    let mut vals: Vec<Vec<Value>> = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let args: Vec<Value> = n
            .args
            .iter()
            .map(|a| match *a {
                Src::Input(i) => ins[i as usize].clone(),
                Src::Node(j, o) => vals[j as usize][o as usize].clone(),
            })
            .collect();
        cx.seed = n.entry.plan.options.seed;
        let lowered = lower_planned(&mut cx, &n.entry.plan, &args)
            .map_err(|e| EagerError::op(String::new(), e))?;
        let results = result_values(&lowered.outs);
        vals.push(results);
    }
    let outs: Vec<&Value> = live
        .iter()
        .map(|&(n, o)| &vals[n as usize][o as usize])
        .collect();
    let m =
        cx.f.finish(&outs)
            .map_err(|e| EagerError::Usage(format!("building the fused program: {e}")))?;
    Ok(m.into_text())
}

impl Runtime {
    /// Runs this thread's pending graph as one program. On failure every op that did not
    /// depend on the failing one still gets its value (the graph is rerun op by op), the
    /// failed ones' tensors carry the error, and the first error is returned.
    pub(crate) fn flush(&mut self, reason: FlushReason) -> Result<()> {
        self.flush_graph(reason).map(|_| ())
    }

    /// Runs the pending graph; returns it with its live results, their buffers and the
    /// program (None when nothing was pending or live).
    fn flush_graph(&mut self, reason: FlushReason) -> Result<Option<Flushed>> {
        if self.graph.len() == 0 {
            return Ok(None);
        }
        let g = std::mem::replace(&mut self.graph, Graph::new());
        count(g.mode, |s| *s.flushes.entry(reason).or_default() += 1);
        let mut live = Vec::new();
        let mut holders = Vec::new();
        for (r, w) in &g.holders {
            let Some(s) = w.upgrade() else { continue };
            if matches!(s.lock().state, State::Pending(p) if p == *r) {
                live.push((r.node, r.out));
                holders.push((*r, s));
            }
        }
        live.sort_unstable();
        live.dedup();
        if live.is_empty() {
            return Ok(None);
        }
        match self.run_fused(&g, &live) {
            Ok((exe, bufs)) => {
                for (r, s) in &holders {
                    let at = live
                        .binary_search(&(r.node, r.out))
                        .expect("every holder's result is live");
                    let mut c = s.lock();
                    if matches!(c.state, State::Pending(p) if p == *r) {
                        c.state = State::Ready {
                            buf: bufs[at].clone(),
                            op: Some(g.nodes[r.node as usize].entry.op()),
                        };
                    }
                }
                Ok(Some(Flushed {
                    graph: g,
                    live,
                    holders,
                    exe,
                }))
            }
            Err(e) => {
                self.run_op_by_op(&g, holders);
                Err(e)
            }
        }
    }

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
        let mut sources = Vec::new();
        for (b, from) in f.graph.inputs.iter().zip(&f.graph.input_from) {
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
        }))
    }

    fn run_fused(
        &mut self,
        g: &Graph,
        live: &[(u32, u32)],
    ) -> Result<(Arc<Executable>, Vec<Arc<Buffer>>)> {
        let key = key_of(g, live);
        let cached = fused_cache()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let fused = match cached {
            Some(f) => {
                count(g.mode, |s| s.cache_hits += 1);
                f
            }
            None => {
                let text = build_module(g, live, self.kind)?;
                dump(&text);
                let exe = self
                    .client
                    .compile(&text, &CompileOptions::default())
                    .map_err(|e| fused_error(g, &e.to_string()))?;
                count(g.mode, |s| s.compiles += 1);
                let f = Arc::new(Fused { exe: Arc::new(exe) });
                fused_cache()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, f.clone());
                f
            }
        };
        let refs: Vec<&Buffer> = g.inputs.iter().map(|b| &**b).collect();
        let start = Instant::now();
        let outs = fused.exe.execute(&refs);
        let nanos = start.elapsed().as_nanos() as u64;
        count(g.mode, |s| {
            s.launches += 1;
            s.execute_nanos += nanos;
        });
        let outs = outs.map_err(|e| fused_error(g, &e.to_string()))?;
        if g.mode == EagerMode::Debug {
            for o in &outs {
                o.block_until_ready()
                    .map_err(|e| fused_error(g, &e.to_string()))?;
            }
        }
        Ok((fused.exe.clone(), outs.into_iter().map(Arc::new).collect()))
    }

    /// After a failed fused run: each op alone, waiting for each, so an error lands on the op
    /// that caused it and on what depends on it, and nothing else is lost.
    fn run_op_by_op(&mut self, g: &Graph, holders: Vec<(PendingRef, Arc<Storage>)>) {
        type Res = std::result::Result<Arc<Buffer>, (String, String)>;
        let mut vals: Vec<Vec<Res>> = Vec::with_capacity(g.nodes.len());
        for n in &g.nodes {
            let op = n.entry.op().full_name();
            let k = n.entry.results.len();
            let mut bufs = Vec::with_capacity(n.args.len());
            let mut failed = None;
            for a in &n.args {
                match *a {
                    Src::Input(i) => bufs.push(g.inputs[i as usize].clone()),
                    Src::Node(j, o) => match &vals[j as usize][o as usize] {
                        Ok(b) => bufs.push(b.clone()),
                        Err(e) => failed = Some(e.clone()),
                    },
                }
            }
            let result: std::result::Result<Vec<Arc<Buffer>>, (String, String)> = match failed {
                Some(e) => Err(e),
                None => self
                    .run_one(&n.entry, &bufs)
                    .map_err(|e| (op, e.to_string())),
            };
            vals.push(match result {
                Ok(bs) => bs.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e); k],
            });
        }
        for (r, s) in holders {
            let mut c = s.lock();
            if !matches!(c.state, State::Pending(p) if p == r) {
                continue;
            }
            c.state = match &vals[r.node as usize][r.out as usize] {
                Ok(buf) => State::Ready {
                    buf: buf.clone(),
                    op: Some(g.nodes[r.node as usize].entry.op()),
                },
                Err((op, message)) => State::Failed {
                    op: op.clone(),
                    message: message.clone(),
                },
            };
        }
    }

    fn run_one(&mut self, entry: &OpEntry, bufs: &[Arc<Buffer>]) -> Result<Vec<Arc<Buffer>>> {
        let (exe, compiled) = entry.executable(&self.client)?;
        if compiled {
            count(EagerMode::DeferAndFuse, |s| s.compiles += 1);
        }
        let refs: Vec<&Buffer> = bufs.iter().map(|b| &**b).collect();
        let op = entry.op().full_name();
        let outs = exe
            .execute(&refs)
            .map_err(|e| EagerError::device(&op, String::new(), &e))?;
        for o in &outs {
            o.block_until_ready()
                .map_err(|e| EagerError::device(&op, String::new(), &e))?;
        }
        Ok(outs.into_iter().map(Arc::new).collect())
    }
}

/// `TESSERA_EAGER_DUMP=<dir>`: each fused program is written there as it is compiled.
fn dump(text: &str) {
    if let Some(dir) = std::env::var_os("TESSERA_EAGER_DUMP") {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::path::Path::new(&dir).join(format!(
            "fused_{}_{}.mlir",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, text)) {
            tracing::warn!("TESSERA_EAGER_DUMP: writing {}: {e}", path.display());
        }
    }
}

fn fused_error(g: &Graph, message: &str) -> EagerError {
    let ops: Vec<String> = g
        .nodes
        .iter()
        .take(8)
        .map(|n| n.entry.op().full_name())
        .collect();
    EagerError::Device {
        op: format!(
            "{}{} (a fused program of {} op(s))",
            ops.join(", "),
            if g.nodes.len() > 8 { ", ..." } else { "" },
            g.nodes.len()
        ),
        args: String::new(),
        message: message.to_string(),
    }
}
