//! The C entry points of the `tpu` device's dispatch in C++ (`tessera/csrc/device.cpp`, chosen
//! with `TESSERA_TORCH_DISPATCH=cpp`): torch's dispatcher calls that boxed kernel for every
//! ATen op on device tensors, and it calls [`tessera_device_call`] without Python.
//!
//! A device tensor's storage holds one eager tensor, a `Box<Tensor>` made here and released
//! through [`tessera_device_release`]; a tensor argument is that value read through the
//! tensor's sizes, strides and storage offset (the value itself when the tensor covers it
//! contiguously, else the eager runtime's `as_strided` view of it, which in-place ops write
//! through). Results are handed to the C++ side through a callback, errors through another.

use crate::eager::EagerTensor;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tessera_eager::{ArgValue, EagerError, Output, Shortcut, Tensor};
use tessera_lowering::{DType, HostTensor};
use tessera_ops::{OpError, OpSchema};

/// `metrics()["transfers"]` of the C++ dispatch: host tensors uploaded, device tensors read.
static TO_DEVICE: AtomicU64 = AtomicU64::new(0);
static TO_HOST: AtomicU64 = AtomicU64::new(0);
/// Programs compiled on autograd's device thread (the eager runtime counts per thread, and
/// `metrics()` is read on the caller's).
static AUTOGRAD_COMPILES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ON_AUTOGRAD_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// [`DevArg::kind`]s.
pub const ARG_NONE: i32 = 0;
pub const ARG_TENSOR: i32 = 1;
pub const ARG_INT: i32 = 2;
pub const ARG_FLOAT: i32 = 3;
pub const ARG_BOOL: i32 = 4;
pub const ARG_INT_LIST: i32 = 5;
pub const ARG_FLOAT_LIST: i32 = 6;
pub const ARG_BOOL_LIST: i32 = 7;
pub const ARG_DTYPE: i32 = 8;
pub const ARG_STR: i32 = 9;
pub const ARG_TENSOR_LIST: i32 = 10;
pub const ARG_OPT_TENSOR_LIST: i32 = 11;
/// [`Emit`] kinds besides the argument kinds: a list of `i` tensors follows.
pub const OUT_LIST: i32 = 20;

/// Return codes.
pub const OK: i32 = 0;
/// The op is not Tessera's (unknown, unsupported, or rejecting these arguments): the C++
/// side runs it on torch CPU (counted and warned, as the Python device does).
pub const FALLBACK: i32 = 1;
/// An error to raise (a failed device op, a bad value).
pub const ERROR: i32 = 2;
/// A shortcut does not apply to these arguments: the caller takes the general path.
pub const MISS: i32 = 3;

/// One argument of an op, or one device tensor to read or write.
#[repr(C)]
pub struct DevArg {
    pub kind: i32,
    /// The keyword (keyword-only arguments), or null.
    pub name: *const c_char,
    /// TENSOR: the storage's value.
    pub value: *mut Tensor,
    /// TENSOR: the tensor's torch ScalarType; DTYPE: the ScalarType.
    pub dtype: i32,
    /// TENSOR: the rank; lists: the length.
    pub len: usize,
    /// TENSOR: the sizes; INT_LIST, BOOL_LIST (0 or 1): the items.
    pub ints: *const i64,
    /// TENSOR: the strides.
    pub strides: *const i64,
    /// TENSOR: the storage offset; INT, BOOL: the value.
    pub i: i64,
    /// FLOAT: the value.
    pub f: f64,
    /// FLOAT_LIST: the items.
    pub floats: *const f64,
    /// TENSOR_LIST, OPT_TENSOR_LIST: the items (TENSOR or NONE).
    pub items: *const DevArg,
    /// STR: the text.
    pub text: *const c_char,
}

/// Hands one result to the C++ side: a tensor (`value`, owned by the callee from then on, of
/// ScalarType `dtype` and shape `dims[..rank]`), OUT_LIST (`i` tensors follow), INT, BOOL
/// (`i`), FLOAT (`f`) or NONE.
pub type Emit = unsafe extern "C" fn(
    ctx: *mut c_void,
    kind: i32,
    value: *mut Tensor,
    dtype: i32,
    rank: usize,
    dims: *const i64,
    i: i64,
    f: f64,
);

