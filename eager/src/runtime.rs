//! The per-thread eager runtime: the device, this thread's pending graph, and the call path
//! every op takes (lift scalars -> cached lowering -> launch or record -> outputs and writes).

use crate::cache::{build_entry, key_of, lookup, OpEntry, OutKind};
use crate::error::{EagerError, Result};
use crate::graph::Graph;
use crate::mode::{mode, EagerMode};
use crate::stats::{count, FlushReason};
use crate::tensor::{op_name, OpName, PendingRef, State, Storage, Tensor};
use crate::{scalars, view};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tessera_lowering::stablehlo::TensorType;
use tessera_lowering::{DType, HostTensor};
use tessera_ops::bind::Bound;
use tessera_ops::{ArgValue, CallOptions, CheckKind};
use tessera_runtime::{AlignedBytes, Buffer, Client, Device, DeviceKind};

/// One result of an op call, per schema return.
#[derive(Clone, Debug)]
pub enum Output {
    Tensor(Tensor),
    Tensors(Vec<Tensor>),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A masked-out or undefined gradient (PyTorch's None).
    None,
}

impl Output {
    /// The tensor of a `Tensor` result.
    pub fn tensor(self) -> Result<Tensor> {
        match self {
            Output::Tensor(t) => Ok(t),
            other => Err(EagerError::Usage(format!(
                "expected a Tensor result, got {other:?}"
            ))),
        }
    }
}

/// An op's input values, each with the storage it was read from (a few per op: inline).
pub(crate) type Inputs<'t> = SmallVec<[(Val, Option<&'t Arc<Storage>>); 4]>;

/// An op's result values (one or two per op: inline).
pub(crate) type Vals = SmallVec<[Val; 2]>;

/// A value an op reads: a device buffer or a pending result of this thread's graph.
#[derive(Clone)]
pub(crate) enum Val {
    Buf(Arc<Buffer>),
    Pending(PendingRef),
}

pub(crate) struct Runtime {
    pub kind: DeviceKind,
    pub client: Client,
    pub graph: Graph,
    /// Device copies of recent scalar arguments (`alpha`, `0.5`), keyed by dtype and bits.
    scalars: HashMap<(DType, u64), Arc<Buffer>>,
    /// Flags of data checks (index bounds, division by zero) of ops that ran and whose
    /// flags nobody read yet: read at the next sync point ([`Runtime::raise_checks`]).
    checks: Vec<PendingCheck>,
}

/// A data check's flag on the device, with the op and check it belongs to.
pub(crate) struct PendingCheck {
    pub op: String,
    pub kind: CheckKind,
    pub flag: Arc<Buffer>,
}

/// Unread check flags kept at most; past it they are read (and raised) at the next op, so
/// a loop that never syncs does not hold flags without bound.
const MAX_PENDING_CHECKS: usize = 1024;

/// The process's eager device: `TESSERA_DEVICE` (default cpu).
fn device() -> Result<Device> {
    static DEVICE: OnceLock<std::result::Result<Device, String>> = OnceLock::new();
    DEVICE
        .get_or_init(|| Device::from_env().map_err(|e| e.to_string()))
        .clone()
        .map_err(EagerError::Runtime)
}

thread_local! {
    static RT: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's runtime (started on first use).
pub(crate) fn with<R>(f: impl FnOnce(&mut Runtime) -> Result<R>) -> Result<R> {
    RT.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            EagerError::Usage("the eager runtime was re-entered from inside an op call".into())
        })?;
        if slot.is_none() {
            let d = device()?;
            let client = d.client().map_err(|e| EagerError::Runtime(e.to_string()))?;
            *slot = Some(Runtime {
                kind: d.kind(),
                client: client.clone(),
                graph: Graph::new(),
                scalars: HashMap::new(),
                checks: Vec::new(),
            });
        }
        f(slot.as_mut().expect("started above"))
    })
}

