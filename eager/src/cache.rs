//! The lowering cache: one entry per (op, argument types, non-tensor arguments, options),
//! holding the dispatched plan, the shape and dtype of every result (the record-time shape
//! inference of DeferAndFuse) and, once an op runs alone, its compiled program. The key is
//! structural (numbers, not module text), so a hit costs one hash of a few words.

use crate::bounded::Bounded;
use crate::error::{EagerError, Result};
use crate::tensor::OpName;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_ops::bind::Bound;
use tessera_ops::schema::Tag;
use tessera_ops::{
    lower_planned, plan, result_values, ArgValue, CallOptions, CheckKind, Lower, Out, Plan,
};
use tessera_runtime::{Client, CompileOptions, DeviceKind, Executable};

/// What one schema return is, with the positions of its values among the results.
#[derive(Clone, Debug)]
pub(crate) enum OutKind {
    Tensor(usize),
    Tensors(Vec<usize>),
    /// The first `count` rows of `value` (data-dependent shapes: `nonzero`).
    Prefix {
        value: usize,
        count: usize,
    },
    /// A rank-0 result returned as a number.
    Item(usize),
    Int(i64),
    Float(f64),
    Bool(bool),
    None,
}

/// How an entry lowers inside a fused program.
pub(crate) enum Lowering {
    /// An ATen op's dispatched plan.
    Aten(Plan),
    /// A whole module of another origin (the entry's `module`: a kernel op's program), called
    /// as a private function; the name is its caller's (`kernel \`softmax\``).
    Program(&'static str),
}

/// One cached lowering.
pub(crate) struct OpEntry {
    /// Unique per entry: the fused-program key names ops by it.
    pub id: u64,
    pub lowering: Lowering,
    /// Whether the program takes a random key as its last input ([`crate::rng`]).
    pub random: bool,
    pub outs: Vec<OutKind>,
    /// `(argument, output)` writes the lowering produced.
    pub writes: Vec<(usize, usize)>,
    /// The types of the results (the module's outputs), in order.
    pub results: Vec<TensorType>,
    /// The data checks of the lowering ([`tessera_ops::check`]): their flags are the
    /// module's outputs after `results`.
    pub checks: Vec<CheckKind>,
    /// The one-op module (None when nothing needs the device).
    pub module: Option<String>,
    /// The compiled program: read without a lock once set (every launch reads it); `compiling`
    /// lets one thread compile it.
    exe: OnceLock<Arc<Executable>>,
    compiling: Mutex<()>,
}

impl OpEntry {
    /// The op's own program, compiled on first use; `compiled` says whether this call compiled.
    pub(crate) fn executable(&self, client: &Client) -> Result<(&Arc<Executable>, bool)> {
        if let Some(e) = self.exe.get() {
            return Ok((e, false));
        }
        let _one = self.compiling.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = self.exe.get() {
            return Ok((e, false)); // another thread compiled it meanwhile
        }
        let name = self.op().full_name();
        let text = self
            .module
            .as_deref()
            .ok_or_else(|| EagerError::Usage(format!("`{name}` has no program")))?;
        let exe = client
            .compile(text, &CompileOptions::default())
            .map_err(|e| EagerError::device(&name, String::new(), &e))?;
        Ok((self.exe.get_or_init(|| Arc::new(exe)), true))
    }

    pub(crate) fn op(&self) -> OpName {
        match &self.lowering {
            Lowering::Aten(p) => OpName::Aten(p.schema),
            Lowering::Program(name) => OpName::Program(name),
        }
    }

    /// The ATen plan of an entry made by an op call (every entry [`lookup`] finds).
    pub(crate) fn plan(&self) -> Result<&Plan> {
        match &self.lowering {
            Lowering::Aten(p) => Ok(p),
            Lowering::Program(name) => Err(EagerError::Usage(format!(
                "internal: program `{name}` is no ATen op"
            ))),
        }
    }