/// Hands an error message (UTF-8, `len` bytes) to the C++ side.
pub type Fail = unsafe extern "C" fn(ctx: *mut c_void, msg: *const u8, len: usize);

enum Failure {
    Fallback(String),
    Error(String),
}

impl From<EagerError> for Failure {
    /// Which errors send the op to torch CPU: those the Python device falls back on
    /// (`dispatch._FALLBACK_ERRORS`); device failures are raised.
    fn from(e: EagerError) -> Self {
        let msg = e.to_string();
        match &e {
            EagerError::Op { source, .. } if !matches!(**source, OpError::Runtime { .. }) => {
                Failure::Fallback(msg)
            }
            EagerError::Usage(_) => Failure::Fallback(msg),
            _ => Failure::Error(msg),
        }
    }
}

type Res<T> = Result<T, Failure>;

fn error(msg: String) -> Failure {
    Failure::Error(msg)
}

unsafe fn slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

fn dtype_of(code: i32) -> Res<DType> {
    DType::from_torch_scalar_type(i64::from(code)).ok_or_else(|| {
        error(format!(
            "tpu: dtype (torch ScalarType {code}) is not supported by Tessera"
        ))
    })
}

fn call1(op: &str, args: Vec<ArgValue<Tensor>>) -> Res<Tensor> {
    match tessera_eager::call(op, args, vec![])?.into_iter().next() {
        Some(Output::Tensor(t)) => Ok(t),
        _ => Err(error(format!("tpu: `{op}` gave no tensor"))),
    }
}

/// Whether tensor `a` is its whole storage (of `numel` elements), row-major from offset 0.
unsafe fn covers_storage(a: &DevArg, numel: usize) -> bool {
    a.i == 0 && contiguous(a) && slice(a.ints, a.len).iter().product::<i64>() == numel as i64
}

/// A storage's value as one row-major dimension (what strided reads and writes index).
fn flat(value: &Tensor) -> Res<Tensor> {
    if value.dim() == 1 {
        return Ok(value.clone());
    }
    call1(
        "aten::view",
        vec![ArgValue::Tensor(value.clone()), ArgValue::IntList(vec![-1])],
    )
}

/// Makes the storage's value of `a`'s dtype. torch views a storage as another dtype in
/// `view(dtype)`, in its storage copies (`storage.cpu()`, `UntypedStorage.copy_`: as bytes,
/// what `torch.save` and `copy.deepcopy` do) and in `torch.load`'s rebuild (a tensor set over a
/// storage filled as bytes): the bytes are reinterpreted through the host (a sync point), and
/// the storage keeps the dtype it was last used as.
unsafe fn retype(a: &DevArg) -> Res<()> {
    let Some(value) = a.value.as_mut() else {
        return Ok(());
    };
    let want = dtype_of(a.dtype)?;
    if value.dtype() == want {
        return Ok(());
    }
    let bytes = value.to_host()?.bytes().to_vec();
    if bytes.len() % want.size_bytes() != 0 {
        return Err(error(format!(
            "tpu: a storage of {} bytes viewed as {want:?}, whose elements are {} bytes",
            bytes.len(),
            want.size_bytes()
        )));
    }
    let shape = vec![bytes.len() / want.size_bytes()];
    let host = HostTensor::from_bytes(want, shape, bytes)
        .map_err(|e| error(format!("tpu: retype: {e}")))?;
    *value = Tensor::from_host(&host)?;
    Ok(())
}

/// The eager value tensor argument `a` reads: its storage's value, reshaped or viewed.
unsafe fn read(a: &DevArg) -> Res<Tensor> {
    let want = dtype_of(a.dtype)?;
    let value = a
        .value
        .as_ref()
        .ok_or_else(|| error("tpu: a device tensor without a value".into()))?;
    let sizes = slice(a.ints, a.len);
    let (same_dtype, covers, same_shape) = value.with_type(|dtype, stored| {
        let same =
            stored.len() == sizes.len() && stored.iter().zip(sizes).all(|(&s, &d)| s as i64 == d);
        (
            dtype == want,
            covers_storage(a, stored.iter().product()),
            same,
        )
    });
    if !same_dtype {
        // Retyped, the storage's value is of `want`: read again.
        retype(a)?;
        return read(a);
    }
    if covers {
        if same_shape {
            return Ok(value.clone());
        }
        return call1(
            "aten::view",
            vec![
                ArgValue::Tensor(value.clone()),
                ArgValue::IntList(sizes.to_vec()),
            ],
        );
    }
    call1(
        "aten::as_strided",
        vec![
            ArgValue::Tensor(flat(value)?),
            ArgValue::IntList(slice(a.ints, a.len).to_vec()),
            ArgValue::IntList(slice(a.strides, a.len).to_vec()),
            ArgValue::Int(a.i),
        ],
    )
}