/// `f32[2, 3]` per tensor argument, for error messages.
pub(crate) fn describe(b: &Bound<TensorType>) -> String {
    let mut parts = Vec::new();
    for (a, v) in b.schema.args.iter().zip(&b.values) {
        let tys: Vec<String> = v
            .tensors()
            .map(|t| format!("{}{:?}", t.dtype, t.shape))
            .collect();
        if tys.is_empty() {
            continue;
        }
        parts.push(format!("{}: {}", a.name, tys.join(", ")));
    }
    if parts.is_empty() {
        "no tensors".into()
    } else {
        parts.join("; ")
    }
}

pub(crate) fn types_of(b: &Bound<Tensor>) -> Bound<TensorType> {
    b.map(Tensor::ty)
}

impl Runtime {
    pub(crate) fn upload(&mut self, t: &HostTensor) -> Result<Tensor> {
        let buf = self.upload_buffer(t)?;
        Ok(Tensor::from_state(
            TensorType::new(t.shape(), t.dtype()),
            State::Ready { buf, op: None },
            self.kind,
        ))
    }

    /// `t` as a device buffer, its bytes counted as moved to the device.
    pub(crate) fn upload_buffer(&mut self, t: &HostTensor) -> Result<Arc<Buffer>> {
        let bytes = Arc::new(AlignedBytes::from_slice(t.bytes()));
        let buf = self
            .client
            .upload_shared(t.dtype(), t.shape(), bytes)
            .map_err(|e| EagerError::device("upload", String::new(), &e))?;
        count(mode(), |s| s.bytes_to_device += t.bytes().len() as u64);
        Ok(Arc::new(buf))
    }

    /// A rank-0 device tensor holding `v` (cached: the same number is uploaded once).
    pub(crate) fn scalar_tensor(&mut self, dtype: DType, v: f64) -> Result<Tensor> {
        let key = (dtype, v.to_bits());
        let buf = match self.scalars.get(&key) {
            Some(b) => b.clone(),
            None => {
                let b = self.upload_buffer(&HostTensor::from_f64(dtype, vec![], &[v]))?;
                // A changing learning rate would grow this without bound: keep the last few.
                if self.scalars.len() >= 256 {
                    self.scalars.clear();
                }
                self.scalars.insert(key, b.clone());
                b
            }
        };
        Ok(Tensor::from_state(
            TensorType::scalar(dtype),
            State::Ready { buf, op: None },
            self.kind,
        ))
    }

    /// Calls `op` with positional tensors/values (internal helper for rewrites and views).
    pub(crate) fn call_op(
        &mut self,
        op: &str,
        args: Vec<ArgValue<Tensor>>,
        view_ok: bool,
    ) -> Result<Tensor> {
        let schema =
            tessera_ops::find(op).ok_or_else(|| EagerError::Usage(format!("unknown op `{op}`")))?;
        let bound = tessera_ops::bind(schema, args, Vec::new())
            .map_err(|e| EagerError::op(String::new(), e))?;
        let mut outs = self.call(bound, view_ok)?;
        outs.swap_remove(0).tensor()
    }

    /// The one path of every op call. `view_ok`: a view op returns a view of its input
    /// (false when a view is being materialized or written back).
    pub(crate) fn call(&mut self, bound: Bound<Tensor>, view_ok: bool) -> Result<Vec<Output>> {
        Ok(self.call_keeping(bound, view_ok, false)?.0)
    }

