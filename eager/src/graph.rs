//! DeferAndFuse: ops recorded into this thread's pending graph (their result types known at
//! record time from the lowering cache, so shape errors surface at the op), and run at a sync
//! point as ONE program whose outputs are only the values some tensor still holds. The
//! program is cached under a structural key (op entries, how they connect, which results
//! live), so a repeated loop body compiles once.

use crate::bounded::Bounded;
use crate::cache::{Lowering, OpEntry};
use crate::error::{EagerError, Result};
use crate::mode::EagerMode;
use crate::runtime::{Inputs, Runtime, Val, Vals};
use crate::stats::{count, FlushReason};
use crate::tensor::{PendingRef, State, Storage};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_ops::{lower_planned, result_values, CheckKind, Lower};
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
    /// Inline up to four: a graph holds thousands of nodes, most with one to three args.
    pub args: SmallVec<[Src; 4]>,
}

pub(crate) struct Graph {
    /// Unique per graph (a flush starts a new one), so a stale pending reference is caught.
    pub id: u64,
    pub(crate) inputs: Vec<Arc<Buffer>>,
    /// The storage each input was read from (None: a view's base was read through ops).
    pub(crate) input_from: Vec<Option<Weak<Storage>>>,
    input_at: FxHashMap<usize, u32>,
    pub(crate) nodes: Vec<Node>,
    /// Storages that took a pending result; at a flush, those still alive and still holding
    /// it make that result an output.
    holders: Vec<(PendingRef, Weak<Storage>)>,
    /// The mode the graph was recorded in (its flush is counted there).
    mode: EagerMode,
    /// How many slow transcendental ops it holds (counted by [`crate::rules::cut_after`]).
    pub(crate) slow_fused: usize,
}

/// A graph that ran, with its live results and their buffers.
pub(crate) struct Flushed {
    pub graph: Graph,
    pub live: Vec<(u32, u32)>,
    pub holders: Vec<(PendingRef, Arc<Storage>)>,
    pub exe: Arc<Executable>,
    /// The program's data checks: op name and kind; their flags are its outputs after the
    /// live results.
    pub checks: Arc<Vec<(String, CheckKind)>>,
}

/// One compiled fused program.
struct Fused {
    exe: Arc<Executable>,
    checks: Arc<Vec<(String, CheckKind)>>,
}

/// A fused program that ran: it, its live results' buffers, its checks.
type FusedRun = (
    Arc<Executable>,
    Vec<Arc<Buffer>>,
    Arc<Vec<(String, CheckKind)>>,
);

/// Fused programs by structural key.
static FUSED: Bounded<Vec<u64>, Arc<Fused>> = Bounded::new();