/// Makes tensor argument `a` hold `src` (a value of its shape), through its storage: the
/// storage's value is replaced when `a` covers it, else `src` is scattered into its positions.
unsafe fn write(a: &DevArg, src: Tensor) -> Res<()> {
    retype(a)?;
    let value = a
        .value
        .as_mut()
        .ok_or_else(|| error("tpu: a device tensor without a value".into()))?;
    if covers_storage(a, value.numel()) {
        *value = src;
        return Ok(());
    }
    let sizes = slice(a.ints, a.len);
    let strides = slice(a.strides, a.len);
    // The storage positions of `a`'s elements, row-major.
    let mut positions = vec![a.i];
    for (&d, &s) in sizes.iter().zip(strides) {
        positions = positions
            .iter()
            .flat_map(|&p| (0..d).map(move |k| p + k * s))
            .collect();
    }
    let n = positions.len();
    let index = Tensor::from_host(&HostTensor::from_vec(vec![n], positions))?;
    let flat = flat(value)?;
    let src = call1(
        "aten::reshape",
        vec![ArgValue::Tensor(src), ArgValue::IntList(vec![-1])],
    )?;
    *value = call1(
        "aten::index_put",
        vec![
            ArgValue::Tensor(flat),
            ArgValue::OptTensorList(vec![Some(index)]),
            ArgValue::Tensor(src),
        ],
    )?;
    Ok(())
}

/// An op argument as the eager runtime takes it; tensor arguments also land in `tensors`
/// (argument, value passed) for the write-back of written ones.
unsafe fn arg<'a>(a: &'a DevArg, tensors: &mut Vec<(&'a DevArg, Tensor)>) -> Res<ArgValue<Tensor>> {
    Ok(match a.kind {
        ARG_NONE => ArgValue::None,
        ARG_TENSOR => {
            let t = read(a)?;
            tensors.push((a, t.clone()));
            ArgValue::Tensor(t)
        }
        ARG_INT => ArgValue::Int(a.i),
        ARG_FLOAT => ArgValue::Float(a.f),
        ARG_BOOL => ArgValue::Bool(a.i != 0),
        ARG_INT_LIST => ArgValue::IntList(slice(a.ints, a.len).to_vec()),
        ARG_FLOAT_LIST => ArgValue::FloatList(slice(a.floats, a.len).to_vec()),
        ARG_BOOL_LIST => ArgValue::BoolList(slice(a.ints, a.len).iter().map(|&b| b != 0).collect()),
        ARG_DTYPE => ArgValue::DType(dtype_of(a.dtype)?),
        ARG_STR => ArgValue::Str(CStr::from_ptr(a.text).to_string_lossy().into_owned()),
        ARG_TENSOR_LIST | ARG_OPT_TENSOR_LIST => {
            let mut items = Vec::with_capacity(a.len);
            for x in slice(a.items, a.len) {
                items.push(match x.kind {
                    ARG_TENSOR => {
                        let t = read(x)?;
                        tensors.push((x, t.clone()));
                        Some(t)
                    }
                    _ => None,
                });
            }
            if a.kind == ARG_TENSOR_LIST {
                ArgValue::TensorList(items.into_iter().flatten().collect())
            } else {
                ArgValue::OptTensorList(items)
            }
        }
        k => return Err(error(format!("tpu: argument kind {k} is not known"))),
    })
}

unsafe fn emit_tensor(emit: Emit, ctx: *mut c_void, t: Tensor) {
    // The sizes on the stack up to rank 8 (an allocation per result otherwise).
    let (mut small, mut big) = ([0i64; 8], Vec::new());
    let (dtype, rank) = t.with_type(|dtype, shape| {
        if shape.len() <= small.len() {
            for (d, &s) in small.iter_mut().zip(shape) {
                *d = s as i64;
            }
        } else {
            big = shape.iter().map(|&s| s as i64).collect();
        }
        (dtype.torch_scalar_type(), shape.len())
    });
    let dims = if big.is_empty() {
        small.as_ptr()
    } else {
        big.as_ptr()
    };
    let boxed = Box::into_raw(Box::new(t));
    emit(ctx, ARG_TENSOR, boxed, dtype, rank, dims, 0, 0.0);
}