    /// [`Runtime::call`]; with `keep`, also the op's entry where it alone can run the call
    /// again on tensors of the same types ([`crate::memo`]): lifting numbers left the call as
    /// it was, and the op is not a view.
    pub(crate) fn call_keeping(
        &mut self,
        bound: Bound<Tensor>,
        view_ok: bool,
        keep: bool,
    ) -> Result<(Vec<Output>, Option<Arc<OpEntry>>)> {
        let m = mode();
        count(m, |s| s.ops += 1);
        let options = CallOptions::default();
        // The call's schema, values and tensors' identities, to see whether lifting changed it.
        let identity = |b: &Bound<Tensor>| {
            key_of(b, options, |k, t: &Tensor| {
                k.push(Arc::as_ptr(&t.storage) as usize as u64);
                k.push(
                    t.view
                        .as_ref()
                        .map_or(0, |v| Arc::as_ptr(v) as usize as u64),
                );
            })
        };
        let before = keep.then(|| identity(&bound));
        let bound = scalars::lift(self, bound)?;
        let keep = before.is_some_and(|b| b == identity(&bound)) && !view::is_view_op(bound.schema);
        let key = key_of(&bound, options, |k, t: &Tensor| t.push_type(k));
        let entry = match lookup(&key) {
            Some(e) => {
                count(m, |s| s.cache_hits += 1);
                e
            }
            None => {
                let types = types_of(&bound);
                build_entry(key, &types, self.kind, options)
                    .map_err(|e| EagerError::op(describe(&types), e))?
            }
        };
        if view_ok {
            if let Some(t) = view::as_view(&entry, &bound)? {
                return Ok((vec![Output::Tensor(t)], None));
            }
        }
        let outs = self.run_op(&entry, &bound, m)?;
        Ok((outs, keep.then_some(entry)))
    }

    /// A call whose entry [`crate::memo`] kept: `bound` holds tensors of the types it was
    /// built for, alone (the arguments after them at their defaults).
    pub(crate) fn call_entry(
        &mut self,
        entry: &Arc<OpEntry>,
        bound: &Bound<Tensor>,
    ) -> Result<Vec<Output>> {
        let m = mode();
        count(m, |s| {
            s.ops += 1;
            s.cache_hits += 1;
        });
        self.run_op(entry, bound, m)
    }

    /// Runs (or records) `entry`, the op `bound` calls, and gives its outputs.
    fn run_op(
        &mut self,
        entry: &Arc<OpEntry>,
        bound: &Bound<Tensor>,
        m: EagerMode,
    ) -> Result<Vec<Output>> {
        // The plan numbers tensors as they come, lists flattened (a call has a few).
        let nth = |i: usize| bound.values.iter().flat_map(|v| v.tensors()).nth(i);
        let tensors = entry.plan()?.inputs.iter().map(|&i| {
            nth(i).ok_or_else(|| EagerError::Usage(format!("internal: no tensor {i} in the call")))
        });
        let mut inputs = self.inputs_of(tensors, m)?;
        if entry.random {
            inputs.push((Val::Buf(self.upload_buffer(&crate::rng::next_key())?), None));
        }
        let results = if entry.results.is_empty() {
            Vals::new()
        } else {
            self.run_entry(entry, inputs, m, &|| describe(&types_of(bound)))?
        };
        let outs = self.outputs(entry, bound, results)?;
        self.after_op(entry, m)?;
        Ok(outs)
    }

    /// [`crate::Shortcut::call`]: runs `entry` (one tensor result, nothing written) on
    /// `tensors`, as [`Runtime::call_entry`] would; `None` when a tensor is a view or not of
    /// its type in `types` (checked under the lock that reads its value).
    pub(crate) fn call_shortcut(
        &mut self,
        entry: &Arc<OpEntry>,
        tensors: &[&Tensor],
        types: &[TensorType],
    ) -> Result<Option<Tensor>> {
        let plan = entry.plan()?;
        let Some(result) = entry.results.first() else {
            return Ok(None);
        };
        let of_type = |t: &Tensor, ty: &TensorType| {
            t.with_type(|d, shape| d == ty.dtype && shape == ty.shape.as_slice())
        };
        for (i, (t, ty)) in tensors.iter().zip(types).enumerate() {
            // Arguments the lowering does not read are checked here, the others below.
            if t.view.is_some() || (!plan.inputs.contains(&i) && !of_type(t, ty)) {
                return Ok(None);
            }
        }
        let m = mode();
        let need = (!m.defers()).then_some(FlushReason::NeedsValue);
        let mut inputs = Inputs::new();
        for &i in &plan.inputs {
            let (Some(t), Some(ty)) = (tensors.get(i), types.get(i)) else {
                return Ok(None);
            };
            let (same, v, _) = self.value_and(t, need, |c| c.ty == *ty)?;
            if !same {
                return Ok(None);
            }
            inputs.push((v, Some(&t.storage)));
        }
        count(m, |s| {
            s.ops += 1;
            s.cache_hits += 1;
        });
        let describe_call = || {
            let values = types.iter().cloned().map(ArgValue::Tensor).collect();
            describe(&Bound {
                schema: plan.schema,
                values,
            })
        };
        let results = self.run_entry(entry, inputs, m, &describe_call)?;
        let Some(v) = results.into_iter().next() else {
            return Err(EagerError::Usage("internal: an op gave no result".into()));
        };
        let out = self.wrap(result.clone(), v, entry.op());
        self.after_op(entry, m)?;
        Ok(Some(out))
    }