    /// A new entry for a whole module of another origin whose `@main` takes and returns
    /// tensors of these types.
    pub(crate) fn program(name: &'static str, module: String, results: Vec<TensorType>) -> OpEntry {
        OpEntry {
            id: next_id(),
            lowering: Lowering::Program(name),
            random: false,
            outs: (0..results.len()).map(OutKind::Tensor).collect(),
            writes: Vec::new(),
            results,
            checks: Vec::new(),
            module: Some(module),
            exe: OnceLock::new(),
            compiling: Mutex::new(()),
        }
    }
}

/// The structural key of a call: the schema, options, and each argument (tensors by dtype and
/// shape, pushed by `ty`; numbers by value: only numbers that shape the program are left in a
/// call by then).
pub(crate) fn key_of<T>(
    bound: &Bound<T>,
    options: CallOptions,
    ty: impl Fn(&mut Vec<u64>, &T),
) -> Vec<u64> {
    let mut k = Vec::with_capacity(4 + 4 * bound.values.len());
    k.push(bound.schema as *const _ as usize as u64);
    k.push(options.seed);
    k.push(options.skip_overrides as u64);
    for v in &bound.values {
        match v {
            ArgValue::None => k.push(0),
            ArgValue::Tensor(t) => {
                k.push(1);
                ty(&mut k, t);
            }
            ArgValue::TensorList(ts) => {
                k.extend([2, ts.len() as u64]);
                ts.iter().for_each(|t| ty(&mut k, t));
            }
            ArgValue::OptTensorList(ts) => {
                k.extend([3, ts.len() as u64]);
                for t in ts {
                    match t {
                        Some(t) => ty(&mut k, t),
                        None => k.push(u64::MAX),
                    }
                }
            }
            ArgValue::Bool(b) => k.extend([4, *b as u64]),
            ArgValue::Int(i) => k.extend([5, *i as u64]),
            ArgValue::Float(x) => k.extend([6, x.to_bits()]),
            ArgValue::IntList(l) => {
                k.extend([7, l.len() as u64]);
                k.extend(l.iter().map(|&i| i as u64));
            }
            ArgValue::FloatList(l) => {
                k.extend([8, l.len() as u64]);
                k.extend(l.iter().map(|x| x.to_bits()));
            }
            ArgValue::BoolList(l) => {
                k.extend([9, l.len() as u64]);
                k.extend(l.iter().map(|&b| b as u64));
            }
            ArgValue::DType(d) => k.extend([10, *d as u64]),
            ArgValue::Str(s) => {
                k.extend([11, s.len() as u64]);
                k.extend(
                    s.as_bytes()
                        .chunks(8)
                        .map(|c| c.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64)),
                );
            }
        }
    }
    k
}

fn next_id() -> u64 {
    static IDS: AtomicU64 = AtomicU64::new(1);
    IDS.fetch_add(1, Ordering::Relaxed)
}

/// Pushes a tensor type into a key.
pub(crate) fn push_type(k: &mut Vec<u64>, t: &TensorType) {
    k.push(((t.dtype as u64) << 8) | t.shape.len() as u64);
    k.extend(t.shape.iter().map(|&d| d as u64));
}

/// Lowered ops by structural key.
static ENTRIES: Bounded<Vec<u64>, Arc<OpEntry>> = Bounded::new();

/// The cached entry for `key`, or `None` (then [`build_entry`] makes it).
pub(crate) fn lookup(key: &[u64]) -> Option<Arc<OpEntry>> {
    ENTRIES.get(key)
}

/// Plans and lowers a call on its own (validating it: shapes, dtypes, arguments), records its
/// result types, and caches the entry under `key`.
pub(crate) fn build_entry(
    key: Vec<u64>,
    bound: &Bound<TensorType>,
    device: DeviceKind,
    options: CallOptions,
) -> std::result::Result<Arc<OpEntry>, tessera_ops::OpError> {
    let p = plan(bound, None, device, options)?;
    let tensors: Vec<&TensorType> = bound.values.iter().flat_map(|v| v.tensors()).collect();
    let mut cx = Lower::new(options.seed, device);
    let args: Vec<Value> = p
        .inputs
        .iter()
        .map(|&i| cx.f.arg(tensors[i].clone()))
        .collect();
    let random = bound.schema.has_tag(Tag::Random);
    if random {
        cx.rng_key = Some(cx.f.arg(crate::rng::key_type()));
    }
    let lowered = lower_planned(&mut cx, &p, &args)?;
    let values = result_values(&lowered.outs);
    let results: Vec<TensorType> = values.iter().map(|v| v.ty().clone()).collect();
    let checks = std::mem::take(&mut cx.checks);
    let module = if values.is_empty() {
        None
    } else {
        let refs: Vec<&Value> = values
            .iter()
            .chain(checks.iter().map(|c| &c.flag))
            .collect();
        let m =
            cx.f.finish(&refs)
                .map_err(|e| tessera_ops::OpError::Lower {
                    op: p.schema.full_name(),
                    source: e.into(),
                })?;
        Some(m.into_text())
    };
    let mut next = 0usize;
    let mut take = || {
        next += 1;
        next - 1
    };
    let outs = lowered
        .outs
        .iter()
        .map(|o| match o {
            Out::Tensor(_) => OutKind::Tensor(take()),
            Out::Tensors(vs) => OutKind::Tensors(vs.iter().map(|_| take()).collect()),
            Out::Prefix { .. } => OutKind::Prefix {
                value: take(),
                count: take(),
            },
            Out::Item(_) => OutKind::Item(take()),
            Out::Int(i) => OutKind::Int(*i),
            Out::Float(x) => OutKind::Float(*x),
            Out::Bool(b) => OutKind::Bool(*b),
            Out::None => OutKind::None,
        })
        .collect();
    let entry = Arc::new(OpEntry {
        id: next_id(),
        writes: lowered.writes,
        lowering: Lowering::Aten(p),
        random,
        outs,
        results,
        checks: checks.into_iter().map(|c| c.kind).collect(),
        module,
        exe: OnceLock::new(),
        compiling: Mutex::new(()),
    });
    Ok(ENTRIES.get_or_insert(key, entry))
}