/// Hands a result that is not a tensor to `emit`: `kind` with its `i` or `f`.
unsafe fn emit_scalar(emit: Emit, ctx: *mut c_void, kind: i32, i: i64, f: f64) {
    emit(
        ctx,
        kind,
        std::ptr::null_mut(),
        0,
        0,
        std::ptr::null(),
        i,
        f,
    );
}

/// Runs `run`, reporting a failure through `fail`; a panic is an error, not an unwind into C++.
unsafe fn guarded(fail: Fail, ctx: *mut c_void, run: impl FnOnce() -> Res<()>) -> i32 {
    let (code, msg) = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(())) => return OK,
        Ok(Err(Failure::Fallback(m))) => (FALLBACK, m),
        Ok(Err(Failure::Error(m))) => (ERROR, m),
        Err(_) => (ERROR, "tpu: the eager runtime panicked".to_string()),
    };
    fail(ctx, msg.as_ptr(), msg.len());
    code
}

/// Calls the ATen op whose schema [`tessera_device_find`] gave on `n` arguments in this
/// thread's eager mode. Each result goes to `emit`, in order (in-place and `out=` overloads
/// return the tensors they wrote; those arguments flagged in `written` have been written
/// already). Returns [`OK`], [`FALLBACK`] or [`ERROR`] (then `fail` got the message).
///
/// # Safety
/// `schema` came from [`tessera_device_find`]; `args` holds `n` valid arguments whose pointers
/// are valid for the call; `written[i]` says whether argument i is written (n entries).
#[no_mangle]
pub unsafe extern "C" fn tessera_device_call(
    schema: *const OpSchema,
    n: usize,
    args: *const DevArg,
    written: *const u8,
    ctx: *mut c_void,
    emit: Emit,
    fail: Fail,
) -> i32 {
    guarded(fail, ctx, || {
        let schema: &'static OpSchema = schema
            .as_ref()
            .ok_or_else(|| error("tpu: an op outside Tessera's table was called".into()))?;
        let args = slice(args, n);
        let written = slice(written, n);
        let tensors_alone = args
            .iter()
            .all(|a| a.kind == ARG_TENSOR && a.name.is_null());
        let (outs, writes) = if tensors_alone {
            call_on_tensors(schema, args, written)?
        } else {
            call_on_args(schema, args, written)?
        };
        // The eager runtime wrote into the values passed: a view of the storage wrote
        // through; a copy is written back.
        for (a, passed) in writes {
            let value = &*a.value;
            if !passed.shares_storage(value) {
                write(a, passed)?;
            }
        }
        for o in outs {
            emit_output(emit, ctx, o);
        }
        Ok(())
    })
}

/// An op's outputs, and its written tensor arguments with the values they were passed as.
type Called<'a> = (Vec<Output>, Vec<(&'a DevArg, Tensor)>);

/// `call` on this thread, counting the programs it compiled on autograd's device thread.
fn counting_compiles<T>(
    call: impl FnOnce() -> tessera_eager::Result<T>,
) -> tessera_eager::Result<T> {
    if !ON_AUTOGRAD_THREAD.get() {
        return call();
    }
    let before = crate::eager::eager_compiles();
    let outs = call();
    AUTOGRAD_COMPILES.fetch_add(crate::eager::eager_compiles() - before, Relaxed);
    outs
}

/// A call on positional tensors alone (the unboxed kernels' `a + b`): the eager runtime's
/// memoized path.
unsafe fn call_on_tensors<'a>(
    schema: &'static OpSchema,
    args: &'a [DevArg],
    written: &[u8],
) -> Res<Called<'a>> {
    let mut values = Vec::with_capacity(args.len());
    let mut writes = Vec::new();
    for (a, &w) in args.iter().zip(written) {
        let t = read(a)?;
        if w != 0 {
            writes.push((a, t.clone()));
        }
        values.push(ArgValue::Tensor(t));
    }
    let outs = counting_compiles(|| tessera_eager::call_tensors(schema, values))?;
    Ok((outs, writes))
}