    /// The values of an op's input tensors, each with the storage it came from (a compiled
    /// function's replay reads it again); outside DeferAndFuse a pending value is computed.
    pub(crate) fn inputs_of<'t>(
        &mut self,
        tensors: impl Iterator<Item = Result<&'t Tensor>>,
        m: EagerMode,
    ) -> Result<Inputs<'t>> {
        let need = (!m.defers()).then_some(FlushReason::NeedsValue);
        // A loop, not `collect`: collecting results into a SmallVec grew it element by element
        // behind an adapter (~4% of a deferred op).
        let mut inputs = Inputs::new();
        for t in tensors {
            let t = t?;
            let v = self.val_of(t, need)?;
            inputs.push((v, t.view.is_none().then_some(&t.storage)));
        }
        Ok(inputs)
    }

    /// Records `entry` on `inputs` into the pending graph (DeferAndFuse, Compiled) or
    /// launches it (Strict, Debug; `arguments` describes the call for Debug's errors).
    pub(crate) fn run_entry(
        &mut self,
        entry: &Arc<OpEntry>,
        inputs: Inputs<'_>,
        m: EagerMode,
        arguments: &dyn Fn() -> String,
    ) -> Result<Vals> {
        if m.defers() {
            return Ok(self.graph.record(entry, inputs, m));
        }
        self.launch(entry, &inputs, m, arguments)
    }

    /// After an op: the materialization rules that cut the pending graph there.
    pub(crate) fn after_op(&mut self, entry: &OpEntry, m: EagerMode) -> Result<()> {
        if m.defers() && self.graph.is_full() {
            self.flush(FlushReason::SizeLimit)
        } else if m == EagerMode::DeferAndFuse
            && crate::rules::cut_after(entry, self.kind, &mut self.graph.slow_fused)
        {
            self.flush(FlushReason::SlowFused)
        } else {
            Ok(())
        }
    }

    /// Runs one op's own program now (Strict: without waiting; Debug: waiting).
    /// `arguments` describes the call's arguments for Debug's errors.
    fn launch(
        &mut self,
        entry: &OpEntry,
        inputs: &Inputs<'_>,
        m: EagerMode,
        arguments: &dyn Fn() -> String,
    ) -> Result<Vals> {
        let op = entry.op();
        let mut bufs: SmallVec<[&Buffer; 8]> = SmallVec::with_capacity(inputs.len());
        for (v, _) in inputs {
            match v {
                Val::Buf(b) => bufs.push(b),
                Val::Pending(_) => {
                    return Err(EagerError::Usage(
                        "internal: a launched op got a pending input".into(),
                    ))
                }
            }
        }
        let debug = m == EagerMode::Debug;
        let args = || if debug { arguments() } else { String::new() };
        let (exe, compiled) = entry.executable(&self.client).map_err(|e| match e {
            EagerError::Device { op, message, .. } if debug => EagerError::Device {
                op,
                args: args(),
                message,
            },
            e => e,
        })?;
        if compiled {
            count(m, |s| s.compiles += 1);
        }
        let start = Instant::now();
        let outs = exe.execute(&bufs);
        let nanos = start.elapsed().as_nanos() as u64;
        count(m, |s| {
            s.launches += 1;
            s.execute_nanos += nanos;
        });
        let mut outs = outs.map_err(|e| EagerError::device(&op.full_name(), args(), &e))?;
        if debug {
            for o in &outs {
                o.block_until_ready()
                    .map_err(|e| EagerError::device(&op.full_name(), args(), &e))?;
            }
        }
        let flags = outs.split_off(entry.results.len().min(outs.len()));
        if !flags.is_empty() {
            // Named only here: formatting the name on every launch cost ~2% of a tiny op.
            let flags = flags.into_iter().map(Arc::new).collect();
            self.defer_checks(op.full_name(), &entry.checks, flags)?;
        }
        if debug {
            self.raise_checks()?;
        }
        Ok(outs.into_iter().map(|b| Val::Buf(Arc::new(b))).collect())
    }

    /// Keeps the check flags of a program that ran (`kinds[i]`'s flag is `flags[i]`; `op`
    /// names the op), to be read at the next sync point.
    pub(crate) fn defer_checks(
        &mut self,
        op: String,
        kinds: &[CheckKind],
        flags: Vec<Arc<Buffer>>,
    ) -> Result<()> {
        for (kind, flag) in kinds.iter().zip(flags) {
            self.checks.push(PendingCheck {
                op: op.clone(),
                kind: kind.clone(),
                flag,
            });
        }
        if self.checks.len() > MAX_PENDING_CHECKS {
            self.raise_checks()?;
        }
        Ok(())
    }

    /// Reads the pending check flags (waiting for their programs); the first one set is the
    /// error, naming its op (torch's message: "index 10 is out of bounds for dimension 0
    /// with size 5").
    pub(crate) fn raise_checks(&mut self) -> Result<()> {
        let mut first = None;
        for c in std::mem::take(&mut self.checks) {
            if first.is_some() {
                continue;
            }
            let h = c
                .flag
                .to_host()
                .map_err(|e| EagerError::device(&c.op, String::new(), &e))?;
            if let Some(message) = tessera_ops::check::failure(&c.kind, &h) {
                first = Some(EagerError::op(
                    String::new(),
                    tessera_ops::OpError::Checked { op: c.op, message },
                ));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The type and value of a tensor (a view is computed from its base). `need`: a pending
    /// value must be a buffer, so the graph runs (for that reason).
    pub(crate) fn value_of(
        &mut self,
        t: &Tensor,
        need: Option<FlushReason>,
    ) -> Result<(TensorType, Val, Option<OpName>)> {
        self.value_and(t, need, |c| c.ty.clone())
    }

    /// [`Runtime::value_of`] without the type (an op's inputs: copying it costs per op).
    fn val_of(&mut self, t: &Tensor, need: Option<FlushReason>) -> Result<Val> {
        Ok(self.value_and(t, need, |_| ())?.1)
    }

    /// `info` of the storage's cell, the value and its op, as [`Runtime::value_of`] says.
    fn value_and<I>(
        &mut self,
        t: &Tensor,
        need: Option<FlushReason>,
        info: impl Fn(&crate::tensor::Cell) -> I,
    ) -> Result<(I, Val, Option<OpName>)> {
        if t.view.is_some() {
            let base = view::materialize(self, t)?;
            return self.value_and(&base, need, info);
        }
        for attempt in 0..2 {
            let (ty, state) = {
                let c = t.storage.lock();
                (info(&c), c.state.clone())
            };
            match state {
                State::Ready { buf, op } => return Ok((ty, Val::Buf(buf), op)),
                State::Failed { op, message } => return Err(EagerError::Failed { op, message }),
                State::Pending(r) if r.graph != self.graph.id => {
                    return Err(EagerError::Usage(
                        "this tensor is pending in another thread's deferred graph; call \
                         `tessera_eager::sync()` on that thread first"
                            .into(),
                    ))
                }
                State::Pending(r) => match need {
                    Some(reason) if attempt == 0 => {
                        // A failed flush leaves this tensor Failed or Ready: look again.
                        let _ = self.flush(reason);
                    }
                    Some(_) => {
                        return Err(EagerError::Usage(
                            "internal: a flush left a tensor pending".into(),
                        ))
                    }
                    None => return Ok((ty, Val::Pending(r), None)),
                },
            }
        }
        Err(EagerError::Usage(
            "internal: a tensor stayed pending after its graph ran".into(),
        ))
    }

    /// A new tensor holding `v`.
    pub(crate) fn wrap(&mut self, ty: TensorType, v: Val, op: OpName) -> Tensor {
        let pending = match &v {
            Val::Pending(r) => Some(*r),
            Val::Buf(_) => None,
        };
        let state = self.state_of(v, Some(op));
        let t = Tensor::from_state(ty, state, self.kind);
        if let Some(r) = pending {
            // Known pending: no need to lock the new storage to find out.
            self.graph.hold_pending(r, &t.storage);
        }
        t
    }

    fn state_of(&self, v: Val, op: Option<OpName>) -> State {
        match v {
            Val::Buf(buf) => State::Ready { buf, op },
            Val::Pending(r) => State::Pending(r),
        }
    }

    /// Makes `target` hold `src`'s value (an in-place or `out=` write). Through a view, the
    /// base is rewritten (`select_scatter`, `slice_scatter`, inverse permutes and reshapes).
    pub(crate) fn assign(&mut self, target: &Tensor, src: &Tensor) -> Result<()> {
        if target.view.is_some() {
            return view::write_back(self, target, src);
        }
        if std::sync::Arc::ptr_eq(&target.storage, &src.storage) && src.view.is_none() {
            return Ok(());
        }
        let (ty, state) = if src.view.is_some() {
            let (ty, v, op) = self.value_of(src, None)?;
            (ty, self.state_of(v, op))
        } else {
            let c = src.storage.lock();
            (c.ty.clone(), c.state.clone())
        };
        {
            let mut c = target.storage.lock();
            c.ty = ty;
            c.state = state;
        }
        self.graph.hold(&target.storage);
        Ok(())
    }

    /// Turns results into the call's outputs, applying its writes (in-place, `out=`).
    fn outputs(
        &mut self,
        entry: &OpEntry,
        bound: &Bound<Tensor>,
        results: Vals,
    ) -> Result<Vec<Output>> {
        let op = entry.op();
        let mut outs = Vec::with_capacity(entry.outs.len());
        for kind in &entry.outs {
            let one = |rt: &mut Runtime, i: usize| {
                rt.wrap(entry.results[i].clone(), results[i].clone(), op)
            };
            outs.push(match kind {
                OutKind::Tensor(i) => Output::Tensor(one(self, *i)),
                OutKind::Tensors(is) => Output::Tensors(is.iter().map(|&i| one(self, i)).collect()),
                OutKind::Prefix { value, count } => {
                    let (value, count) = (one(self, *value), one(self, *count));
                    let n = self.to_host(&count, FlushReason::NeedsValue)?.to_f64_vec();
                    let n = n.first().copied().unwrap_or(0.0) as i64;
                    let args = vec![
                        ArgValue::Tensor(value),
                        ArgValue::Int(0),
                        ArgValue::Int(0),
                        ArgValue::Int(n),
                    ];
                    Output::Tensor(self.call_op("slice.Tensor", args, false)?)
                }
                OutKind::Item(i) => {
                    let t = one(self, *i);
                    let h = self.to_host(&t, FlushReason::NeedsValue)?;
                    match tessera_ops::call::item(&h) {
                        tessera_ops::Output::Int(i) => Output::Int(i),
                        tessera_ops::Output::Float(x) => Output::Float(x),
                        tessera_ops::Output::Bool(b) => Output::Bool(b),
                        _ => Output::Float(f64::NAN),
                    }
                }
                OutKind::Int(i) => Output::Int(*i),
                OutKind::Float(x) => Output::Float(*x),
                OutKind::Bool(b) => Output::Bool(*b),
                OutKind::None => Output::None,
            });
        }
        for &(arg, out) in &entry.writes {
            match (bound.values.get(arg), outs.get(out)) {
                (Some(ArgValue::Tensor(target)), Some(Output::Tensor(src))) => {
                    let src = src.clone();
                    self.assign(target, &src)?;
                    outs[out] = Output::Tensor(target.clone());
                }
                // A list `out` (`split_copy.Tensor_out`): one result into each of its tensors.
                (Some(ArgValue::TensorList(targets)), Some(Output::Tensors(srcs))) => {
                    for (target, src) in targets.iter().zip(srcs.clone()) {
                        self.assign(target, &src)?;
                    }
                    outs[out] = Output::Tensors(targets.clone());
                }
                _ => {}
            }
        }
        outs.truncate(entry.plan()?.returns);
        Ok(outs)
    }

    /// Copies `t` to the host (running what it waits on).
    pub(crate) fn to_host(&mut self, t: &Tensor, reason: FlushReason) -> Result<HostTensor> {
        let (_, v, op) = self.value_of(t, Some(reason))?;
        let Val::Buf(buf) = v else {
            return Err(EagerError::Usage(
                "internal: a read found a pending value".into(),
            ));
        };
        self.raise_checks()?;
        let h = buf
            .to_host()
            .map_err(|e| EagerError::device(&op_name(op), String::new(), &e))?;
        count(mode(), |s| s.bytes_to_host += h.bytes().len() as u64);
        Ok(h)
    }

    pub(crate) fn wait(&mut self, t: &Tensor) -> Result<()> {
        let (_, v, op) = self.value_of(t, Some(FlushReason::HostRead))?;
        if let Val::Buf(buf) = v {
            buf.block_until_ready()
                .map_err(|e| EagerError::device(&op_name(op), String::new(), &e))?;
        }
        self.raise_checks()
    }
}

/// Calls ATen op `op` (`aten::add.Tensor`, `add.Tensor`, `abs`) on eager tensors, in the
/// current mode: `call("aten::add.Tensor", vec![x.into(), y.into()], vec![("alpha", 2.into())])`.
pub fn call(
    op: &str,
    args: Vec<ArgValue<Tensor>>,
    kwargs: Vec<(&str, ArgValue<Tensor>)>,
) -> Result<Vec<Output>> {
    call_schema(schema_named(op)?, args, kwargs)
}

/// The schema of `op` (`aten::add.Tensor`, `add.Tensor`), or the unknown-op error [`call`]
/// gives.
pub(crate) fn schema_named(op: &str) -> Result<&'static tessera_ops::OpSchema> {
    tessera_ops::find(op).ok_or_else(|| {
        EagerError::op(
            String::new(),
            tessera_ops::OpError::UnknownOp { op: op.to_string() },
        )
    })
}

/// [`call`] with the op's schema found already (`tessera_ops::find`, once per op: a
/// dispatcher calling many ops keeps it).
pub fn call_schema(
    schema: &'static tessera_ops::OpSchema,
    args: Vec<ArgValue<Tensor>>,
    kwargs: Vec<(&str, ArgValue<Tensor>)>,
) -> Result<Vec<Output>> {
    let kwargs = kwargs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let bound =
        tessera_ops::bind(schema, args, kwargs).map_err(|e| EagerError::op(String::new(), e))?;
    tessera_ops::bind::refuse_numbers_as_tensors(&bound)
        .map_err(|e| EagerError::op(String::new(), e))?;
    with(|rt| rt.call(bound, true))
}

/// Runs this thread's pending deferred ops now (TorchTPU's `sync`, torch_xla's `mark_step`).
pub fn sync() -> Result<()> {
    with(|rt| {
        rt.flush(FlushReason::Explicit)?;
        rt.raise_checks()
    })
}