impl Graph {
    pub fn new() -> Graph {
        static IDS: AtomicU64 = AtomicU64::new(1);
        Graph {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            inputs: Vec::new(),
            input_from: Vec::new(),
            input_at: FxHashMap::default(),
            nodes: Vec::new(),
            holders: Vec::new(),
            mode: EagerMode::DeferAndFuse,
            slow_fused: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the size-limit rule cuts the graph now ([`crate::rules::size_limit_reached`]).
    pub fn is_full(&self) -> bool {
        let n = self.nodes.len();
        crate::rules::size_limit_reached(n, || self.nodes.iter().map(|n| n.entry.id).collect())
    }

    /// Appends a node; returns its results as pending values.
    pub fn record(&mut self, entry: &Arc<OpEntry>, inputs: Inputs<'_>, mode: EagerMode) -> Vals {
        if self.nodes.is_empty() {
            self.mode = mode;
        }
        let mut args = SmallVec::new();
        for (v, from) in inputs {
            args.push(match v {
                Val::Buf(b) => {
                    let key = Arc::as_ptr(&b) as usize;
                    let next = self.inputs.len() as u32;
                    let at = *self.input_at.entry(key).or_insert(next);
                    if at == next {
                        self.inputs.push(b);
                        // Held weakly, and only for inputs new to the graph (a weak
                        // reference per op input cost two atomic updates each).
                        self.input_from.push(from.map(Arc::downgrade));
                    }
                    Src::Input(at)
                }
                Val::Pending(r) => Src::Node(r.node, r.out),
            });
        }
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
        let state = match s.lock().state {
            State::Pending(r) => Some(r),
            _ => None,
        };
        if let Some(r) = state {
            self.hold_pending(r, s);
        }
    }

    /// Notes that `s` holds pending value `r`.
    pub fn hold_pending(&mut self, r: PendingRef, s: &Arc<Storage>) {
        if r.graph == self.id {
            self.holders.push((r, Arc::downgrade(s)));
        }
    }
}

/// The structural key of a flush: per node its entry and argument sources, then the live
/// results and the donations. Input buffers are named by first use, so their identity does
/// not matter.
fn key_of(g: &Graph, live: &[(u32, u32)], aliases: &[(usize, usize)]) -> Vec<u64> {
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
    k.push(u64::MAX);
    k.extend(aliases.iter().map(|&(i, r)| ((i as u64) << 32) | r as u64));
    k
}

/// Lowers every node of `g` into one function returning the `live` results, then the flags
/// of its data checks (returned with their op names); `aliases` (input, live result) pairs
/// may share memory ([`crate::donation`]).
fn build_module(
    g: &Graph,
    live: &[(u32, u32)],
    aliases: &[(usize, usize)],
    device: DeviceKind,
) -> Result<(String, Vec<(String, CheckKind)>)> {
    let mut cx = Lower::new(0, device);
    let mut check_ops = Vec::new();
    let ins: Vec<Value> = g
        .inputs
        .iter()
        .map(|b| cx.f.arg(TensorType::new(b.shape(), b.dtype())))
        .collect();
    let mut vals: Vec<Vec<Value>> = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let mut args: Vec<Value> = n
            .args
            .iter()
            .map(|a| match *a {
                Src::Input(i) => ins[i as usize].clone(),
                Src::Node(j, o) => vals[j as usize][o as usize].clone(),
            })
            .collect();
        let results = match &n.entry.lowering {
            Lowering::Aten(plan) => {
                cx.seed = plan.options.seed;
                // A random op's key is its last argument ([`crate::rng`]).
                cx.rng_key = if n.entry.random { args.pop() } else { None };
                let lowered = lower_planned(&mut cx, plan, &args)
                    .map_err(|e| EagerError::op(String::new(), e))?;
                result_values(&lowered.outs)
            }
            Lowering::Program(name) => {
                let module = n.entry.module.as_deref().unwrap_or_default();
                let refs: Vec<&Value> = args.iter().collect();
                cx.f.call_module(module, &refs, n.entry.results.clone())
                    .map_err(|e| EagerError::Usage(format!("{name} in a fused program: {e}")))?
            }
        };
        vals.push(results);
        check_ops.resize(cx.checks.len(), n.entry.op().full_name());
    }
    let checks = std::mem::take(&mut cx.checks);
    for &(input, result) in aliases {
        cx.f.alias_output(input, result);
    }
    let outs: Vec<&Value> = live
        .iter()
        .map(|&(n, o)| &vals[n as usize][o as usize])
        .chain(checks.iter().map(|c| &c.flag))
        .collect();
    let m =
        cx.f.finish(&outs)
            .map_err(|e| EagerError::Usage(format!("building the fused program: {e}")))?;
    let checks = check_ops
        .into_iter()
        .zip(checks)
        .map(|(op, c)| (op, c.kind))
        .collect();
    Ok((m.into_text(), checks))
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
    pub(crate) fn flush_graph(&mut self, reason: FlushReason) -> Result<Option<Flushed>> {
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
        // A compiled function's trace replays the graph's inputs: none may be consumed.
        let aliases = if reason == FlushReason::Compiled {
            Vec::new()
        } else {
            crate::donation::aliases(&g, &live)
        };
        match self.run_fused(&g, &live, &aliases) {
            Ok((exe, bufs, checks)) => {
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
                    checks,
                }))
            }
            Err(e) => {
                self.run_op_by_op(&g, holders);
                Err(e)
            }
        }
    }

    fn run_fused(
        &mut self,
        g: &Graph,
        live: &[(u32, u32)],
        aliases: &[(usize, usize)],
    ) -> Result<FusedRun> {
        let key = key_of(g, live, aliases);
        let cached = FUSED.get(&key);
        let fused = match cached {
            Some(f) => {
                count(g.mode, |s| s.cache_hits += 1);
                f
            }
            None => {
                let (text, checks) = build_module(g, live, aliases, self.kind)?;
                dump(&text);
                let exe = self
                    .client
                    .compile(&text, &CompileOptions::default())
                    .map_err(|e| fused_error(g, &e.to_string()))?;
                count(g.mode, |s| s.compiles += 1);
                let f = Arc::new(Fused {
                    exe: Arc::new(exe),
                    checks: Arc::new(checks),
                });
                FUSED.insert(key, f.clone());
                f
            }
        };
        let refs: Vec<&Buffer> = g.inputs.iter().map(|b| &**b).collect();
        let start = Instant::now();
        let donated = crate::donation::donatable(g, aliases);
        let outs = fused.exe.execute_donating(&refs, &donated);
        let nanos = start.elapsed().as_nanos() as u64;
        count(g.mode, |s| {
            s.launches += 1;
            s.execute_nanos += nanos;
            s.donated += donated.len() as u64;
        });
        let outs = outs.map_err(|e| fused_error(g, &e.to_string()))?;
        if g.mode == EagerMode::Debug {
            for o in &outs {
                o.block_until_ready()
                    .map_err(|e| fused_error(g, &e.to_string()))?;
            }
        }
        let mut outs: Vec<Arc<Buffer>> = outs.into_iter().map(Arc::new).collect();
        let flags = outs.split_off(live.len().min(outs.len()));
        for ((op, kind), flag) in fused.checks.iter().zip(flags) {
            self.defer_checks(op.clone(), std::slice::from_ref(kind), vec![flag])?;
        }
        if g.mode == EagerMode::Debug {
            self.raise_checks()?;
        }
        Ok((fused.exe.clone(), outs, fused.checks.clone()))
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
        let mut outs: Vec<Arc<Buffer>> = outs.into_iter().map(Arc::new).collect();
        let flags = outs.split_off(entry.results.len().min(outs.len()));
        self.defer_checks(op, &entry.checks, flags)?;
        Ok(outs)
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