/// A call with any arguments.
unsafe fn call_on_args<'a>(
    schema: &'static OpSchema,
    args: &'a [DevArg],
    written: &[u8],
) -> Res<Called<'a>> {
    let (mut pos, mut kw) = (Vec::with_capacity(args.len()), Vec::new());
    let mut tensors = Vec::new();
    let mut writes = Vec::new();
    for (a, &w) in args.iter().zip(written) {
        let before = tensors.len();
        let v = arg(a, &mut tensors)?;
        if w != 0 {
            writes.extend(tensors[before..].iter().map(|(a, t)| (*a, t.clone())));
        }
        if a.name.is_null() {
            pos.push(v);
        } else {
            kw.push((CStr::from_ptr(a.name).to_str().unwrap_or(""), v));
        }
    }
    let outs = counting_compiles(|| tessera_eager::call_schema(schema, pos, kw))?;
    Ok((outs, writes))
}

/// A shortcut for a C++ call site that just called `schema` on tensor arguments `args` alone
/// (positional, none written), or null (see [`Shortcut::find`]). Its result's torch ScalarType
/// goes to `*dtype`, its rank to `*rank` and its sizes to `dims` (room for 8; null when the
/// rank is larger). Released with [`tessera_device_shortcut_free`].
///
/// # Safety
/// As [`tessera_device_call`]'s `schema` and `args`; `dtype`, `rank` writable, `dims` holds 8.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_shortcut(
    schema: *const OpSchema,
    n: usize,
    args: *const DevArg,
    dtype: *mut i32,
    rank: *mut usize,
    dims: *mut i64,
) -> *mut Shortcut {
    let find = || -> Option<Box<Shortcut>> {
        let schema: &'static OpSchema = schema.as_ref()?;
        let args = slice(args, n);
        if !args
            .iter()
            .all(|a| a.kind == ARG_TENSOR && a.name.is_null())
        {
            return None;
        }
        let tensors = args
            .iter()
            .map(|a| read(a).ok())
            .collect::<Option<Vec<_>>>()?;
        let sc = Shortcut::find(schema, &tensors)?;
        let (d, shape) = sc.output_type()?;
        if shape.len() > 8 {
            return None;
        }
        *dtype = d.torch_scalar_type();
        *rank = shape.len();
        for (k, &s) in shape.iter().enumerate() {
            *dims.add(k) = s as i64;
        }
        Some(Box::new(sc))
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(find))
        .ok()
        .flatten()
        .map_or(std::ptr::null_mut(), Box::into_raw)
}

/// Calls shortcut `sc` on tensor arguments `args`: [`OK`] with the result in `*out`, [`MISS`]
/// when it does not apply (an argument that does not cover its storage, is not of the type
/// the shortcut was made for, or whose entry is gone), [`FALLBACK`] or [`ERROR`] as
/// [`tessera_device_call`] (then `fail` got the message).
///
/// # Safety
/// `sc` came from [`tessera_device_shortcut`] and is not released; `args` holds `n` valid
/// arguments; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_call_shortcut(
    sc: *const Shortcut,
    n: usize,
    args: *const DevArg,
    out: *mut *mut Tensor,
    ctx: *mut c_void,
    fail: Fail,
) -> i32 {
    let mut missed = false;
    let code = guarded(fail, ctx, || {
        let (Some(sc), args) = (sc.as_ref(), slice(args, n)) else {
            missed = true;
            return Ok(());
        };
        // Each argument the whole value of its storage: contiguous from offset 0 and of the
        // shortcut's type (the stored value's type is checked by the call).
        let mut values: smallvec::SmallVec<[&Tensor; 4]> = smallvec::SmallVec::new();
        for (k, a) in args.iter().enumerate() {
            let value = a.value.as_ref();
            let contiguous = a.kind == ARG_TENSOR && a.i == 0 && contiguous(a);
            let typed = dtype_of(a.dtype).is_ok_and(|d| sc.takes(k, d, slice(a.ints, a.len)));
            match value {
                Some(v) if contiguous && typed => values.push(v),
                _ => {
                    missed = true;
                    return Ok(());
                }
            }
        }
        match counting_compiles(|| sc.call(&values))? {
            Some(t) => *out = Box::into_raw(Box::new(t)),
            None => missed = true,
        }
        Ok(())
    });
    if missed && code == OK {
        MISS
    } else {
        code
    }
}

/// Releases a shortcut.
///
/// # Safety
/// `sc` came from [`tessera_device_shortcut`] and is released once, or is null.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_shortcut_free(sc: *mut Shortcut) {
    if !sc.is_null() {
        let _ = std::panic::catch_unwind(|| drop(Box::from_raw(sc)));
    }
}

/// Whether tensor argument `a`'s strides are row-major contiguous for its sizes.
unsafe fn contiguous(a: &DevArg) -> bool {
    let mut expected = 1;
    for (&d, &s) in slice(a.ints, a.len)
        .iter()
        .zip(slice(a.strides, a.len))
        .rev()
    {
        if d > 1 && s != expected {
            return false;
        }
        expected *= d.max(1);
    }
    true
}

/// Hands one output to `emit` (a list as OUT_LIST, then its tensors).
unsafe fn emit_output(emit: Emit, ctx: *mut c_void, o: Output) {
    match o {
        Output::Tensor(t) => emit_tensor(emit, ctx, t),
        Output::Tensors(ts) => {
            emit_scalar(emit, ctx, OUT_LIST, ts.len() as i64, 0.0);
            for t in ts {
                emit_tensor(emit, ctx, t);
            }
        }
        Output::Int(i) => emit_scalar(emit, ctx, ARG_INT, i, 0.0),
        Output::Bool(b) => emit_scalar(emit, ctx, ARG_BOOL, b as i64, 0.0),
        Output::Float(x) => emit_scalar(emit, ctx, ARG_FLOAT, 0, x),
        Output::None => emit_scalar(emit, ctx, ARG_NONE, 0, 0.0),
    }
}

/// A new storage value of ScalarType `dtype` and shape `dims[..rank]` (a device tensor that
/// covers its storage gives its own shape, so that reading it needs no view): `nbytes` of
/// host memory at `data` (row-major), or zeros when `data` is null. `*out` receives it.
///
/// # Safety
/// `dims` holds `rank` sizes; `data` (if not null) holds `nbytes` bytes; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_upload(
    dtype: i32,
    rank: usize,
    dims: *const i64,
    data: *const u8,
    nbytes: usize,
    out: *mut *mut Tensor,
    ctx: *mut c_void,
    fail: Fail,
) -> i32 {
    guarded(fail, ctx, || {
        let dtype = dtype_of(dtype)?;
        let shape = slice(dims, rank)
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| error(format!("tpu: negative size {d}"))))
            .collect::<Res<Vec<usize>>>()?;
        let host = if data.is_null() {
            HostTensor::zeros(dtype, shape)
        } else {
            TO_DEVICE.fetch_add(1, Relaxed);
            HostTensor::from_bytes(dtype, shape, slice(data, nbytes).to_vec())
                .map_err(|e| error(format!("tpu: upload: {e}")))?
        };
        *out = Box::into_raw(Box::new(Tensor::from_host(&host)?));
        Ok(())
    })
}

/// Copies the elements of device tensor `a` (row-major) into `nbytes` at `dst`: a sync point.
///
/// # Safety
/// `a` is a valid TENSOR argument; `dst` holds `nbytes` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_read(
    a: *const DevArg,
    dst: *mut u8,
    nbytes: usize,
    ctx: *mut c_void,
    fail: Fail,
) -> i32 {
    guarded(fail, ctx, || {
        TO_HOST.fetch_add(1, Relaxed);
        let h = read(&*a)?.to_host()?;
        if h.bytes().len() != nbytes {
            return Err(error(format!(
                "tpu: read {} bytes into {nbytes}",
                h.bytes().len()
            )));
        }
        std::ptr::copy_nonoverlapping(h.bytes().as_ptr(), dst, nbytes);
        Ok(())
    })
}

/// Makes device tensor `a` hold `src` (a value of its shape and dtype; taken).
///
/// # Safety
/// `a` is a valid TENSOR argument; `src` a value from this module, not used after.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_write(
    a: *const DevArg,
    src: *mut Tensor,
    ctx: *mut c_void,
    fail: Fail,
) -> i32 {
    let src = *Box::from_raw(src);
    guarded(fail, ctx, || write(&*a, src))
}

/// The value device tensor `a` reads, as a tensor of its own (a copy where `a` is a view of
/// its storage): `*out` receives it (for [`eager_from_raw`]).
///
/// # Safety
/// `a` is a valid TENSOR argument; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_value(
    a: *const DevArg,
    out: *mut *mut Tensor,
    ctx: *mut c_void,
    fail: Fail,
) -> i32 {
    guarded(fail, ctx, || {
        let mut t = read(&*a)?;
        if t.is_view() {
            t = call1("aten::clone", vec![ArgValue::Tensor(t)])?;
        }
        *out = Box::into_raw(Box::new(t));
        Ok(())
    })
}

/// Values from [`tessera_device_value`] as `EagerTensor`s (torch.compile's programs take
/// device tensors' values so).
///
/// # Safety
/// Each of `raws` came from [`tessera_device_value`] and is taken once.
#[pyo3::pyfunction]
pub unsafe fn eager_from_raws(raws: Vec<usize>) -> Vec<EagerTensor> {
    raws.into_iter()
        .map(|raw| EagerTensor {
            t: *Box::from_raw(raw as *mut Tensor),
        })
        .collect()
}

/// `EagerTensor`s' values for new device tensors: (raw value, torch ScalarType, shape) each;
/// the C++ side's `wrap_all` takes them.
#[pyo3::pyfunction]
pub fn eager_into_raws(es: Vec<pyo3::PyRef<'_, EagerTensor>>) -> Vec<(usize, i32, Vec<usize>)> {
    es.iter()
        .map(|e| {
            let t = e.t.clone();
            let (dtype, shape) = (t.dtype().torch_scalar_type(), t.shape());
            (Box::into_raw(Box::new(t)) as usize, dtype, shape)
        })
        .collect()
}

/// Releases a value (a storage's deleter calls this once).
///
/// # Safety
/// `v` came from this module and is released once, or is null.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_release(v: *mut Tensor) {
    if !v.is_null() {
        // A panic must not unwind into torch's deleter: the value is then leaked.
        let _ = std::panic::catch_unwind(|| drop(Box::from_raw(v)));
    }
}

/// Called on autograd's device thread when it starts: its ops launch one by one (Strict;
/// Debug if that is the mode), since a deferred graph belongs to the thread that made it and
/// the gradients are read on the caller's thread.
#[no_mangle]
pub extern "C" fn tessera_device_autograd_thread() {
    let _ = std::panic::catch_unwind(|| {
        ON_AUTOGRAD_THREAD.set(true);
        if tessera_eager::mode() == tessera_eager::EagerMode::DeferAndFuse {
            let _ = tessera_eager::set_mode(tessera_eager::EagerMode::Strict);
        }
    });
}

/// The schema of ATen op `op` (`aten::convolution`) in Tessera's op table, or null: the C++
/// dispatch finds each op once and calls it by its schema.
///
/// # Safety
/// `op` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tessera_device_find(op: *const c_char) -> *const OpSchema {
    CStr::from_ptr(op)
        .to_str()
        .ok()
        .and_then(tessera_ops::find)
        .map_or(std::ptr::null(), |s| s as *const OpSchema)
}

/// The addresses of this module's entry points, for the C++ dispatch: call, upload, read,
/// write, release, autograd_thread, find, value, shortcut, call_shortcut, shortcut_free.
#[pyo3::pyfunction]
pub fn device_call_addresses() -> Vec<usize> {
    vec![
        tessera_device_call as *const () as usize,
        tessera_device_upload as *const () as usize,
        tessera_device_read as *const () as usize,
        tessera_device_write as *const () as usize,
        tessera_device_release as *const () as usize,
        tessera_device_autograd_thread as *const () as usize,
        tessera_device_find as *const () as usize,
        tessera_device_value as *const () as usize,
        tessera_device_shortcut as *const () as usize,
        tessera_device_call_shortcut as *const () as usize,
        tessera_device_shortcut_free as *const () as usize,
    ]
}

/// The C++ dispatch's counters: (uploads to the device, reads to the host, programs compiled
/// on autograd's thread); `reset` zeroes them after reading.
#[pyo3::pyfunction]
#[pyo3(signature = (reset = false))]
pub fn device_counts(reset: bool) -> (u64, u64, u64) {
    let take = |c: &AtomicU64| {
        if reset {
            c.swap(0, Relaxed)
        } else {
            c.load(Relaxed)
        }
    };
    (take(&TO_DEVICE), take(&TO_HOST), take(&AUTOGRAD_COMPILES))
}
